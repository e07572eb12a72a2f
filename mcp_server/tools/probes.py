"""run_probe tool adapter."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.hosts.base import Host
from mcp_server.limits import HostStr
from mcp_server.tools._common import HOST_HELP, READ_ONLY, app_of, tool_errors
from mcp_server.verify.probes import ProbeInputs, ProbeResult
from mcp_server.verify.probes import run_probe as run_probe_on

_SUMMARY_CUT = 300


def register(server: MCPServer) -> None:
    @server.tool(title="Probe a result", annotations=READ_ONLY)
    async def run_probe(
        ctx: Context,
        inputs: Annotated[ProbeInputs, Field(description="probe + inputs (numbers inline, or "
                                             "`file: {path, host?}` on a box)")],
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        run_id: Annotated[str | None, Field(description="the run this finding is about (links it in the ledger)",
                                            max_length=128)] = None,
    ) -> ProbeResult:
        """Test a surprising number before claiming it: a verdict, the numbers behind it, the disclosure it needs.

        Verdicts: bug, effect, noise, instability, stochastic, underpowered, confounded, collapsed,
        leak, clean, unverified, not_applicable. Never blocks: a finding is reported, the user
        decides. Numbers come inline or as files on a box (`file: {path}`, bounded in size,
        read through the host layer). Cheap first: control_diff, then trajectory, then
        seed_variance / mde. Each result names the next probe and a references:// page;
        every result is recorded in the ledger. See references://verifying/methodology.
        """
        app = app_of(ctx)

        async def open_host(name: str) -> Host:
            return await app.pool.host(app.pool.spec(name))

        with tool_errors(app):
            result = await run_probe_on(inputs, open_host, host)
            hosts = sorted({r.host for r in result.inputs_read})
            summary = f"{result.probe}: {result.verdict} - {result.reason}"[:_SUMMARY_CUT]
            result.ledger_id = app.ledger.record(
                "probe", host=hosts[0] if len(hosts) == 1 else None, run_id=run_id, summary=summary,
                data=result.model_dump(mode="json"))
        return result
