"""Training metrics from a run's own text: parsing and the numbers an agent judges a run by.

Sources, all plain text: JSON lines (one object per line), CSV with a header row, and log lines
with `key=value` or `key: value` pairs. A log line gives pairs only where a metrics line puts
them: a run of pairs at the start of its message (after what a logger puts first: date, time,
level, [tags], file:line) or right after a step marker at that start (`step 100: loss=0.5`,
`[epoch 3] loss=0.4`, `Epoch 3/10 - loss: 0.4`, `it 10 | loss 0.3`); a pair inside prose
(`Note: the reaper said min_age_s=0`) is never a series. The x axis of a point is the line's
`step` (or `global_step`, `iter`, `iteration`, `it`, `epoch`) when the line has one, else the
point's index in its series. Non-finite values (nan, inf) are kept: they are the news."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Literal

from pydantic import BaseModel, Field

X_KEYS = ("step", "global_step", "iter", "iteration", "it", "epoch")
# Atomic digit runs: a long run of digits that is no number is refused in linear time, not quadratic.
_NUM = r"[-+]?(?:(?>\d+\.?\d*(?:[eE][-+]?\d+)?)|(?>\.\d+(?:[eE][-+]?\d+)?)|nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)"
_PAIR = re.compile(rf"(?<![\w./-])([A-Za-z_][\w./-]{{0,63}})\s*[=:]\s*({_NUM})(?![\w.:/-])")
_SPACED_PAIR = re.compile(rf"([A-Za-z_][\w./-]{{0,63}})\s+({_NUM})(?=\s*(?:\||$))")  # `| loss 0.3 |`
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"
# What a logger writes before the message, one token at a time.
_PREFIX = re.compile(rf"""\s*(?:
    \d[\w:.,/+-]*                                # a date, a time, a counter: 2024-01-01 12:00:01,123 32/32 2ms/step
  | \[(?:[^\]\s]{{0,40}}\d[^\]]{{0,80}}|\s*{_LEVEL}\s*|[=>.\s-]{{0,200}})\]  # [2024-01-01 12:00] [INFO] [rank0] [=>..]
  | {_LEVEL}(?::[\w.<>-]+(?=:))*:?               # INFO  INFO:root:  WARNING:__main__:
  | [IWEF]\d{{4}}                                # absl / glog: I0101
  | [\w.<>-]+\.py:\d+\]?                         # absl / glog: train.py:42]
  | [\w.<>-]+:[\w.<>-]+:\d+                       # loguru: __main__:main:12
  | [a-z_][\w.]*(?=\s+-\s)                       # a logger name before " - ": __main__ - INFO -
  | <std(?:out|err)>:?                           # mpirun: [1,0]<stdout>:
  | [-|:>]+(?=\s)                                # separators
)""", re.X)
_MARKER = re.compile(r"[\[(]?\s*(step|global_step|iteration|iter|it|epoch)\b\s*[=:#]?\s*(\d+(?:\.\d+)?)"
                     r"(?:\s*/\s*\d+)?\s*[\])]?:?", re.I)
_SEP = re.compile(r"(?:[\s,;|]|-(?=\s))*")
_LOWER_IS_BETTER = ("loss", "err", "perplexity", "ppl", "mse", "mae", "rmse", "wer", "cer", "nll", "bpd", "fid")
MAX_SERIES = 64
MAX_POINTS = 200_000

Points = list[tuple[float, float]]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _Collector:
    """Series by key; x from the record's step key, else the series' own count."""

    def __init__(self) -> None:
        self.series: dict[str, Points] = {}

    def add(self, record: dict[str, float]) -> None:
        x = next((record[k] for k in X_KEYS if k in record and math.isfinite(record[k])), None)
        for key, value in record.items():
            if key in X_KEYS:
                continue
            pts = self.series.get(key)
            if pts is None:
                if len(self.series) >= MAX_SERIES:
                    continue
                pts = self.series[key] = []
            if len(pts) < MAX_POINTS:
                pts.append((float(len(pts)) if x is None else x, value))


def _json_record(line: str) -> dict[str, float] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    out: dict[str, float] = {}
    for k, v in obj.items():
        if isinstance(v, bool):
            continue
        if isinstance(v, int | float):
            out[str(k)] = float(v)
        elif isinstance(v, str) and (n := _number(v)) is not None:
            out[str(k)] = n
    return out


def _message_start(line: str) -> int:
    """Where the message begins: past the date, time, level, tags and file:line a logger writes first."""
    pos = 0
    while (m := _PREFIX.match(line, pos)) and m.end() > pos:
        pos = m.end()
    return len(line) - len(line[pos:].lstrip())


def _line_record(line: str) -> dict[str, float]:
    """The pairs a metrics line holds: a run of them at the message's start, or right after a step
    marker there; pairs later in the line, after any other word, are prose and never count."""
    pos = _message_start(line)
    if line.startswith("{", pos):
        return _json_record(line[pos:]) or {}
    record: dict[str, float] = {}
    if marker := _MARKER.match(line, pos):
        record[marker[1].lower()] = float(marker[2])
        pos = marker.end()
    while True:
        sep = _SEP.match(line, pos)
        pos = sep.end() if sep else pos
        pair = _PAIR.match(line, pos) or (_SPACED_PAIR.match(line, pos) if sep and "|" in sep[0] else None)
        if not pair:
            return record
        record[pair[1]] = float(pair[2])
        pos = pair.end()


def parse_text(text: str) -> dict[str, Points]:
    """Series from log lines: JSON objects and `key=value` / `key: value` pairs where a metrics
    line puts them (the module's docstring)."""
    col = _Collector()
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        record = _json_record(s) if s.startswith("{") else None
        if record is None:
            record = _line_record(s)
        if record:
            col.add(record)
    return col.series


def parse_csv(text: str) -> dict[str, Points]:
    """Series from CSV with a header row; numeric columns only."""
    col = _Collector()
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if not header:
        return {}
    names = [h.strip() for h in header]
    for row in rows:
        record = {}
        for name, cell in zip(names, row, strict=False):
            n = _number(cell.strip()) if name else None
            if n is not None:
                record[name] = n
        if record:
            col.add(record)
    return col.series


def merge(into: dict[str, Points], more: dict[str, Points]) -> dict[str, Points]:
    """Add the series of another source; a key already present keeps the first source's points."""
    for k, v in more.items():
        if k not in into and v:
            into[k] = v
    return into


class SeriesStats(BaseModel):
    key: str
    goal: Literal["min", "max"] = Field(description="min for loss/error-like names, max otherwise")
    points: int
    first_step: float | None
    last_step: float | None
    last: float | None = Field(description="the last finite value")
    best: float | None
    best_step: float | None
    trend: Literal["improving", "worsening", "flat", "unknown"] = Field(
        description="direction of a least-squares line over the last `trend_n` finite points")
    trend_slope: float | None = Field(description="change per step over the last `trend_n` finite points")
    trend_n: int
    nan_count: int
    inf_count: int
    first_nonfinite_step: float | None
    diverged: bool = Field(description="last value is `diverge_factor`x worse than the best, or it went NaN/Inf "
                                        "after finite values")
    plateau: bool = Field(description="the last `trend_n` points improved on the best before them by < 1%")
    flags: list[str] = Field(description="short sentences: what to look at")


def goal_of(key: str) -> Literal["min", "max"]:
    low = key.lower()
    return "min" if any(w in low for w in _LOWER_IS_BETTER) else "max"


def _slope(pts: Points) -> float | None:
    if len(pts) < 3:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return None if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def _trend(slope: float | None, pts: Points, goal: str) -> Literal["improving", "worsening", "flat", "unknown"]:
    if slope is None:
        return "unknown"
    ys = [p[1] for p in pts]
    span = (pts[-1][0] - pts[0][0]) or 1.0
    scale = max(abs(sum(ys) / len(ys)), 1e-12)
    if abs(slope * span) / scale < 0.01:
        return "flat"
    return "improving" if (slope < 0) == (goal == "min") else "worsening"


def _better(a: float, b: float, goal: str) -> bool:
    return a < b if goal == "min" else a > b


def _diverged(finite: Points, best: float, last: float, goal: str, factor: float, nonfinite_after: bool) -> bool:
    if nonfinite_after:
        return True
    if goal != "min" or len(finite) < 3:
        return False
    return best > 0 and last > factor * best or best <= 0 and last > best + factor * max(abs(best), 1e-12)


def _plateau(finite: Points, n: int, goal: str) -> bool:
    if len(finite) < 2 * n or n < 2:
        return False
    before, window = finite[:-n], finite[-n:]
    pick = min if goal == "min" else max
    b0, b1 = pick(p[1] for p in before), pick(p[1] for p in window)
    gain = (b0 - b1) if goal == "min" else (b1 - b0)
    return gain < 0.01 * max(abs(b0), 1e-12)


def summarize(key: str, pts: Points, *, trend_n: int = 20, diverge_factor: float = 3.0) -> SeriesStats:
    goal = goal_of(key)
    finite = [p for p in pts if math.isfinite(p[1])]
    nonfinite = [p for p in pts if not math.isfinite(p[1])]
    best_pt = None
    for p in finite:
        if best_pt is None or _better(p[1], best_pt[1], goal):
            best_pt = p
    window = finite[-trend_n:]
    slope = _slope(window)
    first_bad = nonfinite[0][0] if nonfinite else None
    after = bool(nonfinite and finite and pts.index(nonfinite[0]) > pts.index(finite[0]))
    last = finite[-1][1] if finite else None
    div = best_pt is not None and last is not None and _diverged(finite, best_pt[1], last, goal, diverge_factor, after)
    plat = _plateau(finite, trend_n, goal)
    flags = []
    if nonfinite:
        flags.append(f"{key}: {len(nonfinite)} non-finite value(s), first at step {first_bad:g}")
    if div and best_pt is not None:
        why = "went non-finite after finite values" if after else f"last {last:.4g} is {diverge_factor:g}x+ worse"
        flags.append(f"{key}: diverged ({why}; best {best_pt[1]:.4g} at step {best_pt[0]:g})")
    if plat:
        flags.append(f"{key}: plateau over the last {trend_n} points")
    return SeriesStats(
        key=key, goal=goal, points=len(pts), first_step=pts[0][0] if pts else None,
        last_step=pts[-1][0] if pts else None, last=last, best=best_pt[1] if best_pt else None,
        best_step=best_pt[0] if best_pt else None, trend=_trend(slope, window, goal), trend_slope=slope,
        trend_n=len(window), nan_count=sum(1 for p in nonfinite if math.isnan(p[1])),
        inf_count=sum(1 for p in nonfinite if math.isinf(p[1])), first_nonfinite_step=first_bad,
        diverged=div, plateau=plat, flags=flags)


def default_keys(series: dict[str, Points], limit: int = 4) -> list[str]:
    """The series to draw when none were asked: loss-like ones first, then the rest in order seen."""
    lossy = [k for k in series if goal_of(k) == "min"]
    rest = [k for k in series if k not in lossy and k not in ("lr", "learning_rate", "time", "elapsed")]
    return (lossy + rest)[:limit]


def downsample(pts: Points, max_points: int = 1000) -> Points:
    """At most ~max_points points that keep the shape: per bucket the min and the max (so a spike
    survives), and every bucket's first non-finite point (so a NaN survives)."""
    if len(pts) <= max_points:
        return list(pts)
    buckets = max(1, max_points // 3)
    size = math.ceil(len(pts) / buckets)
    out: Points = []
    for i in range(0, len(pts), size):
        chunk = pts[i:i + size]
        finite = [p for p in chunk if math.isfinite(p[1])]
        keep = {chunk.index(p) for p in (min(finite, key=lambda p: p[1]), max(finite, key=lambda p: p[1]))} \
            if finite else set()
        bad = next((j for j, p in enumerate(chunk) if not math.isfinite(p[1])), None)
        if bad is not None:
            keep.add(bad)
        out.extend(chunk[j] for j in sorted(keep))
    return out
