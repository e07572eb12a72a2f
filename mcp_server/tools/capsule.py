"""capsule tool adapter: from a verified pull to a claim (issue 36). One tool, one action per call:
seal a capsule from PULL_VERIFIED.json, propose an EVIDENCE.json row (a plan with a token), apply it,
start a reproduction on a box and read its report, or read tracker runs. The work is in
deliver/capsule and deliver/trackers; each loads on its first call."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.limits import MAP_MAX, HostStr, IdStr, PathStr, ValueStr
from mcp_server.tools._common import HOST_HELP, STARTS_WORK, app_of, tool_errors

Action = Literal["seal", "propose", "apply", "reproduce", "report", "trackers"]
_LOCAL = {"x-rgt-path": "local"}
EVIDENCE = "EVIDENCE.json"  # project-level, beside runs/ (knowledge deliver-head.md §3)


class Row(BaseModel):
    """propose: which number becomes which claim's evidence row."""

    claim: IdStr
    metric: IdStr
    test: IdStr = "main"
    statement: ValueStr | None = None
    aliases: list[IdStr] = Field(default_factory=list, max_length=20)


class Evaluation(BaseModel):
    """seal: how repro re-evaluates best.pth."""

    command: list[ValueStr] = Field(min_length=1, max_length=64)
    tolerance: dict[IdStr, float] = Field(default_factory=dict, max_length=MAP_MAX)


class CapsuleResult(BaseModel):
    """What the action did; one of the fields below is set."""

    action: Action
    sealed: Any = Field(default=None, description="seal: the capsule, its files and findings")
    plan: Any = Field(default=None, description="propose: the row, the new EVIDENCE.json, its diff, the token")
    applied: Any = Field(default=None, description="apply: what was written")
    started: Any = Field(default=None, description="reproduce: the detached run to wait for")
    report: Any = Field(default=None, description="report: per metric, reproduced / differs / could not run")
    trackers: Any = Field(default=None, description="trackers: the runs and the forensics")


ActionArg = Annotated[Action, Field(
    description="seal; propose, apply (a row); reproduce, report; trackers")]
ProjectArg = Annotated[PathStr | None, Field(description="has runs/<id>, EVIDENCE.json",
                                             json_schema_extra=_LOCAL)]
PathArg = Annotated[PathStr | None, Field(description="seal: PULL_VERIFIED.json; trackers: wandb, mlruns, .db, TB dir",
                                          json_schema_extra=_LOCAL)]
RolesArg = Annotated[dict[PathStr, PathStr] | None, Field(
    description="seal: capsule path -> pulled file", max_length=MAP_MAX)]
EvalArg = Annotated[Evaluation | None, Field(
    description="seal: argv using {checkpoint} {config} {out} {test}")]
RunIdsArg = Annotated[list[IdStr] | None, Field(
    description="capsules (propose: seeds); report: a run", max_length=100)]
RowArg = Annotated[Row | None, Field(description="propose")]
TokenArg = Annotated[IdStr | None, Field(description="apply: propose's token")]


def _need(value: Any, name: str, action: str) -> Any:
    if value in (None, [], {}):
        raise InputError(f"action {action} needs `{name}`", next_step=f"call capsule again with {name}")
    return value


def _project(project: str | None, action: str) -> Path:
    return Path(_need(project, "project", action)).expanduser()


def _confine_given(action: Action, project: str | None, path: str | None) -> None:
    """Every local path the call names, through the one path policy, before anything else is read or
    required: a tracker source may lie anywhere the deny list allows; a pull and the project lie
    where verify_artifacts writes (RGT_HOME/pulls, RGT_PULL_ROOTS)."""
    from mcp_server.deliver.capsule.layout import confined
    from mcp_server.paths.local import LocalScope, check_local

    done = "nothing was done"
    if path and action == "trackers":
        check_local(path, "read", LocalScope(), what="path", done=done)
    elif path:
        confined(Path(path), "read", "path", done)
    if project:
        confined(Path(project), "write", "project", done)


