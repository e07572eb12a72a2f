"""preflight tool adapter: a CPU smoke, a preemption drill and a disk budget before renting."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.limits import MAP_MAX, CommandStr, HostStr, IdStr, PathStr, PatternStr, ValueStr
from mcp_server.run.preflight import service
from mcp_server.run.preflight.models import PreflightResult
from mcp_server.tools._common import HOST_HELP, STARTS_WORK, app_of, tool_errors

HostArg = Annotated[HostStr, Field(description=HOST_HELP)]
CommandArg = Annotated[CommandStr | None, Field(
    description="the training command with tiny overrides, e.g. 'python train.py --steps 30 --save-every 10'")]
RunIdArg = Annotated[IdStr | None, Field(description="a started preflight: read its verdict")]
StepsArg = Annotated[int, Field(description="steps the smoke must log", ge=1, le=100_000)]
CkptArg = Annotated[list[PatternStr] | None, Field(
    description="checkpoint globs under the workdir (default *.pt *.pth *.ckpt *.safetensors *.bin checkpoint-*)",
    max_length=16)]
PlannedArg = Annotated[float | None, Field(description="the real run's length in logged steps: disk budget", gt=0)]
BudgetHostArg = Annotated[HostStr | None, Field(description="box to budget against (df of its durable root)")]
BudgetGibArg = Annotated[float | None, Field(description="or its disk size in GiB (e.g. a profile's)", gt=0)]


def register(server: MCPServer) -> None:
    @server.tool(title="Preflight: smoke, resume drill, budget", annotations=STARTS_WORK)
    async def preflight(
        ctx: Context, command: CommandArg = None, host: HostArg = "local", run_id: RunIdArg = None,
        workdir: Annotated[PathStr | None, Field(description="directory to run in")] = None,
        code: Annotated[IdStr | None, Field(description="or a push_code snapshot <project>/<id>")] = None,
        env: Annotated[dict[IdStr, ValueStr] | None, Field(max_length=MAP_MAX)] = None,
        secret_env: Annotated[list[IdStr] | None, Field(max_length=MAP_MAX)] = None,
        steps: StepsArg = 5, checkpoints: CkptArg = None, metric: Annotated[IdStr | None, Field(
            description="the loss series to follow (default: loss)")] = None,
        planned_steps: PlannedArg = None, budget_host: BudgetHostArg = None, budget_gib: BudgetGibArg = None,
        signal: Annotated[Literal["TERM", "USR1"], Field(description="USR1: Slurm's warning first")] = "TERM",
        grace_s: Annotated[float, Field(ge=0.5, le=120)] = 10.0,
        attempt_s: Annotated[float, Field(description="longest run of one attempt", ge=5, le=1800)] = 120.0,
        cpu: Annotated[bool, Field(description="hide GPUs (CUDA_VISIBLE_DEVICES='')")] = True,
        tracker_off: Annotated[bool, Field(description="WANDB_MODE=disabled and the like")] = True,
    ) -> PreflightResult:
        """Prove the code runs and resumes before paying: a CPU smoke, a preemption drill, a disk budget.

        Starts a detached drill (returns its run_id at once): the command runs until it has
        saved twice, is stopped as a platform does (TERM, grace, KILL), restarted, killed mid-save,
        restarted to its end and started once more. Follow it with wait_for_run, then call again
        with run_id for the verdict: GO, GO with warnings or NO-GO, a finding per stage (smoke,
        checkpoint, drill, budget) with evidence, fix and route.
        See references://run-remote/spot-resilience#resume-drill.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                raise InputError("preflight runs on this machine or an SSH/Slurm box, not in a Kubernetes namespace",
                                 next_step="run it on host='local' with the same command")
            box = await app.pool.host(spec)
            if run_id:
                async def resolve(name: str) -> tuple[Host, HostSpec]:
                    tspec = app.pool.spec(name)
                    if tspec.kind == "kubernetes":
                        raise InputError("budget_host must be this machine or an SSH/Slurm box")
                    return await app.pool.host(tspec), tspec

                return await service.report(box, spec, run_id, resolve, planned_steps=planned_steps,
                                            budget_host=budget_host, budget_gib=budget_gib)
            if not command:
                raise InputError("give command (to start a preflight) or run_id (to read one)")
            req = service.PreflightRequest(
                command=command, workdir=workdir, code=code, env=env or {}, secret_env=secret_env or [],
                steps=steps, checkpoints=list(checkpoints or []), metric=metric, planned_steps=planned_steps,
                budget_host=budget_host, budget_gib=budget_gib, signal=signal, grace_s=grace_s, attempt_s=attempt_s,
                cpu=cpu, tracker_off=tracker_off)
            if budget_host:
                app.pool.spec(budget_host)  # an unknown name is refused now, not after the drill
            started = await service.start(box, spec, req, ledger=app.ledger, redactor=app.redactor)
            return service.started(spec, started)
