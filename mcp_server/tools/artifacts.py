"""verify_artifacts tool adapter."""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.errors import InputError, NotFoundError
from mcp_server.run.jobs.rundir import RunPaths, check_run_id
from mcp_server.verify.artifacts.verifier import VerifyRequest, VerifyResult, verify_artifacts
from mcp_server.tools._common import WRITES_LOCAL, app_of, tool_errors


async def _run_outputs(host, spec, run_id: str) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """The run's declared outputs from its run.json on the box."""
    res = await host.run(f"cat {RunPaths(spec.durable_root, check_run_id(run_id)).file('run.json')} 2>/dev/null")
    if not res.ok:
        raise NotFoundError(f"no run {run_id} on this box", host=spec.name, next_step="list_runs shows the runs")
    outputs = json.loads(res.text).get("outputs")
    if not outputs:
        raise InputError(f"run {run_id} declared no outputs", host=spec.name,
                         next_step="pass root and roster (the files that must exist)")
    return outputs["root"], outputs["patterns"]


def register(server: MCPServer) -> None:  # type: ignore[type-arg]
    @server.tool(name="verify_artifacts", annotations=WRITES_LOCAL)
    async def verify_artifacts_tool(
        ctx: Context,
        host: Annotated[str, Field(description='the box: "local", an inventory name, an ssh alias or user@host[:port]')] = "local",
        root: Annotated[str | None, Field(description="result root on the box (absolute or ~/...); default: the run's output root")] = None,
        roster: Annotated[list[str] | None, Field(description="files that must exist: paths or globs relative to root (e.g. 'best.pth', 'seed*/metrics.json', '**/*.safetensors'); default: the run's declared outputs", max_length=1000)] = None,
        run_id: Annotated[str | None, Field(description="the run these results belong to (recorded; supplies root and roster when they are omitted)")] = None,
        dest: Annotated[str | None, Field(description="local destination (default $RGT_HOME/pulls/<host>/<run>)")] = None,
        budget_s: Annotated[float, Field(description="return before this many seconds with done=false; call again to continue", ge=2, le=55)] = 35.0,
        allow_pickle: Annotated[bool, Field(description="load checkpoints that need unsafe pickle (only for files you trust)")] = False,
    ) -> VerifyResult:
        """Pull results off the box and prove every byte: roster, on-box SHA-256 manifest, resumable pull, load checks.

        Builds an immutable PULL_MANIFEST.json beside the data on the box (hashed there, in
        parallel), pulls resumably with the hash computed while receiving, checks each file by
        type (safetensors offsets, torch weights-only load, json/csv/npz/parquet), writes a
        local PULL_VERIFIED.json and records it in the ledger. Returns within budget_s with
        done=false when more remains. Teardown trusts only this. See
        references://run-remote/principles#iron-law and references://run-remote/artifact-layout.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            box = await app.pool.host(spec)
            if run_id and (root is None or roster is None):
                run_root, run_roster = await _run_outputs(box, spec, run_id)
                root, roster = root or run_root, roster or run_roster
            if not root or not roster:
                raise InputError("give root and roster, or the run_id of a run that declared outputs")

            async def progress(done: int, total: int, path: str) -> None:
                await ctx.report_progress(done, total, f"pulling {path}")

            req = VerifyRequest(root=root, roster=roster, run_id=run_id, dest=dest, budget_s=budget_s,
                                allow_pickle=allow_pickle)
            return await verify_artifacts(box, spec, req, pulls_dir=app.settings.pulls_dir, ledger=app.ledger,
                                          progress=progress)
