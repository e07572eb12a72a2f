"""reap_vram: A8's zombie VRAM holders made actionable, behind plan → confirm like teardown.

The plan (read-only) names each candidate by pid AND start time: a process that holds a
/dev/nvidia* node open, is not one of nvidia-smi's compute processes nor a child of one, is not
part of a run this server launched (cancel_run stops those) and is older than `min_age_s`. Its
token is bound to that exact set and the box's boot; confirming re-reads the holders and refuses
when the set changed, and the box signals a pid only while its start time is still the planned
one, so a pid the kernel has given to another process is never killed. A holder in another
container (listed by nvidia-smi, invisible here) gets "restart that container", never a kill."""

from __future__ import annotations

import hashlib
import secrets

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import GateRefused, RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.audit.gpu_checks import CANDIDATE, ZOMBIE_MIN_AGE_S, holder_verdict
from mcp_server.run.teardown.execute import check_token

ACTION = "reap_vram"


class Holder(BaseModel):
    pid: int
    start_ticks: int = Field(description="start time in clock ticks after boot: with the pid, names the process")
    age_s: int | None
    user: str
    command: str
    verdict: str = Field(description="candidate, or why it is left alone")


class ReapPlan(BaseModel):
    host: str
    candidates: list[Holder] = Field(description="zombie holders the token would stop (TERM, 5 s, KILL)")
    left_alone: list[Holder] = Field(description="other holders of a GPU device, with the reason")
    other_containers: list[str] = Field(description="what to do about holders this container cannot see")
    token: str | None = Field(description="confirm with it to stop exactly the candidates; none when there are none")
    next_step: str


class Reaped(BaseModel):
    pid: int
    outcome: str = Field(description="TERM (ended on TERM), KILL, gone (already ended), reused (not signalled)")


class ReapResult(BaseModel):
    host: str
    reaped: list[Reaped]
    message: str


def _parse(text: str) -> tuple[dict[str, str], list[list[str]], list[str]]:
    facts: dict[str, str] = {}
    holders, invisible = [], []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "holder":
            holders.append(value.split("\t"))
        elif key == "invisible":
            invisible.append(value)
        elif key:
            facts[key] = value
    return facts, holders, invisible


def _judge(fields: list[str], listed: set[int], own: frozenset[int], min_age_s: int, hidden: bool) -> Holder:
    pid, start, age, user, command, ancestors, ours = (fields + [""] * 7)[:7]
    age_s = int(age) if age.isdigit() else None
    verdict = holder_verdict(int(pid), listed, ancestors={int(a) for a in ancestors.split() if a.isdigit()},
                             age_s=age_s, min_age_s=min_age_s, hidden=hidden, own=own, ours=ours == "1")
    return Holder(pid=int(pid), start_ticks=int(start), age_s=age_s, user=user, command=command[:60], verdict=verdict)


async def _read(host: Host, min_age_s: int) -> tuple[str, list[Holder], list[Holder], list[str]]:
    res = await host.run(scripts.command("gpu_reap", "plan"), timeout=30)
    facts, rows, invisible = _parse(res.text)
    if res.exit_status == 3 or "error" in facts:
        raise RgtError(facts.get("error", "cannot list the GPU devices' holders"), host=host.name,
                       next_step="install psmisc (fuser) or lsof on the box")
    res.check("listing the GPU devices' holders")
    listed = {int(p) for p in facts.get("listed", "").split() if p.isdigit()}
    own = frozenset(int(p) for p in facts.get("self", "").split() if p.isdigit())
    judged = [_judge(r, listed, own, min_age_s, facts.get("hidden") == "1") for r in rows if r and r[0].isdigit()]
    advice = [f"pid {p} (another container's process, listed by nvidia-smi): restart that container; it cannot "
              "be signalled from here" for p in invisible]
    return (facts.get("boot", ""), [h for h in judged if h.verdict == CANDIDATE],
            [h for h in judged if h.verdict != CANDIDATE], advice)


def _hash(boot: str, candidates: list[Holder]) -> str:
    named = sorted(f"{h.pid}:{h.start_ticks}" for h in candidates)
    return hashlib.sha256(("\n".join([boot, *named])).encode()).hexdigest()


async def plan_reap(host: Host, spec: HostSpec, ledger: Ledger, min_age_s: int = ZOMBIE_MIN_AGE_S) -> ReapPlan:
    """The zombie holders and a token bound to exactly them; nothing on the box changes."""
    boot, candidates, others, advice = await _read(host, min_age_s)
    token = None
    if candidates:
        token = secrets.token_hex(16)
        ledger.issue_token(token, host=spec.name, action=ACTION, plan_hash=_hash(boot, candidates))
    ledger.record("reap_plan", host=spec.name, summary=f"{len(candidates)} zombie holder(s)",
                  data={"candidates": [h.model_dump() for h in candidates], "left_alone": len(others)})
    step = ("ask the user; to stop exactly these processes call reap_vram again with token=" + token if token
            else "nothing to reap")
    return ReapPlan(host=spec.name, candidates=candidates, left_alone=others, other_containers=advice, token=token,
                    next_step=step)


async def execute_reap(host: Host, spec: HostSpec, ledger: Ledger, token: str,
                       min_age_s: int = ZOMBIE_MIN_AGE_S) -> ReapResult:
    """Stop the planned holders if, and only if, the holders are still exactly the planned ones."""
    rec = check_token(ledger, token, spec, ACTION, tool="reap_vram")
    boot, candidates, _, _ = await _read(host, min_age_s)
    if _hash(boot, candidates) != rec.plan_hash:
        raise GateRefused("the GPU holders changed since the plan (a process ended or started, or a pid was "
                          "reused): nothing was signalled", host=spec.name, next_step="call reap_vram again for a "
                          "new plan and review it")
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name)
    words = [f"{h.pid}:{h.start_ticks}" for h in candidates]
    res = await host.run(scripts.command_words("gpu_reap", quote("kill"), *map(quote, words)), timeout=30)
    res.check("stopping the zombie holders")
    reaped = []
    for line in res.text.splitlines():
        key, _, value = line.partition("=")
        pid, _, outcome = value.partition("\t")
        if key == "reaped" and pid.isdigit():
            reaped.append(Reaped(pid=int(pid), outcome=outcome))
    ledger.record("reap", host=spec.name, summary=f"{len(reaped)} holder(s) stopped",
                  data={"reaped": [r.model_dump() for r in reaped]})
    return ReapResult(host=spec.name, reaped=reaped,
                      message=", ".join(f"pid {r.pid}: {r.outcome}" for r in reaped) or "nothing was signalled")
