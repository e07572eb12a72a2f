"""The verdict on a drill: smoke, checkpoint and drill stages from the drill's record, each
attempt's output and the content checks of its checkpoints. Nothing the job printed is taken as
a claim: steps and losses come from its metrics lines (series.py), saves from what the watcher
saw on disk (timeline.py), kills and exits from the drill itself."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from mcp_server.knowledge import reference_uri
from mcp_server.run.jobs.metrics import summarize
from mcp_server.run.jobs.signatures import scan
from mcp_server.run.preflight.hints import Framework
from mcp_server.run.preflight.models import Finding, Stage, stage
from mcp_server.run.preflight.series import AttemptOutput, Point, finite
from mcp_server.run.preflight.timeline import Event, Save, saves_of, staging_left
from mcp_server.verify.artifacts.checks import FileVerdict

RESUME = reference_uri("training/checkpoint-resume", "c3")
STALE = reference_uri("verifying/smoke-hidden-failures", "incomplete-checkpoint")
ATOMIC = reference_uri("run-remote/spot-resilience", "atomic-resume")
DRILL = reference_uri("run-remote/spot-resilience", "resume-drill")
GRACE = reference_uri("run-remote/spot-resilience", "grace-windows")
SMOKE = reference_uri("run-remote/lifecycle-checklist", "phase-2")
FULL_STATE = reference_uri("training/checkpoint-resume", "c1")
NAN = reference_uri("training/precision-stability", "p8")
TORN = reference_uri("training/checkpoint-resume", "c2")
DEFAULTS = "*.pt *.pth *.ckpt *.safetensors *.bin checkpoint-*"


@dataclass
class Drill:
    """What the judge reads: the drill's record and each attempt's output, parsed."""

    record: dict[str, Any]
    outputs: dict[int, AttemptOutput]
    events: list[Event]
    verdicts: list[FileVerdict] = field(default_factory=list)  # the newest checkpoint, as it stands
    after_kill: list[FileVerdict] = field(default_factory=list)  # what the mid-save kill left
    framework: Framework | None = None
    steps: int = 5

    def attempt(self, n: int) -> dict[str, Any] | None:
        return next((a for a in self.record.get("attempts", []) if isinstance(a, dict) and a.get("n") == n), None)

    def points(self, n: int) -> list[Point]:
        out = self.outputs.get(n)
        return out.points if out else []

    def x_at(self, n: int, t: float) -> float | None:
        """The last step attempt n printed by time t."""
        xs = [p.x for p in self.points(n) if p.t <= t and p.x is not None]
        return xs[-1] if xs else None

    @cached_property
    def saves(self) -> list[Save]:
        """The saves, grouped once: the record does not change while it is judged."""
        return saves_of(self.events, self.x_at)


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def _stopped_by_drill(a: dict[str, Any]) -> bool:
    return bool(a.get("signals"))


def _first_signal_t(a: dict[str, Any]) -> float | None:
    sig = a.get("signals") or []
    return float(sig[0][1]) if sig else None


def _failure(d: Drill, n: int) -> list[str]:
    """What an attempt printed about its failure before the drill signalled it: the failure
    signatures, else the last line of its stderr (box text: cleaned, cut short)."""
    out, a = d.outputs.get(n), d.attempt(n)
    if out is None or a is None:
        return []
    cut = _first_signal_t(a)
    err = [line for t, line in zip(out.err_times, out.err.split("\n"), strict=False) if cut is None or t < cut]
    hits = [h for h in scan("\n".join(err) + "\n" + out.out, limit=3) if h.id != "traceback"]
    last = next((line.strip() for line in reversed(err) if line.strip()), None)
    return [f"{h.family}: {h.line}"[:300] for h in hits] + ([f"last stderr line: {last[:240]}"] if last else [])


def _crash_route(d: Drill, n: int) -> str | None:
    out = d.outputs.get(n)
    hits = scan((out.err + "\n" + out.out) if out else "", limit=1)
    return hits[0].route if hits else None


def smoke(d: Drill) -> Stage:
    a = d.attempt(1)
    if a is None:
        return stage("smoke", [])
    pts, out = d.points(1), d.outputs.get(1)
    found: list[Finding] = []
    code = a.get("exit_code")
    if not _stopped_by_drill(a) and code not in (0, None):
        found.append(Finding(level="fail", what=f"the command exited {code} after {len(pts)} step(s): it does not "
                             "run through, and a rented box would fail the same way",
                             evidence=_failure(d, 1) or [f"exit code {code}"], route=_crash_route(d, 1) or SMOKE))
    if out is None or out.key is None:
        found.append(Finding(level="warn", what="no step/loss series in the output: the drill can tell neither "
                             "progress nor a resume from a restart",
                             evidence=["stdout and stderr hold no metrics line with a loss-like key"],
                             fix="print one line per step such as `step=100 loss=0.52` (or JSON lines), or name "
                             "the series with `metric`", route=SMOKE))
        return stage("smoke", found)
    good = finite(pts)
    bad = [p for p in pts if not math.isfinite(p.loss)]
    if bad:
        found.append(Finding(level="fail", what=f"the loss went non-finite ({bad[0].loss}) at step {_g(bad[0].x)}",
                             evidence=[f"{len(bad)} of {len(pts)} {out.key} values are NaN/Inf"], route=NAN))
    if len(good) >= 3 and max(p.loss for p in good) - min(p.loss for p in good) <= 1e-9 * max(1.0, abs(good[0].loss)):
        found.append(Finding(level="fail", what=f"{out.key} is {good[0].loss:g} at every one of {len(good)} steps: "
                             "nothing is learning (learning rate 0, a detached graph, frozen weights)",
                             evidence=[f"steps {_g(good[0].x)}..{_g(good[-1].x)}"],
                             route=reference_uri("training/convergence-debugging")))
    if len(pts) < d.steps and (_stopped_by_drill(a) or code == 0):
        found.append(Finding(level="warn", what=f"the smoke logged {len(pts)} step(s), fewer than the {d.steps} "
                             "asked", evidence=[f"attempt 1 {'was stopped' if _stopped_by_drill(a) else 'ended'}"],
                             fix="lengthen the tiny run or save less often so the smoke sees more steps"))
    if len(good) >= 8:
        stats = summarize(out.key, [(p.x if p.x is not None else i, p.loss) for i, p in enumerate(good)])
        if stats.diverged:
            found.append(Finding(level="warn", what=f"{out.key} is rising in the smoke", evidence=stats.flags[:2]))
    if not found or all(f.level == "pass" for f in found):
        found.append(Finding(level="pass", what=f"ran {len(pts)} step(s) on {out.stream}; {out.key} finite, "
                             f"{good[0].loss:.4g} -> {good[-1].loss:.4g}" if good else "ran", evidence=[]))
    return stage("smoke", found)


def seconds_per_step(d: Drill) -> float | None:
    pts = [p for p in finite(d.points(1)) if p.x is not None]
    if len(pts) < 2 or pts[-1].x == pts[0].x:
        return None
    return round((pts[-1].t - pts[0].t) / (pts[-1].x - pts[0].x), 4)  # type: ignore[operator]


def checkpoint(d: Drill) -> Stage:
    if d.attempt(1) is None:
        return stage("checkpoint", [])
    saves = d.saves
    fw = d.framework
    found: list[Finding] = []
    if not saves:
        found.append(Finding(level="fail", what="no checkpoint appeared while the smoke ran: a preempted run would "
                             "start over", evidence=[f"watched: {', '.join(d.record.get('globs') or []) or DEFAULTS}"],
                             fix=fw.save_fix if fw else None, route=ATOMIC))
        return stage("checkpoint", found)
    in_place = sorted({p for s in saves for p in s.in_place})
    files_in_place = [p for p in in_place if not any(e.is_dir for e in d.events if e.path == p)]
    if files_in_place:
        found.append(Finding(level="fail", what="written in place: the checkpoint grew under its final name, so a "
                             "kill during a save leaves a torn file where the good one was",
                             evidence=[f"{p}: changed under its name without a rename" for p in files_in_place[:3]],
                             fix="write <name>.tmp, flush and fsync, then os.replace(tmp, name)", route=ATOMIC))
    dirs_in_place = [p for p in in_place if p not in files_in_place]
    if dirs_in_place:
        found.append(Finding(level="warn", what="a checkpoint folder was written into after it appeared under its "
                             "final name: a kill mid-save leaves it half written",
                             evidence=dirs_in_place[:3], fix=fw.save_fix if fw else None, route=ATOMIC))
    bad = [v for v in d.verdicts if not v.ok]
    for v in bad[:3]:
        found.append(Finding(level="fail", what=f"the newest checkpoint does not pass its content check: {v.detail}",
                             evidence=[f"{v.path}: {v.finding}"], route=TORN))
    left = staging_left(d.events)
    if left:
        found.append(Finding(level="warn", what="temp files from an interrupted save are left beside the checkpoints: "
                             "they pile up over preemptions", evidence=left[:3],
                             fix="delete <name>.tmp at start, before loading"))
    if not found:
        checked = ", ".join(f"{v.path} ({v.kind})" for v in d.verdicts[:3]) or "no file of a checked type"
        found.append(Finding(level="pass", what=f"{len(saves)} save(s) seen, each under its final name in one step; "
                             f"content check passed: {checked}", evidence=[]))
    return stage("checkpoint", found)


def _interval(d: Drill, saves: list[Save]) -> float | None:
    xs = sorted({x for x in (s.x for s in saves) if x is not None})
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False) if b > a]
    if gaps:
        return statistics.median(gaps)
    first = finite(d.points(1))
    return xs[0] - first[0].x if xs and first and first[0].x is not None and xs[0] > first[0].x else None


def _noise(pts: list[Point]) -> float:
    diffs = [abs(b.loss - a.loss) for a, b in zip(pts, pts[1:], strict=False)]
    return statistics.median(diffs) if diffs else 0.0


def _loss_at(d: Drill, x: float, before_attempt: int) -> float | None:
    """What an earlier attempt logged at step x."""
    for n in range(before_attempt - 1, 0, -1):
        for p in finite(d.points(n)):
            if p.x == x:
                return p.loss
    return None


def _resume(d: Drill, n: int, interrupted: float | None) -> list[Finding]:
    """Did attempt n continue from the newest checkpoint written before it started?"""
    a = d.attempt(n)
    if a is None:
        return []
    fw = d.framework
    pts = finite(d.points(n))
    start = float(a.get("started") or 0)
    done = [s for s in d.saves if s.end < start and (interrupted is None or s.start < interrupted - 0.001)]
    done_x = [(s, s.x) for s in done]
    newest = next(((s, x) for s, x in reversed(done_x) if x is not None), None)
    first = finite(d.points(1))
    if not pts:
        code = a.get("exit_code")
        if code not in (0, None) and not _stopped_by_drill(a):
            return [Finding(level="fail", what=f"the restart (attempt {n}) crashed before its first step: the "
                            "checkpoint it found could not be loaded", evidence=_failure(d, n) or [f"exit {code}"],
                            fix=fw.load_fix if fw else None, route=TORN)]
        return [Finding(level="warn", what=f"attempt {n} printed no step before it ended", evidence=[f"exit {code}"])]
    if newest is None or not first or first[0].x is None or pts[0].x is None:
        return [Finding(level="warn", what=f"attempt {n}: the log names no step, so a resume cannot be told from a "
                        "restart", fix="print the global step on each metrics line", route=DRILL)]
    save, cx = newest
    interval = _interval(d, d.saves) or 1.0
    tol = max(0.5 * interval, 1e-9)
    x0 = pts[0].x
    ev = [f"attempt {n} began at step {_g(x0)}", f"newest checkpoint before it: {', '.join(save.paths[:2])} "
          f"at step {_g(cx)}", f"attempt 1 began at step {_g(first[0].x)}"]
    if x0 <= first[0].x + tol and cx > first[0].x + tol:
        return [Finding(level="fail", what=f"restarted from step {_g(x0)}: the checkpoint at step {_g(cx)} was not "
                        "loaded, so every preemption costs the whole run so far", evidence=ev,
                        fix=fw.load_fix if fw else None, route=RESUME)]
    if x0 < cx - tol:
        older = [(s, x) for s, x in done_x if x is not None and x < cx and abs(x0 - x) <= interval]
        ev += [f"it matches the older save at step {_g(older[-1][1])}: {', '.join(older[-1][0].paths[:1])}"] \
            if older else []
        return [Finding(level="fail", what=f"resumed from an older checkpoint: began at step {_g(x0)}, but step "
                        f"{_g(cx)} was saved (a stale file loaded, e.g. newest picked by name or by epoch)",
                        evidence=ev, fix="pick the checkpoint with the highest step read from inside it (or a "
                        "numeric sort of the names), never a string sort or the highest epoch", route=STALE)]
    return _continuity(d, n, pts, ev, Finding(level="pass", what=f"attempt {n} resumed at step {_g(x0)} after the "
                                              f"checkpoint at step {_g(cx)}", evidence=ev))


def _continuity(d: Drill, n: int, pts: list[Point], ev: list[str], resumed: Finding) -> list[Finding]:
    """The loss where attempt n resumed against what an earlier attempt logged at that step."""
    fw, first, x0 = d.framework, finite(d.points(1)), pts[0].x
    before = _loss_at(d, x0, n) if x0 is not None else None
    noise = _noise(first)
    span = abs(first[0].loss - (before if before is not None else first[-1].loss))
    if before is None or span <= 3 * noise:
        return [resumed]
    jump = abs(pts[0].loss - before)
    if abs(pts[0].loss - first[0].loss) < 0.25 * span:
        return [Finding(level="fail", what=f"the step continued but the loss went back to its start "
                        f"({pts[0].loss:.4g}, was {before:.4g} at step {_g(x0)} before the kill): the weights "
                        "were not restored", evidence=ev, fix=fw.load_fix if fw else None, route=FULL_STATE)]
    if jump > 0.25 * span and jump > 3 * noise:
        return [resumed, Finding(level="warn", what=f"the loss jumps at the resume ({before:.4g} -> "
                                 f"{pts[0].loss:.4g} at step {_g(x0)}): optimizer, scheduler or RNG state may not "
                                 "be restored", evidence=ev, route=FULL_STATE)]
    return [resumed]


def drill(d: Drill) -> Stage:
    if d.attempt(2) is None:
        notes = [str(n) for n in d.record.get("notes", [])]
        if d.record.get("done") and d.attempt(1) is not None:
            return stage("drill", [Finding(level="skipped", what="the preemption drill did not run",
                                           evidence=notes or ["the smoke did not reach two saves"])]
                         + ([Finding(level="warn", what="the smoke finished before it could be stopped after two "
                                     "saves: the resume is untested", evidence=notes,
                                     fix="run more steps or save more often in the tiny config")]
                            if any("finished before" in s for s in notes) else []) + _again(d))
        return stage("drill", [])
    found: list[Finding] = []
    for n in (1, 2, 3):
        a = d.attempt(n)
        if a and a.get("escalated") and a.get("signals") and a["signals"][0][0] != "KILL":
            found.append(Finding(level="warn", what=f"attempt {n} ignored SIG{a['signals'][0][0]}: after the "
                                 f"{d.record.get('grace_s', 'grace')} s grace the drill sent SIGKILL, as a platform "
                                 "does; the job got no chance to save on the way out",
                                 evidence=[f"signals: {', '.join(s[0] for s in a['signals'])}"],
                                 fix="on SIGTERM set a flag; save at the next step boundary and exit", route=GRACE))
    found += _resume(d, 2, None)
    two = d.attempt(2) or {}
    kill = two.get("mid_save_kill") or {}
    kill_t = float(kill["t"]) if kill.get("t") is not None else None
    if two.get("exit_code") == 0:
        found.append(Finding(level="warn", what="attempt 2 ran to its end before a save could be interrupted: the "
                             "kill during a save was not tried", evidence=[str(n) for n in d.record.get("notes", [])],
                             fix="give the tiny run more steps (at least 6 saves)"))
    elif kill:
        when = "while the save was being written" if kill.get("during_write") else \
            "just after a save (it took less than the drill's 50 ms look)"
        found.append(Finding(level="pass", what=f"attempt 2 was killed (SIGKILL) {when}",
                             evidence=[f"touched: {', '.join(kill.get('touched') or [])}"[:300]]))
    elif two:
        found.append(Finding(level="warn", what="no save started during attempt 2: the kill during a save was not "
                             "tried", evidence=[f"stopped: {two.get('stop_reason')}"]))
    for v in d.after_kill:
        if not v.ok:
            found.append(Finding(level="fail", what=f"torn by the kill: {v.path} fails its content check ({v.detail})",
                                 evidence=[f"{v.path}: {v.finding}"], fix="write to a temp name, fsync, os.replace",
                                 route=TORN))
    found += _resume(d, 3, kill_t)
    three = d.attempt(3) or {}
    if three.get("signals"):
        found.append(Finding(level="warn", what="attempt 3 did not finish within attempt_s: the start after a "
                             "finished run was not tried", evidence=[f"stopped: {three.get('stop_reason')}"]))
    found += _again(d)
    return stage("drill", found)


def _again(d: Drill) -> list[Finding]:
    a = d.attempt(4)
    if a is None:
        return []
    pts, first = finite(d.points(4)), finite(d.points(1))
    if len(pts) > 2 and first and pts[0].x is not None and first[0].x is not None and pts[0].x <= first[0].x:
        return [Finding(level="warn", what=f"a start after the run finished redid the work from step {_g(pts[0].x)} "
                        f"({len(pts)} steps): a requeue or a second launch pays for the whole run again",
                        evidence=[f"attempt 4 exit {a.get('exit_code')}"], fix=d.framework.load_fix
                        if d.framework else None, route=RESUME)]
    return [Finding(level="pass", what=f"a start after the run finished did no work again ({len(pts)} step(s) "
                    f"logged, exit {a.get('exit_code')})")]


def judge(d: Drill) -> list[Stage]:
    return [smoke(d), checkpoint(d), drill(d)]
