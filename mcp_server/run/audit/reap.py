"""reap_vram: A8's zombie VRAM holders made actionable, behind plan → confirm like teardown.

The plan (read-only) names each candidate by pid AND start time: a process that holds a
/dev/nvidia* node open, is not one of nvidia-smi's compute processes nor a child of one, is not
part of a run this server launched (cancel_run stops those), is older than `min_age_s` and
belongs to the SSH user (another user's only with `include_other_users`). Nothing is a candidate
unless nvidia-smi answered: a driver that failed (a driver/library mismatch after an upgrade,
while the jobs keep running), hung or is absent lists no process, and every live job would look
like a zombie. The token is bound to the candidate set, the box's boot and the user scope;
confirming re-reads the holders and refuses when any of them changed, and the box signals a pid
only while its start time is still the planned one (and, without `include_other_users`, only
the SSH user's own processes). A holder in another container (listed by nvidia-smi, invisible
here) gets "restart that container", never a kill."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import GateRefused, RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import reference_uri
from mcp_server.ledger import Ledger
from mcp_server.run.audit.driver_silence import Silence, smi_silence
from mcp_server.run.audit.gpu_checks import CANDIDATE, ZOMBIE_MIN_AGE_S, holder_verdict
from mcp_server.run.teardown.execute import check_token

ACTION = "reap_vram"
SMI_TIMEOUT_S = 15  # nvidia-smi is awaited this long on the box, then stopped: the call stays under ~40 s
MAX_LISTING_BYTES = 8 * 2**20  # the plan's listing; a longer one is cut, so it proves nothing
LEDGER_ITEMS = 50  # candidates kept in the ledger's record of a plan
OTHER_USER = "another user's process: a candidate only with include_other_users=true"
DRIVER_ROUTE = reference_uri("run-remote/audit-checks", "a2")


class Holder(BaseModel):
    pid: int
    start_ticks: int = Field(description="start time in clock ticks after boot: with the pid, names the process")
    age_s: int | None
    user: str
    command: str
    verdict: str = Field(description="candidate, or why it is left alone")


class ReapPlan(BaseModel):
    host: str
    driver_answered: bool = Field(description="false when nvidia-smi failed, hung or is absent: then nothing is a "
                                              "candidate, since a live job would look like a zombie")
    include_other_users: bool = Field(description="whether other users' processes may be candidates")
    candidates: list[Holder] = Field(description="zombie holders the token would stop (TERM, 5 s, KILL)")
    left_alone: list[Holder] = Field(description="other holders of a GPU device, with the reason")
    other_containers: list[str] = Field(description="what to do about holders this container cannot see")
    token: str | None = Field(description="confirm with it to stop exactly the candidates; none when there are none")
    next_step: str
    route: str | None = Field(default=None, description="the reference for the driver problem, when there is one")


class Reaped(BaseModel):
    pid: int
    outcome: str = Field(description="TERM (ended on TERM), KILL, gone (already ended), reused or other-user "
                                     "(not signalled)")


class ReapResult(BaseModel):
    host: str
    reaped: list[Reaped]
    message: str


@dataclass(frozen=True)
class _Seen:
    """What one run of the plan script saw."""

    boot: str
    me: str
    own: frozenset[int]
    listed: set[int]
    hidden: bool
    silence: Silence | None  # why nvidia-smi's list proves nothing; None when it answered
    rows: list[list[str]]
    advice: list[str]

    def judge(self, min_age_s: int, include_other_users: bool) -> tuple[list[Holder], list[Holder]]:
        """(candidates, left alone) under this user scope."""
        owner = None if include_other_users else self.me
        judged = [_judge(r, self.listed, self.own, min_age_s, self.hidden, answered=self.silence is None, owner=owner)
                  for r in self.rows if r and r[0].isdigit()]
        return [h for h in judged if h.verdict == CANDIDATE], [h for h in judged if h.verdict != CANDIDATE]


def _judge(fields: list[str], listed: set[int], own: frozenset[int], min_age_s: int, hidden: bool, *,
           answered: bool = True, owner: str | None = None) -> Holder:
    """One holder line judged by A8's rule; `owner`: the uid a candidate must run as (real and
    effective), None for any user."""
    pid, start, age, user, command, ancestors, ours, uids = (fields + [""] * 8)[:8]
    age_s = int(age) if age.isdigit() else None
    verdict = holder_verdict(int(pid), listed, ancestors={int(a) for a in ancestors.split() if a.isdigit()},
                             age_s=age_s, min_age_s=min_age_s, hidden=hidden, own=own, ours=ours == "1",
                             answered=answered)
    if verdict == CANDIDATE and owner is not None and not (owner and uids == f"{owner},{owner}"):
        verdict = OTHER_USER
    return Holder(pid=int(pid), start_ticks=int(start) if start.isdigit() else 0, age_s=age_s, user=user[:32],
                  command=command[:60], verdict=verdict)


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


def _silence(facts: dict[str, str], cut_short: bool) -> Silence | None:
    if cut_short:
        return Silence(f"the holders' listing was over {MAX_LISTING_BYTES} bytes and was cut, so it proves nothing",
                       "see A8 (audit_box) for what holds the GPUs")
    rc = facts.get("smi", "")
    if rc == "absent":
        return smi_silence(None, [])
    if not rc.lstrip("-").isdigit():
        return Silence("nvidia-smi's answer was not read", "call reap_vram again")
    return smi_silence(int(rc), [facts.get("smi_said", "")])


def _advice(invisible: list[str], facts: dict[str, str]) -> list[str]:
    advice = [f"pid {p} (another container's process, listed by nvidia-smi): restart that container; it cannot "
              "be signalled from here" for p in invisible if p.isdigit()]
    total = facts.get("invisible_total", "")
    if total.isdigit() and int(total) > len(advice):  # first: a cut list keeps it
        advice.insert(0, f"{total} pids listed by nvidia-smi are not visible here (another container's, or the "
                         f"listing is wrong); the first {len(advice)} follow")
    return advice


async def _read(host: Host) -> _Seen:
    res = await host.run(scripts.command("gpu_reap", "plan", str(SMI_TIMEOUT_S)), timeout=SMI_TIMEOUT_S + 15,
                         max_output=MAX_LISTING_BYTES)
    facts, rows, invisible = _parse(res.text)
    if res.exit_status == 3 or "error" in facts:
        raise RgtError("cannot list the GPU devices' holders: neither fuser nor lsof is installed", host=host.name,
                       next_step="install psmisc (fuser) or lsof on the box")
    res.check("listing the GPU devices' holders")
    silence = _silence(facts, res.stdout_truncated)
    listed = set() if silence else {int(p) for p in facts.get("listed", "").split() if p.isdigit()}
    return _Seen(boot=facts.get("boot", ""), me=facts.get("me", ""),
                 own=frozenset(int(p) for p in facts.get("self", "").split() if p.isdigit()), listed=listed,
                 hidden=facts.get("hidden") == "1", silence=silence, rows=rows,
                 advice=[] if silence else _advice(invisible, facts))


def _hash(boot: str, candidates: list[Holder], include_other_users: bool) -> str:
    named = sorted(f"{h.pid}:{h.start_ticks}" for h in candidates)
    scope = "users=all" if include_other_users else "users=own"
    return hashlib.sha256(("\n".join([boot, scope, *named])).encode()).hexdigest()


def _next_step(seen: _Seen, token: str | None, count: int) -> str:
    if seen.silence:
        return (f"{seen.silence.step}, then plan again. Nothing is offered: the driver did not answer "
                f"({seen.silence.reason}), and a live job would look like a zombie")
    if token:
        return (f"ask the user; to stop exactly these {count} process(es) call reap_vram again with token={token} "
                "and the same include_other_users")
    return "nothing to reap"


async def plan_reap(host: Host, spec: HostSpec, ledger: Ledger, min_age_s: int = ZOMBIE_MIN_AGE_S,
                    include_other_users: bool = False) -> ReapPlan:
    """The zombie holders and a token bound to exactly them; nothing on the box changes."""
    seen = await _read(host)
    candidates, others = seen.judge(min_age_s, include_other_users)
    token = None
    if candidates:
        token = secrets.token_hex(16)
        ledger.issue_token(token, host=spec.name, action=ACTION,
                           plan_hash=_hash(seen.boot, candidates, include_other_users))
    ledger.record("reap_plan", host=spec.name, summary=f"{len(candidates)} zombie holder(s)",
                  data={"candidates": [h.model_dump() for h in candidates[:LEDGER_ITEMS]],
                        "candidates_total": len(candidates), "left_alone": len(others),
                        "include_other_users": include_other_users,
                        "driver_silence": seen.silence.reason if seen.silence else None})
    return ReapPlan(host=spec.name, driver_answered=seen.silence is None, include_other_users=include_other_users,
                    candidates=candidates, left_alone=others, other_containers=seen.advice, token=token,
                    next_step=_next_step(seen, token, len(candidates)),
                    route=DRIVER_ROUTE if seen.silence else None)


def _refuse_unless_same(seen: _Seen, rec_hash: str, spec: HostSpec, min_age_s: int, include_other_users: bool) -> None:
    if seen.silence:
        raise GateRefused(f"the driver did not answer now ({seen.silence.reason}): nothing was signalled",
                          host=spec.name, next_step=f"{seen.silence.step}, then plan again")
    candidates, _ = seen.judge(min_age_s, include_other_users)
    if _hash(seen.boot, candidates, include_other_users) == rec_hash:
        return
    planned_with = not include_other_users
    if _hash(seen.boot, seen.judge(min_age_s, planned_with)[0], planned_with) == rec_hash:
        raise GateRefused("the token was planned with another include_other_users: nothing was signalled",
                          host=spec.name, observed=f"include_other_users={str(include_other_users).lower()}",
                          expected=f"include_other_users={str(planned_with).lower()}, as planned",
                          next_step="confirm with the value the plan was made with, or plan again")
    raise GateRefused("the GPU holders changed since the plan (a process ended or started, or a pid was "
                      "reused): nothing was signalled", host=spec.name, next_step="call reap_vram again for a "
                      "new plan and review it")


async def execute_reap(host: Host, spec: HostSpec, ledger: Ledger, token: str,
                       min_age_s: int = ZOMBIE_MIN_AGE_S, include_other_users: bool = False) -> ReapResult:
    """Stop the planned holders if, and only if, the holders are still exactly the planned ones."""
    rec = check_token(ledger, token, spec, ACTION, tool="reap_vram")
    seen = await _read(host)
    _refuse_unless_same(seen, rec.plan_hash, spec, min_age_s, include_other_users)
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name)
    candidates, _ = seen.judge(min_age_s, include_other_users)
    words = [f"{h.pid}:{h.start_ticks}" for h in candidates]
    scope = "all" if include_other_users else "own"
    res = await host.run(scripts.command_words("gpu_reap", quote("kill"), quote(scope), *map(quote, words)),
                         timeout=30)
    res.check("stopping the zombie holders")
    reaped = []
    for line in res.text.splitlines():
        key, _, value = line.partition("=")
        pid, _, outcome = value.partition("\t")
        if key == "reaped" and pid.isdigit():
            reaped.append(Reaped(pid=int(pid), outcome=outcome))
    ledger.record("reap", host=spec.name, summary=f"{len(reaped)} holder(s) stopped",
                  data={"reaped": [r.model_dump() for r in reaped[:LEDGER_ITEMS]], "reaped_total": len(reaped)})
    return ReapResult(host=spec.name, reaped=reaped,
                      message=", ".join(f"pid {r.pid}: {r.outcome}" for r in reaped[:LEDGER_ITEMS])
                      or "nothing was signalled")
