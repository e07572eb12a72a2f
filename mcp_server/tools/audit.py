"""audit_box tool adapter."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.run.audit.box import AuditResult, audit
from mcp_server.run.audit.model import ExpectGpu
from mcp_server.run.teardown.cost import accrued
from mcp_server.tools._common import READ_ONLY, HostError, app_of, fan_out, tool_errors

MAX_HOSTS = 32


class AuditOutcome(BaseModel):
    host: str
    audit: AuditResult | None = None
    error: HostError | None = None


class AuditBoxResult(BaseModel):
    outcomes: list[AuditOutcome] = Field(description="one per host, in the order asked")


async def _audit_one(app: App, name: str, policy, **kw) -> AuditResult:  # type: ignore[no-untyped-def]
    spec = app.pool.spec(name, policy)
    host = await app.pool.host(spec)
    result = await audit(host, spec, ledger=app.ledger, **kw)
    result.accrued_cost = accrued(app.ledger, spec)
    if result.idle_warning and result.accrued_cost:
        result.idle_warning += f" Accrued so far: {result.accrued_cost}."
    return result


def register(server: MCPServer) -> None:  # type: ignore[type-arg]
    @server.tool(annotations=READ_ONLY)
    async def audit_box(
        ctx: Context,
        host: Annotated[str | None, Field(description='box to audit: "local", an inventory name, an ~/.ssh/config alias or user@host[:port]')] = "local",
        hosts: Annotated[list[str] | None, Field(description="audit several boxes concurrently instead of `host`; one outcome per box", max_length=MAX_HOSTS)] = None,
        paths: Annotated[list[str] | None, Field(description="extra box paths to measure (bytes and inodes), absolute or ~/...", max_length=16)] = None,
        expect_gpu: Annotated[ExpectGpu | None, Field(description="what you rented: GPU name substring, count, memory per GPU")] = None,
        python: Annotated[str | None, Field(description="interpreter the job will use (default: the profile's, else python3)")] = None,
        code_dir: Annotated[str | None, Field(description="project directory on the box: scanned for CRLF scripts and framework pins")] = None,
        expect_files: Annotated[dict[str, str] | None, Field(description="box path -> sha256 of your local copy: proves the code you changed is deployed")] = None,
        host_key_policy: Annotated[Literal["strict", "accept-new"] | None, Field(description="override the inventory's host-key policy for this call (accept-new pins a first-seen key)")] = None,
    ) -> AuditBoxResult:
        """Audit a GPU box before paying for a run: GPUs, health, zombie VRAM, disk bytes AND inodes, cgroup memory/CPU, /dev/shm, env identity, survival tier, proxies, tools.

        Each check returns PASS/WARN/FAIL/SKIP with the evidence it saw and a route (a
        references:// URI explaining it). Read-only apart from one probe file created and
        removed in the durable root. One SSH round trip per box; several boxes run
        concurrently and one unreachable box never hides the others.
        See references://run-remote/audit-checks and profiles://<platform>.
        """
        app = app_of(ctx)
        kw = dict(paths=paths, expect_gpu=expect_gpu, python=python, code_dir=code_dir, expect_files=expect_files)
        if hosts:
            rows = await fan_out(app, list(hosts), lambda n: _audit_one(app, n, host_key_policy, **kw))
            return AuditBoxResult(outcomes=[AuditOutcome(host=n, audit=r, error=e) for n, r, e in rows])
        if not host:
            raise ToolError("give `host` or `hosts`")
        with tool_errors(app):
            result = await _audit_one(app, host, host_key_policy, **kw)
        return AuditBoxResult(outcomes=[AuditOutcome(host=host, audit=result)])
