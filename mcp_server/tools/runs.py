"""launch_detached, tail_logs and list_runs tool adapters."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.run.jobs.launch import MAX_PROBE_S, LaunchRequest, LaunchResult, launch
from mcp_server.run.jobs.listing import HostRuns, list_runs
from mcp_server.run.jobs.logs import DEFAULT_STALL_S, MAX_WINDOW, TailResult, tail_logs
from mcp_server.run.jobs.queue import QueueResult, launch_queue
from mcp_server.tools._common import LAUNCH, READ_ONLY, HostError, app_of, fan_out, tool_errors

HostArg = Annotated[str, Field(description='"local", an inventory name, an ~/.ssh/config alias or user@host[:port]')]


class LaunchOutcome(BaseModel):
    host: str
    launch: LaunchResult | None = None
    error: HostError | None = None


class LaunchDetachedResult(BaseModel):
    outcomes: list[LaunchOutcome] = Field(default_factory=list, description="one per host (hosts fan-out or single host)")
    queue: QueueResult | None = Field(default=None, description="set when `commands` queued several jobs on one host")


class ListRunsOutcome(BaseModel):
    host: str
    runs: HostRuns | None = None
    error: HostError | None = None


class ListRunsResult(BaseModel):
    outcomes: list[ListRunsOutcome]


async def _launch_one(app: App, name: str, req: LaunchRequest) -> LaunchResult:
    spec = app.pool.spec(name)
    return await launch(await app.pool.host(spec), spec, req, ledger=app.ledger, redactor=app.redactor)


def register(server: MCPServer) -> None:  # type: ignore[type-arg]
    @server.tool(annotations=LAUNCH)
    async def launch_detached(
        ctx: Context,
        command: Annotated[str | None, Field(description="shell command to run, e.g. 'python train.py --cfg a.yaml'")] = None,
        host: HostArg = "local",
        hosts: Annotated[list[str] | None, Field(description="launch the same command on several boxes; one outcome each", max_length=32)] = None,
        commands: Annotated[list[str] | None, Field(description="several commands for ONE host, run as an on-box queue", max_length=256)] = None,
        max_concurrent: Annotated[int, Field(description="queue: how many of `commands` run at once", ge=1, le=64)] = 1,
        name: Annotated[str | None, Field(description="run name (letters, digits . _ -): launching a live name returns that run instead of a second job")] = None,
        workdir: Annotated[str | None, Field(description="absolute box directory to run in (default: the durable root)")] = None,
        env: Annotated[dict[str, str] | None, Field(description="non-secret environment variables for the job")] = None,
        secret_env: Annotated[list[str] | None, Field(description="NAMES of variables in the server's own environment to pass to the job over stdin; values never appear in argv, ps, files, logs, ledger or output")] = None,
        backend: Annotated[Literal["shell", "tmux"], Field(description="shell: setsid detached process; tmux: a named session you can attach to")] = "shell",
        allow_fallback: Annotated[bool, Field(description="with backend=tmux, fall back to shell when tmux is missing")] = False,
        probe_s: Annotated[float, Field(description="seconds to watch for an early exit before handing back", ge=0, le=MAX_PROBE_S)] = 5.0,
        relaunch: Annotated[bool, Field(description="start again a name whose last run has finished")] = False,
        min_free_gib: Annotated[float, Field(description="disk gate: refuse when the durable root has less free space", ge=0)] = 5.0,
        min_free_inodes: Annotated[int, Field(description="disk gate: refuse below this many free inodes", ge=0)] = 10000,
        outputs: Annotated[list[str] | None, Field(description="files the run must produce (paths/globs relative to output_root): verify_artifacts and teardown check them", max_length=256)] = None,
        output_root: Annotated[str | None, Field(description="where outputs live on the box (default: workdir)")] = None,
    ) -> LaunchDetachedResult:
        """Start a job that survives SSH drops, server restarts and client exit; probe it, then hand back.

        Creates <durable_root>/.rgt/runs/<run_id>/ on the box (run.json, wrapper, log, pid;
        exit_code written atomically on exit), refuses when the disk is below the floor in
        bytes or inodes, and watches for up to probe_s: an import error comes back in this
        result with the log tail and the failure signatures. Status later comes from
        tail_logs (process + exit file, never log text). See
        references://run-remote/lifecycle-checklist#phase-3 and references://run-remote/monitoring#run-status.
        """
        app = app_of(ctx)
        with tool_errors(app):
            base = dict(name=name, workdir=workdir, env=env or {}, secret_env=secret_env or [], backend=backend,
                        allow_fallback=allow_fallback, probe_s=probe_s, relaunch=relaunch,
                        min_free_gib=min_free_gib, min_free_inodes=min_free_inodes,
                        outputs=outputs or [], output_root=output_root)
            if commands:
                if command or hosts:
                    raise ToolError("give `commands` (a queue on one host) without `command` or `hosts`")
                spec = app.pool.spec(host)
                queue = await launch_queue(await app.pool.host(spec), spec, commands, max_concurrent,
                                           LaunchRequest(command="queue", **base), ledger=app.ledger, redactor=app.redactor)
                return LaunchDetachedResult(queue=queue)
            if not command:
                raise ToolError("give `command` (or `commands` for a queue)")
            req = LaunchRequest(command=command, **base)
            if hosts:
                rows = await fan_out(app, list(hosts), lambda n: _launch_one(app, n, req))
                return LaunchDetachedResult(outcomes=[LaunchOutcome(host=n, launch=r, error=e) for n, r, e in rows])
            return LaunchDetachedResult(outcomes=[LaunchOutcome(host=host, launch=await _launch_one(app, host, req))])

    @server.tool(name="tail_logs", annotations=READ_ONLY)
    async def tail_logs_tool(
        ctx: Context,
        host: HostArg = "local",
        run_id: Annotated[str | None, Field(description="run id from launch_detached or list_runs")] = None,
        path: Annotated[str | None, Field(description="or any log file on the box (absolute or ~/...)")] = None,
        offset: Annotated[int | None, Field(description="byte offset to read from: pass the previous next_offset", ge=0)] = None,
        max_bytes: Annotated[int, Field(description="window size in bytes", ge=1, le=MAX_WINDOW)] = 16384,
        lines: Annotated[int | None, Field(description="instead of offset: the last N lines", ge=1, le=5000)] = None,
        stall_s: Annotated[float, Field(description="warn when a running job's log has not grown for this long", ge=30)] = DEFAULT_STALL_S,
    ) -> TailResult:
        """Read a run's log incrementally (cost flat in log size) with its real status and failure signatures.

        Status comes from the process and the exit file: running, succeeded, failed (exit code),
        lost (no process and no exit file; evidence says reboot, OOM kill or hard kill) — a
        transport failure is an error, never a status. Without offset or lines you get the last
        max_bytes; continue with offset=next_offset. Signatures route to references
        (references://run-remote/monitoring#failure-signatures).
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            return await tail_logs(await app.pool.host(spec), spec, redactor=app.redactor, run_id=run_id,
                                   path=path, offset=offset, max_bytes=max_bytes, lines=lines, stall_s=stall_s)

    @server.tool(name="list_runs", annotations=READ_ONLY)
    async def list_runs_tool(
        ctx: Context,
        host: Annotated[str | None, Field(description="one box; omit for every inventory host and every host the ledger launched on")] = None,
    ) -> ListRunsResult:
        """List the runs on a box from its run directories, with status, the ledger reconciled, and the cost meter.

        Warns (never acts) when a billed box has no live run and idle GPUs.
        See references://run-remote/monitoring#run-status.
        """
        app = app_of(ctx)
        with tool_errors(app):
            names = [host] if host else sorted({"local", *app.pool.inventory.hosts,
                                                *(e.host for e in app.ledger.events("launch", limit=10000) if e.host)})

        async def one(n: str) -> HostRuns:
            spec = app.pool.spec(n)
            return await list_runs(await app.pool.host(spec), spec, app.ledger)

        if host:
            with tool_errors(app):
                return ListRunsResult(outcomes=[ListRunsOutcome(host=host, runs=await one(host))])
        rows = await fan_out(app, names, one)
        return ListRunsResult(outcomes=[ListRunsOutcome(host=n, runs=r, error=e) for n, r, e in rows])
