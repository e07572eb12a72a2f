"""preflight tool adapter: a CPU smoke, a preemption drill and a disk budget before renting."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.limits import MAP_MAX, CommandStr, HostStr, IdStr, PathStr, PatternStr, ValueStr
from mcp_server.run.preflight.models import PreflightResult
from mcp_server.tools._common import HOST_HELP, STARTS_WORK, app_of, tool_errors

HostArg = Annotated[HostStr, Field(description=HOST_HELP)]
CommandArg = Annotated[CommandStr | None, Field(description="tiny config, 6+ saves")]
RunIdArg = Annotated[IdStr | None, Field(description="a started one: its verdict")]
StepsArg = Annotated[int, Field(description="smoke length", ge=1, le=100_000)]
CkptArg = Annotated[list[PatternStr] | None, Field(description="checkpoint globs", max_length=16)]
PlannedArg = Annotated[float | None, Field(description="full run, in logged steps", gt=0)]
BudgetHostArg = Annotated[HostStr | None, Field(description="disk budget: this box")]
BudgetGibArg = Annotated[float | None, Field(description="or a disk size, GiB", gt=0)]


async def _report(app: App, box: Host, spec: HostSpec, run_id: str, planned_steps: float | None,
                  budget_host: str | None, budget_gib: float | None) -> PreflightResult:
    from mcp_server.run.preflight import service  # the drill's machinery loads on the first call

    async def resolve(name: str) -> tuple[Host, HostSpec]:
        tspec = app.pool.spec(name)
        if tspec.kind == "kubernetes":
            raise InputError("budget_host must be this machine or an SSH/Slurm box")
        return await app.pool.host(tspec), tspec

    return await service.report(box, spec, run_id, resolve, planned_steps=planned_steps, budget_host=budget_host,
                                budget_gib=budget_gib)


def register(server: MCPServer) -> None:
    @server.tool(title="Preflight before renting", annotations=STARTS_WORK)
    async def preflight(
        ctx: Context, command: CommandArg = None, host: HostArg = "local", run_id: RunIdArg = None,
        workdir: Annotated[PathStr | None, Field(description="where to run",
                                                 json_schema_extra={"x-rgt-path": "box"})] = None,
        code: Annotated[IdStr | None, Field(description="or a snapshot")] = None,
        env: Annotated[dict[IdStr, ValueStr] | None, Field(description="over the CPU defaults",
                                                           max_length=MAP_MAX)] = None,
        steps: StepsArg = 5, checkpoints: CkptArg = None,
        planned_steps: PlannedArg = None, budget_host: BudgetHostArg = None, budget_gib: BudgetGibArg = None,
        signal: Annotated[Literal["TERM", "USR1"], Field(description="USR1 first (Slurm)")] = "TERM",
        grace_s: Annotated[float, Field(description="TERM to KILL", ge=0.5, le=120)] = 10.0,
        attempt_s: Annotated[float, Field(description="cap per run", ge=5, le=1800)] = 120.0,
    ) -> PreflightResult:
        """Prove the code runs and resumes before renting: CPU smoke, kill drill, disk budget.

        Runs on CPU (CUDA_VISIBLE_DEVICES=''), trackers off (WANDB_MODE=disabled ...); env overrides.
        Starts a detached drill (returns its run_id at once): the command runs until it has
        saved twice, is stopped as a platform does (TERM, grace, KILL), restarted, killed mid-save,
        restarted to its end and started once more. Follow it with wait_for_run, then call again
        with run_id for the verdict: GO, GO with warnings or NO-GO, a finding per stage (smoke,
        checkpoint, drill, budget) with evidence, fix and route.
        See references://run-remote/spot-resilience#resume-drill.
        """
        from mcp_server.run.preflight import service  # the drill's machinery loads on the first call

        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                raise InputError("preflight runs on this machine or an SSH/Slurm box, not in a Kubernetes namespace",
                                 next_step="run it on host='local' with the same command")
            box = await app.pool.host(spec)
            if run_id:
                return await _report(app, box, spec, run_id, planned_steps, budget_host, budget_gib)
            if not command:
                raise InputError("give command (to start a preflight) or run_id (to read one)")
            req = service.PreflightRequest(
                command=command, workdir=workdir, code=code, env=env or {},
                steps=steps, checkpoints=list(checkpoints or []), planned_steps=planned_steps,
                budget_host=budget_host, budget_gib=budget_gib, signal=signal, grace_s=grace_s, attempt_s=attempt_s)
            if budget_host:
                app.pool.spec(budget_host)  # an unknown name is refused now, not after the drill
            started = await service.start(box, spec, req, ledger=app.ledger, redactor=app.redactor)
            return service.started(spec, started)
