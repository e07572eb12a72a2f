"""cancel_run and wait_for_run tool adapters: stop a live run; wait, bounded, for one to change."""

from __future__ import annotations

import getpass
import socket
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.limits import HostStr, IdStr
from mcp_server.run.jobs.cancel import MAX_GRACE_S, CancelResult, FirstSignal, cancel_record, cancel_run
from mcp_server.run.jobs.cancel_array import cancel_array, is_array_id
from mcp_server.run.jobs.engines.base import DEFAULT_GRACE_S
from mcp_server.run.jobs.patrol_note import acknowledge
from mcp_server.run.jobs.wait import DEFAULT_WAIT_S, MAX_WAIT_S, WaitResult, wait_for_run
from mcp_server.tools._common import DESTRUCTIVE_IDEMPOTENT, HOST_HELP, READ_ONLY, app_of, tool_errors

HostArg = Annotated[HostStr, Field(description=HOST_HELP)]
RunIdArg = Annotated[IdStr, Field(description="run id from launch_detached or list_runs")]
CancelIdArg = Annotated[IdStr, Field(
    description="run id, or a Slurm sweep's queue_id (array-...): all its cells")]
ReasonArg = Annotated[str | None, Field(
    description="why (kept in the run dir and the ledger)", max_length=500)]
SignalFirstArg = Annotated[FirstSignal | None, Field(
    description="a signal before TERM, e.g. USR1 so the job checkpoints")]
GraceArg = Annotated[float, Field(description="seconds after each signal before the next (TERM, then KILL)",
                                  ge=0.1, le=MAX_GRACE_S)]
TimeoutArg = Annotated[float, Field(
    description="longest wait, s (past ~60 s only if your client keeps calls alive)",
    ge=1, le=MAX_WAIT_S)]


def _who(ctx: Context[Any, Any]) -> str:
    """The MCP client that asked (its own name for itself) and the user the server runs as."""
    params = ctx.session.client_params
    client = params.client_info.name if params is not None else "an MCP client"
    return f"{client} via {getpass.getuser()}@{socket.gethostname()}"


def _register_cancel_run(server: MCPServer) -> None:
    @server.tool(name="cancel_run", title="Cancel a run", annotations=DESTRUCTIVE_IDEMPOTENT)
    async def cancel_run_tool(
        ctx: Context, run_id: CancelIdArg, host: HostArg = "local", reason: ReasonArg = None,
        signal_first: SignalFirstArg = None, grace_s: GraceArg = DEFAULT_GRACE_S,
    ) -> CancelResult:
        """Stop a live run: its whole process group gets signal_first (optional), TERM, grace, then KILL.

        Records who, when and why in the run dir (`cancelled`, written atomically before any
        signal) and the ledger; the run then reads `cancelled` in tail_logs, list_runs and
        wait_for_run, never failed or lost. A run that has already ended is left as it is:
        changed=false says so. Its files (log, checkpoints) stay on the box.
        See references://run-remote/monitoring#lifecycle.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                from mcp_server.run.jobs.engines.kube import service as kube  # lightkube loads only for such a host

                return await kube.cancel(app, spec, run_id, reason, signal_first, grace_s)
            if is_array_id(run_id):
                mark = cancel_record(run_id, _who(ctx), reason, signal_first, grace_s)
                return await cancel_array(await app.pool.host(spec), spec, run_id, mark, signal_first=signal_first,
                                          ledger=app.ledger)
            return await cancel_run(await app.pool.host(spec), spec, run_id, by=_who(ctx), reason=reason,
                                    signal_first=signal_first, grace_s=grace_s, ledger=app.ledger)


def _register_wait_for_run(server: MCPServer) -> None:
    @server.tool(name="wait_for_run", title="Wait for a run", annotations=READ_ONLY)
    async def wait_for_run_tool(
        ctx: Context, run_id: RunIdArg, host: HostArg = "local", timeout_s: TimeoutArg = DEFAULT_WAIT_S,
    ) -> WaitResult:
        """Wait until a run changes state or ends, at most timeout_s; then say where it stands.

        Returns as soon as the run ends (final state, exit code, failure signatures) or its state
        changes (queued -> running); otherwise, at the bound, "still running, call again" with
        log_offset for tail_logs. Sends progress (elapsed, state, the log's last line) at least
        every 15 s when the client asked for progress. Cancelling the call stops only the wait.
        See references://run-remote/monitoring#lifecycle.
        """
        app = app_of(ctx)

        async def progress(elapsed: float, message: str) -> None:
            await ctx.report_progress(elapsed, timeout_s, app.redactor.scrub(message))

        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                from mcp_server.run.jobs.engines.kube import service as kube  # lightkube loads only for such a host

                return await kube.wait(app, spec, run_id, timeout_s=timeout_s, progress=progress)
            waited = await wait_for_run(await app.pool.host(spec), spec, run_id, redactor=app.redactor,
                                        timeout_s=timeout_s, progress=progress)
            acknowledge(waited.patrol, app.ledger, spec.name, run_id)
            return waited


def register(server: MCPServer) -> None:
    _register_cancel_run(server)
    _register_wait_for_run(server)
