"""teardown's second phase: with plan_teardown's token, re-evaluate, take the token exactly
once, run the verb, and confirm on the platform that the meter stopped."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from mcp_server.errors import GateRefused
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger, TokenRecord
from mcp_server.platforms import meter_for
from mcp_server.platforms.base import MeterOutcome, confirm
from mcp_server.redact import Redactor
from mcp_server.run.teardown.plan import TeardownPlan, TeardownResult, plan
from mcp_server.settings import HTTP_TIMEOUT_S, TEARDOWN_CONFIRM_S

TOKEN_TTL_S = 30 * 60
Ask = Callable[[str], Awaitable[bool]]
# Tools whose plan comes from a separate read-only tool (the others plan when called without a token).
_PLANNER = {"teardown": "plan_teardown"}


async def execute(host: Host, spec: HostSpec, action: str, token: str, *, ledger: Ledger, redactor: Redactor,
                  allow_unverified: bool = False, ask: Ask | None = None, confirm_bound_s: float = TEARDOWN_CONFIRM_S,
                  http_timeout_s: float = HTTP_TIMEOUT_S) -> TeardownResult:
    """Run the plan the token names, if and only if it still holds."""
    rec = check_token(ledger, token, spec, action)
    fresh = await plan(host, spec, action, ledger, allow_unverified=allow_unverified, issue=False)
    refuse_if_changed(fresh, rec)
    if ask is not None and not await ask(question(fresh)):
        ledger.record("teardown_confirm", host=spec.name, summary="declined by the user",
                      data={"action": action, "plan_hash": fresh.plan_hash, "decision": "declined"})
        return TeardownResult(plan=fresh, executed=False, allow_unverified=allow_unverified,
                              message="the user declined; nothing was done (the token is still valid)")
    check_token(ledger, token, spec, action)  # a concurrent confirm may have won meanwhile
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name)
    waived = [g.id for g in fresh.gates if g.state == "waived"]
    ledger.record("teardown_confirm", host=spec.name, summary=f"confirmed {action}",
                  data={"action": action, "plan_hash": fresh.plan_hash, "decision": "confirmed",
                        "allow_unverified": allow_unverified, "unverified_waived": waived})
    result = await _run(host, spec, fresh, redactor, allow_unverified, bound_s=confirm_bound_s,
                        http_timeout_s=http_timeout_s)
    record_outcome(ledger, spec, fresh, result)
    return result


def check_token(ledger: Ledger, token: str, spec: HostSpec, action: str, tool: str = "teardown") -> TokenRecord:
    """The token's record when it is this host's and action's, unused and fresh (shared by every
    plan → confirm tool: teardown, reap_vram, prepare_box)."""
    rec = ledger.token(token)
    if rec is None:
        raise GateRefused(f"unknown token: it did not come from a {tool} plan", host=spec.name,
                          next_step=f"call {_PLANNER[tool]} to get a plan and its token" if tool in _PLANNER
                          else f"call {tool} without a token to get a plan and its token")
    if rec.host != spec.name or rec.action != action:
        raise GateRefused("the token belongs to another plan", host=spec.name,
                          observed=f"plan for {rec.host} / {rec.action}", expected=f"{spec.name} / {action}",
                          next_step="plan this host and action first")
    if rec.consumed is not None:
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name,
                          next_step="plan again if another action is really needed")
    if time.time() - rec.created > TOKEN_TTL_S:
        raise GateRefused("the token expired (30 min)", host=spec.name, next_step="plan again")
    return rec


def refuse_if_changed(fresh: TeardownPlan, rec: TokenRecord) -> None:
    if fresh.unmet:
        raise GateRefused("teardown refused: " + " | ".join(fresh.unmet), host=fresh.host,
                          next_step="nothing was executed; fix the unmet gates and plan again")
    if fresh.plan_hash != rec.plan_hash:
        raise GateRefused("the plan changed since the token was issued (runs, verifications or gates differ)",
                          host=fresh.host, next_step="nothing was executed; plan again and review the new plan")


def question(p: TeardownPlan) -> str:
    """What the user is asked before the verb runs, from the plan alone (same plan, same question)."""
    lost = "; ".join(p.loses) or "nothing"
    still = "; ".join(p.keeps_billing) or "nothing known"
    warn = " UNVERIFIED DATA WILL BE LOST (allow_unverified)." if p.allow_unverified else ""
    return (f"Run {p.action} ({p.label}) on {p.host}? {'IRREVERSIBLE. ' if p.irreversible else ''}"
            f"Lost: {lost}. Still billed afterwards: {still}.{warn}")


async def _run(host: Host, spec: HostSpec, p: TeardownPlan, redactor: Redactor, allow_unverified: bool, *,
               bound_s: float, http_timeout_s: float) -> TeardownResult:
    if p.executor == "manual":
        return TeardownResult(plan=p, executed=False, allow_unverified=allow_unverified,
                              outcome=MeterOutcome(executed=False, confirmed=False, evidence=[p.manual_steps or ""]),
                              message="decision recorded; this platform is stopped by hand: " + (p.manual_steps or ""))
    meter = meter_for(p.executor, spec, host, redactor, http_timeout_s=http_timeout_s)
    answer = await meter.act(p.action)
    outcome = await confirm(meter, p.action, bound_s)
    if outcome.confirmed:
        msg = f"{p.action} done and confirmed: platform state {outcome.final_state}"
    else:
        msg = f"{p.action} was sent but the meter is NOT confirmed stopped: check the console now"
    if p.keeps_billing:
        msg += "; still billed: " + "; ".join(p.keeps_billing)
    if allow_unverified:
        msg += " (torn down WITHOUT a verified pull, by explicit allow_unverified)"
    return TeardownResult(plan=p, executed=True, outcome=outcome, platform_answer=redactor.scrub(answer),
                          allow_unverified=allow_unverified, message=redactor.scrub(msg))


def record_outcome(ledger: Ledger, spec: HostSpec, p: TeardownPlan, result: TeardownResult) -> None:
    ledger.record("teardown_outcome", host=spec.name, summary=result.message[:200],
                  data={"action": p.action, "plan_hash": p.plan_hash, "executed": result.executed,
                        "confirmed": bool(result.outcome and result.outcome.confirmed),
                        "final_state": result.outcome.final_state if result.outcome else None,
                        "allow_unverified": result.allow_unverified,
                        "evidence": result.outcome.evidence if result.outcome else []})
