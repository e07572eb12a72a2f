"""teardown behind the Iron Law, first phase: the plan. Every gate (gates.py) is evaluated,
nothing on the box changes, and a token bound to the plan's content is issued only when the
plan is ready. G2/G3 apply when the action loses data; `allow_unverified` waives them, visibly."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets

from pydantic import BaseModel, Field

from mcp_server.errors import InputError, cut_value
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import MeterAction, reference_uri
from mcp_server.ledger import Ledger
from mcp_server.platforms.base import MeterOutcome
from mcp_server.run.jobs.listing import HostRuns, list_runs
from mcp_server.run.teardown.cost import accrued
from mcp_server.run.teardown.gates import Gate, g1, g2, g3, g4
from mcp_server.verify.artifacts.identity import read_identity
from mcp_server.verify.artifacts.record import RecordedVerification, Verifications, of_machine, read_verifications

WAIVABLE = ("G2", "G3")
VERIFICATIONS_READ = 2000  # the newest verification events of every host; older ones never lift a gate


class TeardownPlan(BaseModel):
    host: str
    platform: str
    action: str
    label: str
    executor: str = Field(description="who performs it: the platform API, in-box, manual (you), none")
    irreversible: bool
    park: bool
    stops_billing: list[str]
    keeps_billing: list[str]
    loses: list[str]
    survives: list[str]
    manual_steps: str | None
    accrued_cost: str | None
    burn_rate: str | None
    gates: list[Gate]
    ready: bool = Field(description="every gate passes (or was waived by allow_unverified)")
    unmet: list[str]
    allow_unverified: bool
    offer_park_first: str | None
    token: str | None = Field(description="pass it back to execute exactly this plan; only issued when ready")
    plan_hash: str
    next_step: str
    route: str = reference_uri("run-remote/principles", "iron-law")


class TeardownResult(BaseModel):
    plan: TeardownPlan
    executed: bool
    outcome: MeterOutcome | None = None
    platform_answer: str | None = None
    allow_unverified: bool = Field(
        description="echoed: the user's explicit choice to tear down without a verified pull")
    message: str


def _action(spec: HostSpec, action: str) -> MeterAction:
    found = spec.profile.action(action)
    if found is None:
        raise InputError(f"{spec.profile.platform} has no teardown action {cut_value(action, 64)!r}", host=spec.name,
                         expected=[a.action for a in spec.profile.meter_actions],
                         next_step=f"read profiles://{spec.profile.platform} (TEARDOWN / BILLING)")
    return found


def _hash(spec: HostSpec, act: MeterAction, gates: list[Gate], used: list[RecordedVerification], runs: HostRuns,
          allow_unverified: bool) -> str:
    body = {"host": spec.name, "destination": spec.destination, "platform": spec.profile.platform,
            "action": act.action, "instance": spec.instance_id, "allow_unverified": allow_unverified,
            "gates": [(g.id, g.state) for g in gates], "manifests": sorted(str(v.record.manifest_sha256) for v in used),
            "runs": sorted((r.run_id, r.status) for r in runs.runs)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


async def _gates(host: Host, spec: HostSpec, act: MeterAction, ledger: Ledger, runs: HostRuns,
                 allow_unverified: bool) -> tuple[list[Gate], list[RecordedVerification], str | None]:
    """Every gate (waivers applied), the verifications G2 relied on, and the park to offer."""
    destroys_data = act.irreversible or bool(act.loses)
    verifs = await _verifications(host, spec, ledger) if destroys_data else Verifications()
    # G2 matches each run's roster globs against its verified files: off the event loop, as
    # verify_artifacts does, so a costly roster never stalls other calls.
    gate2, used = await asyncio.to_thread(g2, runs, verifs, destroys_data, host=spec.name)
    gate3 = await g3(host, used, destroys_data)
    gate4, offer = g4(spec, act)
    gates = [g1(runs), gate2, gate3, gate4]
    if allow_unverified:
        gates = [g.model_copy(update={"state": "waived", "evidence": "WAIVED by allow_unverified: " + g.evidence})
                 if g.id in WAIVABLE and g.state == "fail" else g for g in gates]
    return gates, used, offer


async def _verifications(host: Host, spec: HostSpec, ledger: Ledger) -> Verifications:
    """The verifications of this machine, through whichever inventory name they were made: keyed
    by the machine identity read on the box now (the record's producer), so a second name for the
    same box finds them and another box under a reused name does not. A Kubernetes host's files
    are its PVC, read through a throwaway reader pod with no lasting identity: keyed by its name."""
    if spec.kind == "kubernetes":
        return read_verifications(ledger.events("verification", host=spec.name, limit=VERIFICATIONS_READ))
    box = await read_identity(host)
    return of_machine(ledger.events("verification", limit=VERIFICATIONS_READ), box, spec.name)


async def plan(host: Host, spec: HostSpec, action: str, ledger: Ledger, allow_unverified: bool = False,
               issue: bool = True, runs: HostRuns | None = None) -> TeardownPlan:
    """Evaluate every gate; nothing on the box changes. `runs`: the host's runs when they are not
    listed from run dirs on the box (a Kubernetes namespace's Jobs)."""
    act = _action(spec, action)
    runs = runs if runs is not None else await list_runs(host, spec, ledger)
    gates, used, offer = await _gates(host, spec, act, ledger, runs, allow_unverified)
    unmet = [f"{g.id} {g.name}: {g.evidence}" for g in gates if g.state == "fail"]
    plan_hash = _hash(spec, act, gates, used, runs, allow_unverified)
    token = None
    if not unmet and issue and act.executor != "none":
        token = secrets.token_hex(16)
        ledger.issue_token(token, host=spec.name, action=act.action, plan_hash=plan_hash)
    price = f"{spec.hourly_price:.2f} {spec.currency}/h" if spec.hourly_price is not None else None
    p = TeardownPlan(
        host=spec.name, platform=spec.profile.platform, action=act.action, label=act.label, executor=act.executor,
        irreversible=act.irreversible, park=act.park,
        stops_billing=["the GPU meter" + (f" ({price})" if price else "")] if act.stops_gpu_meter else [],
        keeps_billing=act.keeps_billing, loses=act.loses, survives=act.survives, manual_steps=act.manual_steps,
        accrued_cost=accrued(ledger, spec), burn_rate=price, gates=gates, ready=not unmet, unmet=unmet,
        allow_unverified=allow_unverified, offer_park_first=offer, token=token, plan_hash=plan_hash,
        next_step=_next(act, unmet, token),
    )
    if issue:
        ledger.record("teardown_plan", host=spec.name, summary=f"{act.action} ready={p.ready}",
                      data={"action": act.action, "plan_hash": plan_hash, "ready": p.ready, "unmet": unmet,
                            "allow_unverified": allow_unverified, "token_issued": token is not None})
    return p


def _next(act: MeterAction, unmet: list[str], token: str | None) -> str:
    if unmet:
        waivable = [u for u in unmet if u.split(" ", 1)[0] in WAIVABLE]
        fixes = []
        if any(u.startswith("G1 ") for u in unmet):
            fixes.append("G1: let the live runs end (wait_for_run) or stop them with cancel_run; "
                         "allow_unverified does not lift G1")
        if waivable:
            fixes.append("G2/G3: run verify_artifacts, or pass allow_unverified=true only if you accept losing "
                         "unverified data")
        return "not ready: " + " | ".join(unmet) + ". Fix these: " + "; ".join(fixes) + "."
    if act.executor == "none":
        return "nothing to stop on this box"
    if act.executor == "manual":
        return "confirm with this token to record your decision; then do the manual steps yourself"
    return f"ask the user; to execute exactly this plan call teardown with token={token}"
