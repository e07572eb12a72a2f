"""Prompts: the lifecycle as guided checklists (remote_run, verify_result, deliver).

Each prompt renders one user message: the steps in order, the tool to call at each with the
arguments already filled in, the exit check that ends the step, and the reference to read.
Platform facts (durable root, danger clocks, meter verbs) come from the host's profile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Prompt
from pydantic import Field

from mcp_server.errors import InputError, NotFoundError, RgtError
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import Profile, profile
from mcp_server.redact import Redactor
from mcp_server.tools._common import HOST_HELP, app_of, coded_message, shown_key
from mcp_server.tools.protocol import did_you_mean


def _fail(exc: RgtError, redactor: Redactor) -> MCPError:
    """A prompt fails as a protocol error; unlike a tool error it can carry the code as data."""
    return MCPError(INVALID_PARAMS, coded_message(exc, redactor), data={"code": exc.code})


def _arguments_of(p: Prompt) -> str:
    return ", ".join(f"{a.name} (required)" if a.required else a.name for a in p.arguments or []) or "none"


def request_problem(prompts: list[Prompt], name: object, given: Mapping[str, object]) -> RgtError | None:
    """What is wrong with a prompts/get before it renders: a name that is no prompt, an argument
    the prompt does not take (a typo would silently render its default, e.g. the local box), or a
    required one left out. Each names the prompts or arguments there are."""
    found = next((p for p in prompts if p.name == name), None)
    if found is None:
        return NotFoundError(f"this server has no prompt by that name.{did_you_mean(name, [p.name for p in prompts])} "
                             f"Its prompts: {', '.join(sorted(p.name for p in prompts))}",
                             next_step="call prompts/get with one of these names (prompts/list gives their arguments)")
    takes = [a.name for a in found.arguments or []]
    unknown = [k for k in given if k not in takes]
    if unknown:
        shown = ", ".join(shown_key(k) for k in unknown[:5])
        return InputError(f"prompt {found.name} takes no argument {shown}.{did_you_mean(unknown[0], takes)} "
                          f"Its arguments: {_arguments_of(found)}", next_step="send it again with these names only")
    missing = [a.name for a in found.arguments or [] if a.required and a.name not in given]
    if missing:
        return InputError(f"prompt {found.name} needs the argument {', '.join(missing)}; its arguments: "
                          f"{_arguments_of(found)}", next_step=f"send it again with {', '.join(missing)} set")
    return None


def _checked_requests(server: MCPServer) -> Any:
    """Middleware: a prompts/get that cannot render is refused as INVALID_PARAMS (-32602) before
    the SDK's renderer turns it into an uncoded error with a traceback in the log."""
    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else None
        given = params.get("arguments") if params is not None else None
        if ctx.method == "prompts/get" and params is not None and isinstance(given, Mapping | None):
            problem = request_problem(await server.list_prompts(), params.get("name"), given or {})
            if problem is not None:
                raise _fail(problem, Redactor())
        return await call_next(ctx)

    return check


def _platform_lines(p: Profile, durable_root: str) -> list[str]:
    lines = [f"- Platform profile: {p.title} (profiles://{p.platform}); durable root {durable_root}."]
    if p.danger_clocks:
        lines.append("- Danger clocks to tell the user now: " + "; ".join(p.danger_clocks) + ".")
    for a in p.meter_actions:
        kind = "park (reversible)" if a.park else ("IRREVERSIBLE" if a.irreversible else "reversible")
        bills = f"; still bills: {'; '.join(a.keeps_billing)}" if a.keeps_billing else ""
        lines.append(f"- Meter action `{a.action}` ({a.label}): {kind}{bills}.")
    if p.proxy_hook:
        lines.append(f"- Every job on this platform starts with `{p.proxy_hook}` (the profile's proxy hook).")
    return lines


