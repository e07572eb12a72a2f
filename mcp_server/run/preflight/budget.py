"""The disk budget of the full run, projected from the smoke: how big one checkpoint is, how
often it saves and how many it keeps, and what else grows per step; then the peak bytes and
inodes over the planned length against a target's free space (knowledge run.md §1.2: budget
the checkpoints before paying, storage dies on inodes before bytes)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mcp_server.knowledge import reference_uri
from mcp_server.run.preflight.judge import Drill, _interval
from mcp_server.run.preflight.models import Budget, Finding, Stage, stage
from mcp_server.run.preflight.series import finite
from mcp_server.run.preflight.timeline import present_at

ROUTE = reference_uri("run-remote/launch", "disk-gate")
WARN_SHARE = 0.8  # a projection above this share of the free space is a warning


@dataclass(frozen=True)
class Target:
    what: str  # "box gpu1: /data (df)" or "profile autodl: data disk (documented ~50 GB)"
    free_bytes: int | None
    free_inodes: int | None


def _other_growth(d: Drill) -> tuple[float, float]:
    """Bytes and entries the run adds per step outside its checkpoints (logs, metrics, samples)."""
    a = d.attempt(1)
    pts = [p for p in finite(d.points(1)) if p.x is not None]
    if not a or len(pts) < 2 or not a.get("tree_start") or not a.get("tree_end"):
        return 0.0, 0.0
    steps = (pts[-1].x or 0) - (pts[0].x or 0) + 1
    ckpt_start = present_at(d.events, float(a.get("started") or 0))
    ckpt_end = present_at(d.events, float(a.get("ended") or 0))
    dbytes = (a["tree_end"][0] - a["tree_start"][0]) - (sum(e.size for e in ckpt_end.values())
                                                         - sum(e.size for e in ckpt_start.values()))
    dfiles = (a["tree_end"][1] - a["tree_start"][1]) - (sum(e.files + e.is_dir for e in ckpt_end.values())
                                                         - sum(e.files + e.is_dir for e in ckpt_start.values()))
    return max(0.0, dbytes / steps), max(0.0, dfiles / steps)


def _retention(d: Drill) -> tuple[str, int | None]:
    """How many checkpoints the run keeps: None for every one it writes."""
    names = {p for s in d.saves for p in s.paths}
    removed = any(e.kind == "remove" and not e.staging for e in d.events)
    if len(names) <= 1:
        return "one name, overwritten", 1
    if removed:  # what stays once a save's rotation is done; `peak` counts the moment in between
        kept = max(1, len(present_at(d.events, float("inf"))))
        return f"keeps the newest {kept}", kept
    return "keeps every checkpoint", None


def _fill_step(unit: float, every: float, keep: int | None, transient: int, other: float, free: float,
               planned: float) -> float:
    """The first save at which the run's bytes (or inodes) pass `free`; `planned` when only the
    growth between saves does (logs, samples)."""
    for k in range(1, min(math.floor(planned / every), 10**6) + 1):
        kept = k if keep is None else min(keep, k)
        if (kept + transient) * unit + other * k * every > free:
            return k * every
    return planned


def budget(d: Drill, planned: float | None, target: Target | None) -> tuple[Budget, Stage]:
    saves = d.saves
    if not saves:
        return Budget(planned_steps=planned, checkpoint_bytes=None, checkpoint_files=None, save_every=None,
                      retention=None), stage("budget", [Finding(level="skipped", what="no checkpoint to budget")])
    unit = max(s.size for s in saves)
    files = max(s.files for s in saves)
    every = _interval(d, saves)
    retention, keep = _retention(d)
    atomic = not any(s.in_place for s in saves)
    transient = 1 if atomic else 0  # the new checkpoint beside the old until the rename
    other_b, other_i = _other_growth(d)
    out = Budget(planned_steps=planned, checkpoint_bytes=unit, checkpoint_files=files, save_every=every,
                 retention=retention)
    found: list[Finding] = []
    xs = [x for x in (s.x for s in saves) if x is not None]
    if planned is None or not every:
        why = "give planned_steps (in the steps the log prints) to project the full run" if planned is None else \
            "the save interval in steps could not be read from the log"
        found.append(Finding(level="skipped", what=f"not projected: {why}",
                             evidence=[f"one checkpoint {unit} bytes in {files} file(s); {retention}"]))
        return out, stage("budget", found)
    n_saves = math.floor(planned / every)
    kept = n_saves if keep is None else min(keep, n_saves)
    out.peak_bytes = int((kept + transient) * unit + other_b * planned)
    out.peak_inodes = int((kept + transient) * (files + (1 if saves[0].is_dir else 0)) + other_i * planned)
    ev = [f"one checkpoint: {unit / 2**20:.2f} MiB in {files} file(s), saved every {every:g} steps"
          f" (saves seen at steps {', '.join(f'{x:g}' for x in xs[:6])})", f"retention: {retention}",
          f"other files grow {other_b / 1024:.1f} KiB per step"]
    if target is None or (target.free_bytes is None and target.free_inodes is None):
        found.append(Finding(level="warn", what=f"projected peak {out.peak_bytes / 2**30:.2f} GiB, "
                             f"{out.peak_inodes} inodes over {planned:g} steps; no target to compare with",
                             evidence=ev, fix="give budget_host (a box in the inventory) to compare", route=ROUTE))
        return out, stage("budget", found)
    return out, stage("budget", found + [_compare(out, target, keep, transient, other_b, ev)])


def _compare(out: Budget, target: Target, keep: int | None, transient: int, other_b: float,
             ev: list[str]) -> Finding:
    """The projection against the target's free bytes and inodes."""
    assert out.peak_bytes is not None and out.peak_inodes is not None and out.save_every and out.planned_steps
    unit, files, every, planned = out.checkpoint_bytes or 0, out.checkpoint_files or 1, out.save_every, \
        out.planned_steps
    out.target, out.free_bytes, out.free_inodes = target.what, target.free_bytes, target.free_inodes
    ev.append(f"target {target.what}: {_gib(target.free_bytes)} free, {target.free_inodes} inodes free")
    over_b = target.free_bytes is not None and out.peak_bytes > target.free_bytes
    over_i = target.free_inodes is not None and out.peak_inodes > target.free_inodes
    if over_b or over_i:
        fill = _fill_step(unit, every, keep, transient, other_b, float(target.free_bytes or 0), planned) if over_b \
            else _fill_step(files + 1, every, keep, transient, 0.0, float(target.free_inodes or 0), planned)
        out.fills_at_step = fill
        change = ["keep only the newest 2-3 checkpoints (save_top_k / save_total_limit / delete older on save)"] \
            if keep is None else []
        change += ["save less often", "put checkpoints on a bigger durable tier"]
        return Finding(level="fail", what=f"fills the target's {'bytes' if over_b else 'inodes'} at about step "
                       f"{_g(fill)} of {planned:g}: projected peak {_gib(out.peak_bytes)}, {out.peak_inodes} inodes",
                       evidence=ev, fix="; ".join(change), route=ROUTE)
    if (target.free_bytes and out.peak_bytes > WARN_SHARE * target.free_bytes) or (
            target.free_inodes and out.peak_inodes > WARN_SHARE * target.free_inodes):
        return Finding(level="warn", what=f"fits, but the projected peak {_gib(out.peak_bytes)} is over "
                       f"{WARN_SHARE:.0%} of the free space", evidence=ev, route=ROUTE)
    return Finding(level="pass", what=f"fits: projected peak {_gib(out.peak_bytes)}, {out.peak_inodes} inodes over "
                   f"{planned:g} steps", evidence=ev)


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"
