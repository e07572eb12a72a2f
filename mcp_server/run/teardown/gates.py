"""The Iron Law's gates. Each reads facts (the box's run directories, the ledger's
verification records) and says pass / fail / not_required with the evidence.

  G1 no live run on the box (its run directories say so, not the ledger)
  G2 every finished run is covered by a passing verification newer than its end, whose
     manifest covers the run's declared outputs; the verifications are the machine's, through
     whichever inventory name they were made (plan.py keys them by the box's identity)
  G3 nothing under a verified root was written after it was verified
  G4 a destructive action on a platform with a non-destructive park has that park offered

A ledger event that is not a well-formed VerificationRecord never counts as a verification:
G2 names it and what was wrong with it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from mcp_server.globs import glob_regex
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import MeterAction
from mcp_server.run.jobs.listing import HostRuns, RunSummary
from mcp_server.run.jobs.status import LIVE
from mcp_server.verify.artifacts.record import RecordedVerification, Verifications
from mcp_server.verify.artifacts.roster import OWN_FILES

GateState = Literal["pass", "fail", "waived", "not_required"]
G2_NAME = "every finished run covered by a passing verification"
G3_NAME = "no write under a verified root since its verification"
MAX_LISTED = 5


class Gate(BaseModel):
    id: str
    name: str
    state: GateState
    evidence: str


def covers(v: RecordedVerification, run: RunSummary, host: str | None = None) -> bool:
    """A passing verification newer than the run's end whose files cover its declared outputs.
    `host`: the name the plan is for; a record made through another name of the same machine
    matches by its physical root (or an absolute root as called), never a `~` path, which is
    another login's home under another name."""
    if not v.record.passed or (run.ended_at and v.ts < run.ended_at):
        return False
    if run.outputs is None:
        return True
    named = v.record.root if host is None or v.record.host == host or v.record.root.startswith("/") else None
    roots = {r.rstrip("/") for r in (named, v.record.abs_root) if r}
    if run.outputs.root.rstrip("/") not in roots:
        return False
    return all(any(glob_regex(p).match(f) for f in v.record.files) for p in run.outputs.patterns)


def g1(runs: HostRuns) -> Gate:
    live = [r.run_id for r in runs.runs if r.status in LIVE]
    if live:
        return Gate(id="G1", name="no live run", state="fail",
                    evidence=f"{len(live)} live run(s) on the box: {', '.join(live[:5])} (tearing down kills them; "
                             "wait_for_run until they end, or stop them with cancel_run — allow_unverified does not "
                             "lift this gate)")
    return Gate(id="G1", name="no live run", state="pass", evidence=f"{len(runs.runs)} run(s) on the box, none live")


def g2(runs: HostRuns, verifs: Verifications, needed: bool,
       host: str | None = None) -> tuple[Gate, list[RecordedVerification]]:
    """G2 and the verifications it relied on (newest first); `host` as for `covers`."""
    if not needed:
        return Gate(id="G2", name=G2_NAME, state="not_required", evidence="the action keeps the data"), []
    passing = verifs.passing
    used: dict[int, RecordedVerification] = {}
    gaps = []
    for r in runs.runs:
        if r.status in LIVE:
            continue
        cover = next((v for v in passing if covers(v, r, host)), None)
        if cover is None:
            why = "declared outputs not in any passing verification newer than its end" if r.outputs else \
                "no passing verification newer than its end"
            gaps.append(f"{r.run_id} ({r.status}): {why}")
        else:
            used[cover.event_id] = cover
    if not passing:
        none = ("no passing verify_artifacts of this machine in the ledger (under any of its names): nothing "
                "proves a local copy")
        return _g2_fail(verifs, none), []
    if gaps:
        return _g2_fail(verifs, "; ".join(gaps[:MAX_LISTED])), list(used.values())
    latest = passing[0]
    used.setdefault(latest.event_id, latest)
    through = f", made through {latest.record.host!r}" if host is not None and latest.record.host != host else ""
    evidence = (f"{len(used)} verification(s) cover every finished run; latest {latest.record.manifest} "
                f"({len(latest.record.files)} files{through})")
    return Gate(id="G2", name=G2_NAME, state="pass", evidence=evidence + _unreadable(verifs)), list(used.values())


def _g2_fail(verifs: Verifications, why: str) -> Gate:
    return Gate(id="G2", name=G2_NAME, state="fail", evidence=why + _latest_failure(verifs) + _unreadable(verifs))


def _latest_failure(verifs: Verifications) -> str:
    """When the newest verification failed, what failed in it: the reason a retry must fix."""
    if not verifs.valid or verifs.valid[0].record.passed:
        return ""
    latest = verifs.valid[0]
    blocking = [f for f in latest.record.findings if f.blocking]
    named = "; ".join(f"{f.path} ({f.kind}: {f.message[:120]})" for f in blocking[:MAX_LISTED])
    more = f" (+{len(blocking) - MAX_LISTED} more)" if len(blocking) > MAX_LISTED else ""
    return f"; the latest verification (event #{latest.event_id}) FAILED: {named or 'no files'}{more}"


def _unreadable(verifs: Verifications) -> str:
    if not verifs.unreadable:
        return ""
    return (f"; {len(verifs.unreadable)} ledger verification event(s) are not valid verification records and do "
            f"not count: {' | '.join(verifs.unreadable[:MAX_LISTED])}")


async def g3(host: Host, used: list[RecordedVerification], needed: bool) -> Gate:
    if not needed:
        return Gate(id="G3", name=G3_NAME, state="not_required", evidence="the action keeps the data")
    if not used:
        return Gate(id="G3", name=G3_NAME, state="fail", evidence="no verified root to compare against")
    later = []
    for v in used:
        root, at = v.record.abs_root or v.record.root, v.record.listed_at
        if not root or not at:
            later.append(f"{root}: verification has no listing time")
            continue
        # ctime too: a rewrite whose mtime was set back (touch -d, utime) still moves the ctime.
        res = await host.run(f"find {path_word(root)} -type f \\( -newermt @{at:.3f} -o -newerct @{at:.3f} \\) "
                             "2>/dev/null | head -n 50", timeout=25)
        changed = [p for p in res.text.splitlines() if p and not OWN_FILES.search(p.rsplit("/", 1)[-1])]
        if changed:
            later.append(f"{root}: {len(changed)} file(s) written after verification, e.g. {changed[0]}")
    if later:
        return Gate(id="G3", name=G3_NAME, state="fail", evidence="; ".join(later[:MAX_LISTED]) + " — verify again")
    return Gate(id="G3", name=G3_NAME, state="pass",
                evidence=f"{len(used)} verified root(s) unchanged since verification")


def g4(spec: HostSpec, act: MeterAction) -> tuple[Gate, str | None]:
    """G4 and the park to offer first, if any."""
    name = "non-destructive park offered first"
    park = next((a for a in spec.profile.meter_actions if a.park and not a.loses and a.action != act.action), None)
    if act.irreversible and park is not None:
        offer = (f"{park.action} ({park.label}) stops the GPU meter and keeps the disk"
                 f"{'; still billed: ' + '; '.join(park.keeps_billing) if park.keeps_billing else ''}")
        return Gate(id="G4", name=name, state="pass", evidence=f"offered: {offer}. Prefer it when unsure."), offer
    why = "no non-destructive park on this platform" if act.irreversible else "this action is not destructive"
    return Gate(id="G4", name=name, state="not_required", evidence=why), None
