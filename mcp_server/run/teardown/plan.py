"""teardown behind the Iron Law: plan first (nothing changes), then confirm with the
plan's token. Confirm re-evaluates every gate, refuses naming each unmet one, executes
the profile's verb once, and polls the platform until the meter really stopped.

Gates:
  G1 no live run on the box (its run directories say so, not the ledger)
  G2 every finished run is covered by a passing verification newer than its end, whose
     manifest covers the run's declared outputs
  G3 nothing under a verified root was written after it was verified
  G4 a destructive action on a platform with a non-destructive park has that park offered
G2/G3 apply when the action loses data; `allow_unverified` waives them, visibly."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_server.errors import GateRefused, InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import MeterAction, reference_uri
from mcp_server.ledger import Event, Ledger
from mcp_server.platforms.base import MeterOutcome
from mcp_server.globs import glob_regex
from mcp_server.verify.artifacts.roster import OWN_FILES
from mcp_server.run.teardown.cost import accrued
from mcp_server.run.jobs.listing import HostRuns, RunSummary, list_runs

TOKEN_TTL_S = 30 * 60
GateState = Literal["pass", "fail", "waived", "not_required"]


class Gate(BaseModel):
    id: str
    name: str
    state: GateState
    evidence: str


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
    allow_unverified: bool = Field(description="echoed: the user's explicit choice to tear down without a verified pull")
    message: str


def _action(spec: HostSpec, action: str) -> MeterAction:
    found = spec.profile.action(action)
    if found is None:
        raise InputError(f"{spec.profile.platform} has no teardown action {action!r}", host=spec.name,
                         expected=[a.action for a in spec.profile.meter_actions],
                         next_step=f"read profiles://{spec.profile.platform} (TEARDOWN / BILLING)")
    return found


def _covers(v: Event, run: RunSummary) -> bool:
    if not v.data.get("passed") or (run.ended_at and v.ts < run.ended_at):
        return False
    if run.outputs is None:
        return True
    roots = {v.data.get("root"), v.data.get("abs_root")}
    if run.outputs.root.rstrip("/") not in {str(r).rstrip("/") for r in roots if r}:
        return False
    files = v.data.get("files") or []
    return all(any(glob_regex(p).match(f) for f in files) for p in run.outputs.patterns)


def _g1(runs: HostRuns) -> Gate:
    live = [r.run_id for r in runs.runs if r.status in ("running", "queued")]
    if live:
        return Gate(id="G1", name="no live run", state="fail",
                    evidence=f"{len(live)} live run(s) on the box: {', '.join(live[:5])} (tearing down kills them)")
    return Gate(id="G1", name="no live run", state="pass", evidence=f"{len(runs.runs)} run(s) on the box, none live")


def _g2(runs: HostRuns, verifs: list[Event], needed: bool) -> tuple[Gate, list[Event]]:
    name = "every finished run covered by a passing verification"
    if not needed:
        return Gate(id="G2", name=name, state="not_required", evidence="the action keeps the data"), []
    passing = [v for v in verifs if v.data.get("passed")]
    used: dict[int, Event] = {}
    gaps = []
    for r in runs.runs:
        if r.status in ("running", "queued"):
            continue
        cover = next((v for v in passing if _covers(v, r)), None)
        if cover is None:
            why = "declared outputs not in any passing verification newer than its end" if r.outputs else \
                "no passing verification newer than its end"
            gaps.append(f"{r.run_id} ({r.status}): {why}")
        else:
            used[cover.id] = cover
    if not passing:
        return Gate(id="G2", name=name, state="fail",
                    evidence="no passing verify_artifacts for this box in the ledger: nothing proves a local copy"), []
    if gaps:
        return Gate(id="G2", name=name, state="fail", evidence="; ".join(gaps[:5])), list(used.values())
    latest = passing[0]
    used.setdefault(latest.id, latest)
    return Gate(id="G2", name=name, state="pass",
                evidence=f"{len(used)} verification(s) cover every finished run; latest {latest.data.get('manifest')} "
                         f"({latest.data.get('files') and len(latest.data['files'])} files)"), list(used.values())


async def _g3(host: Host, used: list[Event], needed: bool) -> Gate:
    name = "no write under a verified root since its verification"
    if not needed:
        return Gate(id="G3", name=name, state="not_required", evidence="the action keeps the data")
    if not used:
        return Gate(id="G3", name=name, state="fail", evidence="no verified root to compare against")
    later = []
    for v in used:
        root, at = v.data.get("abs_root") or v.data.get("root"), v.data.get("listed_at")
        if not root or not at:
            later.append(f"{root}: verification has no listing time")
            continue
        res = await host.run(f"find {path_word(root)} -type f -newermt @{float(at):.3f} 2>/dev/null | head -n 50", timeout=25)
        changed = [p for p in res.text.splitlines() if p and not OWN_FILES.search(p.rsplit('/', 1)[-1])]
        if changed:
            later.append(f"{root}: {len(changed)} file(s) written after verification, e.g. {changed[0]}")
    if later:
        return Gate(id="G3", name=name, state="fail", evidence="; ".join(later[:5]) + " — verify again")
    return Gate(id="G3", name=name, state="pass", evidence=f"{len(used)} verified root(s) unchanged since verification")


def _g4(spec: HostSpec, act: MeterAction) -> tuple[Gate, str | None]:
    park = next((a for a in spec.profile.meter_actions if a.park and not a.loses and a.action != act.action), None)
    if act.irreversible and park is not None:
        offer = (f"{park.action} ({park.label}) stops the GPU meter and keeps the disk"
                 f"{'; still billed: ' + '; '.join(park.keeps_billing) if park.keeps_billing else ''}")
        return Gate(id="G4", name="non-destructive park offered first", state="pass",
                    evidence=f"offered: {offer}. Prefer it when unsure."), offer
    return Gate(id="G4", name="non-destructive park offered first", state="not_required",
                evidence="no non-destructive park on this platform" if act.irreversible else "this action is not destructive"), None


def _hash(spec: HostSpec, act: MeterAction, gates: list[Gate], used: list[Event], runs: HostRuns,
          allow_unverified: bool) -> str:
    body = {"host": spec.name, "destination": spec.destination, "platform": spec.profile.platform,
            "action": act.action, "instance": spec.instance_id, "allow_unverified": allow_unverified,
            "gates": [(g.id, g.state) for g in gates], "manifests": sorted(str(v.data.get("manifest_sha256")) for v in used),
            "runs": sorted((r.run_id, r.status) for r in runs.runs)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


async def plan(host: Host, spec: HostSpec, action: str, ledger: Ledger, allow_unverified: bool = False,
               issue: bool = True) -> TeardownPlan:
    """Evaluate every gate; nothing on the box changes."""
    act = _action(spec, action)
    runs = await list_runs(host, spec, ledger)
    destroys_data = act.irreversible or bool(act.loses)
    verifs = ledger.events("verification", host=spec.name, limit=1000)
    g1 = _g1(runs)
    g2, used = _g2(runs, verifs, destroys_data)
    g3 = await _g3(host, used, destroys_data)
    g4, offer = _g4(spec, act)
    gates = [g1, g2, g3, g4]
    if allow_unverified:
        gates = [g.model_copy(update={"state": "waived", "evidence": "WAIVED by allow_unverified: " + g.evidence})
                 if g.id in ("G2", "G3") and g.state == "fail" else g for g in gates]
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
        return ("not ready: " + " | ".join(unmet) + ". Fix these (let runs finish, run verify_artifacts), or pass "
                "allow_unverified=true only if you accept losing unverified data.")
    if act.executor == "none":
        return "nothing to stop on this box"
    if act.executor == "manual":
        return "confirm with this token to record your decision; then do the manual steps yourself"
    return f"ask the user; to execute exactly this plan call teardown again with token={token}"


def check_token(ledger: Ledger, token: str, spec: HostSpec, action: str) -> dict[str, Any]:
    rec = ledger.token(token)
    if rec is None:
        raise GateRefused("unknown token: it did not come from a teardown plan", host=spec.name,
                          next_step="call teardown without a token to get a plan and its token")
    if rec["host"] != spec.name or rec["action"] != action:
        raise GateRefused("the token belongs to another plan", host=spec.name,
                          observed=f"plan for {rec['host']} / {rec['action']}", expected=f"{spec.name} / {action}",
                          next_step="plan this host and action first")
    if rec["consumed"] is not None:
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name,
                          next_step="plan again if another action is really needed")
    if time.time() - rec["created"] > TOKEN_TTL_S:
        raise GateRefused("the token expired (30 min)", host=spec.name, next_step="plan again")
    return rec


def refuse_if_changed(fresh: TeardownPlan, rec: dict[str, Any]) -> None:
    if fresh.unmet:
        raise GateRefused("teardown refused: " + " | ".join(fresh.unmet), host=fresh.host,
                          next_step="nothing was executed; fix the unmet gates and plan again")
    if fresh.plan_hash != rec["plan_hash"]:
        raise GateRefused("the plan changed since the token was issued (runs, verifications or gates differ)",
                          host=fresh.host, next_step="nothing was executed; plan again and review the new plan")


def record_outcome(ledger: Ledger, spec: HostSpec, p: TeardownPlan, result: TeardownResult) -> None:
    ledger.record("teardown_outcome", host=spec.name, summary=result.message[:200],
                  data={"action": p.action, "plan_hash": p.plan_hash, "executed": result.executed,
                        "confirmed": bool(result.outcome and result.outcome.confirmed),
                        "final_state": result.outcome.final_state if result.outcome else None,
                        "allow_unverified": result.allow_unverified,
                        "evidence": result.outcome.evidence if result.outcome else []})
