"""prune_code: old snapshots of a project deleted behind plan → confirm, like teardown. The plan
lists every snapshot with its size and the runs that name it; a candidate is older than the
newest `keep`, is not `latest`, and no run names it (neither a run dir on the box nor a launch
in the ledger), so every recorded number can still be traced to its exact code. The token is
bound to that candidate set; confirming re-plans and refuses when the set changed."""

from __future__ import annotations

import hashlib
import secrets

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import GateRefused
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import check_name, path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.paths import policy
from mcp_server.paths.policy import box_scope
from mcp_server.run.code.push import code_dir
from mcp_server.run.teardown.execute import check_token

ACTION = "prune_code"


class Snapshot(BaseModel):
    snapshot_id: str
    sealed_at: float
    files: int
    bytes: int = Field(description="as du counts it alone: files shared with other snapshots are counted in each")
    used_by: list[str] = Field(description="runs that name it (first 10)")
    verdict: str = Field(description="candidate, or why it stays")


class PrunePlan(BaseModel):
    host: str
    project: str
    snapshots: list[Snapshot] = Field(description="newest first")
    candidates: list[str]
    token: str | None = Field(description="confirm with it to delete exactly the candidates; none when there are none")
    next_step: str


class PruneResult(BaseModel):
    host: str
    project: str
    pruned: list[str]
    message: str


def _ledger_users(ledger: Ledger, host: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ev in ledger.events("launch", host=host, limit=10_000):
        sid = (ev.data or {}).get("code_snapshot")
        if isinstance(sid, str) and ev.run_id:
            out.setdefault(sid, []).append(ev.run_id)
    return out


async def plan_prune(host: Host, spec: HostSpec, project: str, keep: int, ledger: Ledger,
                     issue: bool = True) -> PrunePlan:
    where = code_dir(spec, check_name(project, "project"))
    res = await host.run(scripts.command_words("code_list", path_word(where, "code dir"),
                                               path_word(spec.durable_root, "durable root")), timeout=30)
    res.check("listing the project's snapshots")
    latest, rows, used = "", [], _ledger_users(ledger, spec.name)
    for line in res.text.splitlines():
        f = line.split()
        if f[:1] == ["latest"] and len(f) == 2:
            latest = f[1]
        elif f[:1] == ["snap"] and len(f) == 5 and f[2].replace(".", "", 1).isdigit() and f[3].isdigit() \
                and f[4].isdigit():
            rows.append((f[1], float(f[2]), int(f[3]), int(f[4])))
        elif f[:1] == ["used"] and len(f) == 3:
            used.setdefault(f[1], []).append(f[2])
    rows.sort(key=lambda r: -r[1])
    snaps = []
    for i, (sid, at, files, size) in enumerate(rows):
        users = sorted(set(used.get(sid, [])))
        verdict = ("latest" if sid == latest else f"among the newest {keep}" if i < keep else
                   f"named by {len(users)} run(s)" if users else "candidate")
        snaps.append(Snapshot(snapshot_id=sid, sealed_at=at, files=files, bytes=size, used_by=users[:10],
                              verdict=verdict))
    candidates = [s.snapshot_id for s in snaps if s.verdict == "candidate"]
    token = None
    if candidates and issue:
        token = secrets.token_hex(16)
        ledger.issue_token(token, host=spec.name, action=ACTION, plan_hash=_hash(project, candidates))
    return PrunePlan(host=spec.name, project=project, snapshots=snaps, candidates=candidates, token=token,
                     next_step=("nothing to prune" if not candidates else
                                f"ask the user; prune_code again with token=… deletes {len(candidates)} snapshot(s)"))


def _hash(project: str, candidates: list[str]) -> str:
    return hashlib.sha256(f"{project}\n{' '.join(sorted(candidates))}".encode()).hexdigest()


async def confirm_prune(host: Host, spec: HostSpec, project: str, keep: int, token: str,
                        ledger: Ledger) -> PruneResult:
    rec = check_token(ledger, token, spec, ACTION, tool="prune_code")
    now = await plan_prune(host, spec, project, keep, ledger, issue=False)
    if _hash(project, now.candidates) != rec.plan_hash:
        raise GateRefused("the snapshots changed since the plan (a run now names one, or a push added one)",
                          host=spec.name, next_step="plan again: prune_code without a token")
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan executes once", host=spec.name)
    # The path policy on the box: each delete lies in the durable root's code/ tree (its owner's),
    # through no symlink.
    scope = box_scope(spec.durable_root, [f"{spec.durable_root.rstrip('/')}/code"], "the durable root's code/ tree",
                      this_machine=spec.kind == "local")
    res = await host.run(policy.library() + scripts.command_words(
        "code_prune", path_word(code_dir(spec, project), "code dir"), quote(" ".join(now.candidates)),
        *scope.words()), timeout=60)
    res.check("deleting the snapshots")
    pruned = [line.split()[1] for line in res.text.splitlines() if line.startswith("pruned ")]
    refused = [line.split(" ", 2) for line in res.text.splitlines() if line.startswith("refused ")]
    ledger.record("code_prune", host=spec.name, summary=f"{project}: {len(pruned)} snapshot(s)",
                  data={"project": project, "pruned": pruned, "refused": [r[1] for r in refused]})
    message = f"deleted {len(pruned)} snapshot(s) of {project}; no run named any of them"
    if refused:
        first = policy.refusal(refused[0][2] if len(refused[0]) > 2 else "", what="snapshot", host=spec.name,
                               scope=scope, done="it was left in place")
        message += f"; {len(refused)} left in place: {first.message}"
    return PruneResult(host=spec.name, project=project, pruned=pruned, message=message)