async def _act(app: App, action: Action, *, project: str | None, path: str | None, roles: dict[str, str] | None,
               evaluate: Evaluation | None, run_ids: list[str] | None, row: Row | None, token: str | None,
               host: str) -> CapsuleResult:
    from mcp_server.deliver.capsule import evidence_plan, repro, seal  # the capsule machinery loads on first use

    _confine_given(action, project, path)
    if action == "seal":
        sealed = seal.seal_capsule(_project(project, action), Path(_need(path, "path", action)).expanduser(),
                                   roles=roles, evaluate=evaluate.model_dump() if evaluate else None,
                                   ledger=app.ledger)
        return CapsuleResult(action=action, sealed=sealed)
    if action == "propose":
        r = _need(row, "row", action)
        plan = evidence_plan.propose_evidence(
            _project(project, action), _need(run_ids, "run_ids", action), claim_id=r.claim, metric=r.metric,
            test_id=r.test, evidence_path=_project(project, action) / EVIDENCE, statement=r.statement,
            aliases=r.aliases, ledger=app.ledger)
        return CapsuleResult(action=action, plan=plan)
    if action == "apply":
        applied = evidence_plan.apply_evidence(_need(token, "token", action), ledger=app.ledger,
                                               evidence_path=_project(project, action) / EVIDENCE)
        return CapsuleResult(action=action, applied=applied)
    if action == "trackers":
        from mcp_server.tools._trackers import tracker_report  # the tracker libraries load on first use

        return CapsuleResult(action=action, trackers=await tracker_report(app, _need(path, "path", action)))
    spec = app.pool.spec(host)
    box = await app.pool.host(spec)
    (one,) = _need(run_ids, "run_ids", action)[:1]
    if action == "reproduce":
        capsule = _project(project, action) / "runs" / one
        started = await repro.start_reproduction(box, spec, capsule, ledger=app.ledger, redactor=app.redactor)
        return CapsuleResult(action=action, started=started)
    return CapsuleResult(action=action, report=await repro.read_reproduction(box, spec, one, redactor=app.redactor))


def register(server: MCPServer) -> None:
    @server.tool(title="From pull to claim", annotations=STARTS_WORK)  # reproduce starts a run; apply spends a token
    async def capsule(
        ctx: Context, action: ActionArg, project: ProjectArg = None, path: PathArg = None, roles: RolesArg = None,
        evaluate: EvalArg = None, run_ids: RunIdsArg = None, row: RowArg = None,
        token: TokenArg = None, host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
    ) -> CapsuleResult:
        """Verified pull to capsule, evidence row (plan, token), reproduction; tracker runs.

        seal: write <project>/runs/<run-id>/ from a passing PULL_VERIFIED.json (files hard-linked or copied and
        re-hashed, run.json, provenance.json; atomic; an existing run id is refused: a re-run is a new id);
        layout gaps and provenance the run does not carry are findings, never filled in. propose: one
        EVIDENCE.json row from capsules (several = seeds: mean and std computed) as a plan with the new file,
        its JSON diff and a token; apply: write it with that token, once, if nothing changed since (promoting
        a number to a claim is the user's call). reproduce: run repro.sh on `host` as a detached run (wait_for_run
        it), then report: per metric reproduced within tolerance / differs by X / could not run. trackers: W&B
        offline runs, MLflow stores and TensorBoard logs as runs, matched to this server's run ids
        (RGT_RUN_ID), with forensics (still running after their job ended, duplicates, no job, config
        differences). Nothing in a tracker is ever deleted. See references://delivering/data-architecture#tree,
        references://delivering/reconcile and references://run-remote/pull-verify.
        """
        app = app_of(ctx)
        with tool_errors(app):
            return await _act(app, action, project=project, path=path, roles=roles, evaluate=evaluate,
                              run_ids=run_ids, row=row, token=token, host=host)
