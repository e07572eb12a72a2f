"""teardown's second phase: with the plan's token, re-evaluate, take the token exactly
once, run the verb, and confirm on the platform that the meter stopped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp_server.errors import GateRefused
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.platforms import meter_for
from mcp_server.platforms.base import MeterOutcome, confirm
from mcp_server.redact import Redactor
from mcp_server.run.teardown.plan import TeardownResult, check_token, plan, record_outcome, refuse_if_changed

CONFIRM_BOUND_S = 20.0
Ask = Callable[[str], Awaitable[bool]]


async def execute(host: Host, spec: HostSpec, action: str, token: str, *, ledger: Ledger, redactor: Redactor,
                  allow_unverified: bool = False, ask: Ask | None = None,
                  confirm_bound_s: float = CONFIRM_BOUND_S) -> TeardownResult:
    """Run the plan the token names, if and only if it still holds."""
    rec = check_token(ledger, token, spec, action)
    fresh = await plan(host, spec, action, ledger, allow_unverified=allow_unverified, issue=False)
    refuse_if_changed(fresh, rec)
    if ask is not None and not await ask(_question(fresh)):
        ledger.record("teardown_confirm", host=spec.name, summary="declined by the user",
                      data={"action": action, "plan_hash": fresh.plan_hash, "decision": "declined"})
        return TeardownResult(plan=fresh, executed=False, allow_unverified=allow_unverified,
                              message="the user declined; nothing was done (the token is still valid)")
    check_token(ledger, token, spec, action)  # a concurrent confirm may have won meanwhile
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name)
    ledger.record("teardown_confirm", host=spec.name, summary=f"confirmed {action}",
                  data={"action": action, "plan_hash": fresh.plan_hash, "decision": "confirmed",
                        "allow_unverified": allow_unverified, "unverified_waived": [g.id for g in fresh.gates if g.state == "waived"]})
    result = await _run(host, spec, fresh, redactor, allow_unverified, confirm_bound_s)
    record_outcome(ledger, spec, fresh, result)
    return result


def _question(p) -> str:  # type: ignore[no-untyped-def]
    lost = "; ".join(p.loses) or "nothing"
    still = "; ".join(p.keeps_billing) or "nothing known"
    warn = " UNVERIFIED DATA WILL BE LOST (allow_unverified)." if p.allow_unverified else ""
    return (f"Run {p.action} ({p.label}) on {p.host}? {'IRREVERSIBLE. ' if p.irreversible else ''}"
            f"Lost: {lost}. Still billed afterwards: {still}.{warn}")


async def _run(host: Host, spec: HostSpec, p, redactor: Redactor, allow_unverified: bool,  # type: ignore[no-untyped-def]
               bound: float) -> TeardownResult:
    if p.executor == "manual":
        return TeardownResult(plan=p, executed=False, allow_unverified=allow_unverified,
                              outcome=MeterOutcome(executed=False, confirmed=False, evidence=[p.manual_steps or ""]),
                              message="decision recorded; this platform is stopped by hand: " + (p.manual_steps or ""))
    meter = meter_for(p.executor, spec, host, redactor)
    answer = await meter.act(p.action)
    outcome = await confirm(meter, p.action, bound)
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