def remote_run_text(host: str, spec: HostSpec, p: Profile, run_name: str) -> str:
    """The six-phase checklist for one run on one box."""
    h = f'host="{host}"'
    return "\n".join([
        f"Run `{run_name}` on `{host}` through the six phases below. Do them in order; each ends with a check.",
        "Cost and destructive actions are the user's call: ask before renting, relaunching or tearing down.",
        "", "Platform facts:", *_platform_lines(p, spec.durable_root), "",
        "Phase 0 - audit (references://run-remote/lifecycle-checklist#phase-0)",
        f"- Call `audit_box({h})`. Exit check: the expected GPU is listed, no check is FAIL, inodes (A11) and bytes "
        "(A10) on the durable root are not near 100 %. Read the route of every WARN/FAIL "
        "(references://run-remote/audit-checks).",
        "Phase 1 - access and credentials (references://run-remote/lifecycle-checklist#phase-1)",
        "- A3 must say the launch interpreter sees CUDA. Secrets go by NAME in `launch_detached(secret_env=[...])`, "
        "never in the command text (references://run-remote/launch#secrets-by-stdin).",
        "Phase 2 - wrapper and smoke (references://run-remote/lifecycle-checklist#phase-2)",
        '- Smoke 1-2 batches on CPU first: `launch_detached(host="local", name="<run>-smoke", command=...)`, '
        "logger off. Exit check: exit 0 and no Traceback in `tail_logs`. A smoke proves it runs, not that it is right.",
        "Phase 3 - detached launch (references://run-remote/lifecycle-checklist#phase-3)",
        f'- Call `launch_detached({h}, name="{run_name}", command=...)`; it probes, then hands back. '
        "Exit check: status running and the first log lines show the expected step. Never hold a foreground wait.",
        "Phase 4 - monitor (references://run-remote/lifecycle-checklist#phase-4)",
        f'- Call `tail_logs({h}, run_id=...)` with offset=next_offset each time; `list_runs({h})` for all runs. '
        "Status comes from the process and exit file (references://run-remote/monitoring#run-status); classify any "
        "signature before acting (references://run-remote/monitoring#failure-signatures). "
        "A dropped connection is not a dead run.",
        "Phase 5 - close, pull, verify, stop the meter (references://run-remote/lifecycle-checklist#phase-5)",
        f"- Call `verify_artifacts({h}, run_id=...)` until it reports the pull verified (sizes + SHA-256 + loads).",
        f"- Then `plan_teardown({h}, action=...)` returns the plan and its token; show it to the user, and only on "
        f"their explicit yes call `teardown({h}, action=..., token=...)` (a client that can ask the user confirms "
        "once more). The Iron Law: no teardown before a verified pull (references://run-remote/principles#iron-law).",
    ])


def verify_text(run_id: str, metric: str, host: str) -> str:
    """The probe ladder for one surprising number."""
    return "\n".join([
        f"Decide whether `{metric}` of run `{run_id}` (on `{host}`) is a bug, a real effect or noise before reporting "
        "or discarding it. Probes report and disclose; they never block. "
        "Cheap probes first; stop when one explains it.",
        "1. VP1 control diff: `run_probe(inputs={\"probe\": \"control_diff\", ...})` "
        "with the resolved configs of the run and its control. Exactly the ablated key may differ "
        "(references://verifying/methodology#vp1).",
        "2. VP2 trajectory: `run_probe(inputs={\"probe\": \"trajectory\", ...})` on the metric history, "
        "not the endpoint (references://verifying/methodology#vp2).",
        "3. VP3/VP4 reproduce: back up the original artifacts, rerun the IDENTICAL config into a new run id, then "
        "`run_probe(inputs={\"probe\": \"seed_variance\", ...})` over the seeds "
        "(references://verifying/methodology#vp4).",
        "4. VP11 statistics: `run_probe(inputs={\"probe\": \"mde\", ...})` before paying for more runs; "
        "state the metric direction and which variance you show (references://verifying/methodology#vp11).",
        "5. Too good to be true: `run_probe(inputs={\"probe\": \"leakage\", ...})` on the prepared split artifacts "
        "(references://verifying/methodology#vp6); unfair baseline: references://verifying/methodology#vp7.",
        "6. Degenerate outputs or real == shuffle: `run_probe(inputs={\"probe\": \"collapse\", ...})` "
        "(references://verifying/representation-collapse).",
        "7. Same number twice, or a smoke that passed: `run_probe(inputs={\"probe\": \"checkpoint_identity\", ...})` "
        "and references://verifying/smoke-hidden-failures (SH1-SH6).",
        "8. Trust the artifact: the checkpoint behind the number must be pulled and verified "
        f'(`verify_artifacts(host="{host}", run_id="{run_id}")`, references://verifying/methodology#vp13).',
        "Finish with one verdict and the disclosure sentence that must travel with the number.",
    ])


def deliver_text(project_root: str, run_id: str) -> str:
    """Evidence -> reconcile -> gate."""
    return "\n".join([
        f"Deliver the results of `{run_id}` from the evidence layer in `{project_root}`. Numbers flow from evidence to "
        "documents, never back; the gate discloses, it does not block (references://delivering/principles).",
        "1. Evidence: the pulled bundle has PULL_VERIFIED.json (`verify_artifacts`); EVIDENCE.json maps every claim to "
        "results.json rows with split, n and variance (references://delivering/evidence-manifest-schema, "
        "references://delivering/data-architecture).",
        f'2. Reconcile: `reconcile_evidence(evidence="{project_root}/EVIDENCE.json", '
        f'documents=["{project_root}/paper", "{project_root}/slides", "{project_root}/README.md"])` '
        "over every paper, slide, README and CSV. Fix "
        "drift at the source (regenerate), never by hand-editing a copy (references://delivering/reconcile).",
        "3. Figures: each figure is rebuilt from source data and its rendered file was re-opened and inspected "
        "(references://delivering/figures).",
        "4. Gate: for every shipped number, the five checks of references://delivering/delivery-gate (verified, in "
        "EVIDENCE, regenerable, reconciled, split/leak status) produce its disclosure record.",
        "5. Tell the user each disclosure once, next to the number it affects; "
        "the choice to claim, fix or drop is theirs.",
    ])


HostArg = Annotated[str, Field(description=HOST_HELP)]
PlatformArg = Annotated[str | None, Field(description="its platform profile (default: the host's), e.g. runpod")]
RunNameArg = Annotated[str, Field(description="a name for the run (letters, digits . _ -)")]
RunIdArg = Annotated[str, Field(description="the run the result comes from (launch_detached, list_runs)")]
MetricArg = Annotated[str, Field(description="the number in question, e.g. 'val accuracy 0.873'")]
ProjectArg = Annotated[str, Field(description="the project folder holding EVIDENCE.json and the documents")]


def register(server: MCPServer) -> None:
    server.middleware.append(_checked_requests(server))

    @server.prompt(title="Run a job on a GPU box, phase by phase", description=(
        "The six-phase remote-run checklist (audit, access, smoke, launch, monitor, pull + teardown) with the tool to "
        "call at each phase, filled in for one host and its platform profile."))
    def remote_run(ctx: Context, host: HostArg = "local", platform: PlatformArg = None,
                   run_name: RunNameArg = "run-1") -> str:
        app = app_of(ctx)
        try:
            spec = app.pool.spec(host)
            prof = profile(platform) if platform else spec.profile
        except RgtError as exc:
            raise _fail(exc, app.redactor) from exc
        return remote_run_text(host, spec, prof, run_name)

    @server.prompt(title="Is this number real? The probe ladder", description=(
        "The VERIFY probe ladder for one surprising result: control diff, trajectory, reproduce, statistics, leakage, "
        "collapse, stale checkpoints, with the run_probe call for each."))
    def verify_result(run_id: RunIdArg, metric: MetricArg = "the headline metric", host: HostArg = "local") -> str:
        return verify_text(run_id, metric, host)

    @server.prompt(title="Deliver: evidence, reconcile, gate", description=(
        "The DELIVER checklist: verified evidence, cross-document reconciliation, figures, and the per-number "
        "disclosure gate."))
    def deliver(project_root: ProjectArg = ".", run_id: RunIdArg = "the selected run") -> str:
        return deliver_text(project_root, run_id)
