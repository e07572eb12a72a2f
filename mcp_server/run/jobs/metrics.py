"""Training metrics from a run's own text: parsing and the numbers an agent judges a run by.

Sources, all plain text: JSON lines (one object per line), CSV with a header row, and log lines in
the shapes popular trainers print (metric_lines: HF Trainer and Accelerate dict prints, tqdm and
Lightning bars, Keras, nanoGPT, fairseq, mmengine/mmcv, Detectron2, `key=value` / `key: value`
runs); a pair inside prose is never a series. The x axis of a point is the record's first x key in
X_KEYS order (`num_updates`, `step`, `global_step`, `iter`, `iteration`, `it`, `epoch`) when it has
one, else the point's index in its series. Non-finite values (nan, inf) are kept: they are the
news. Verdicts (diverged, plateau, trend) read a running median, never single points
(curve_judgement)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, Field

from mcp_server.run.jobs.curve_judgement import judge
from mcp_server.run.jobs.metric_lines import X_KEYS as X_KEYS
from mcp_server.run.jobs.metric_lines import has_series, line_record, x_of

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
    """Series by key; x from the record's x key, else the series' own count."""

    def __init__(self) -> None:
        self.series: dict[str, Points] = {}

    def add(self, record: dict[str, float]) -> None:
        x = x_of(record)
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


def iter_records(text: str) -> Iterator[tuple[int, dict[str, float]]]:
    """(0-based line number in `text.splitlines()`, record) for every line that holds a metric:
    the record carries the line's x keys (step, iter, epoch ...) when it names them. The rules
    parse_text uses, line by line."""
    for i, line in enumerate(text.splitlines()):
        if line.strip() and has_series(record := line_record(line)):
            yield i, record


def parse_text(text: str) -> dict[str, Points]:
    """Series from log lines: every record iter_records finds, in order."""
    col = _Collector()
    for _, record in iter_records(text):
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
    best: float | None = Field(description="the raw best (verdicts read running medians)")
    best_step: float | None
    trend: Literal["improving", "worsening", "flat", "unknown"] = Field(
        description="least-squares line over the last `trend_n` running medians")
    trend_slope: float | None = Field(description="its change per step")
    trend_n: int
    nan_count: int
    inf_count: int
    first_nonfinite_step: float | None
    diverged: bool = Field(description="running median is `diverge_factor`x its best, or NaN/Inf after finite values")
    plateau: bool = Field(description="the last `trend_n` running medians beat the best before by <1% and <noise")
    flags: list[str] = Field(description="what to look at")


def goal_of(key: str) -> Literal["min", "max"]:
    low = key.lower()
    return "min" if any(w in low for w in _LOWER_IS_BETTER) else "max"


def summarize(key: str, pts: Points, *, trend_n: int = 20, diverge_factor: float = 3.0) -> SeriesStats:
    """A series' facts (points, last, raw best, NaN/Inf) and verdicts read from its running median."""
    goal = goal_of(key)
    finite = [p for p in pts if math.isfinite(p[1])]
    nonfinite = [p for p in pts if not math.isfinite(p[1])]
    best_pt = None
    for p in finite:
        if best_pt is None or (p[1] < best_pt[1] if goal == "min" else p[1] > best_pt[1]):
            best_pt = p
    first_bad = nonfinite[0][0] if nonfinite else None
    after = bool(nonfinite and finite and pts.index(nonfinite[0]) > pts.index(finite[0]))
    j = judge(finite, goal, trend_n=trend_n, factor=diverge_factor, nonfinite_after=after)
    flags = []
    if nonfinite:
        flags.append(f"{key}: {len(nonfinite)} non-finite value(s), first at step {first_bad:g}")
    if j and j.diverged:
        why = "went non-finite after finite values" if after else (
            f"running median {j.level:.4g} is {diverge_factor:g}x+ its best")
        flags.append(f"{key}: diverged ({why}; best running median {j.best_level:.4g} at step "
                     f"{j.best_level_step:g}, over {j.window} points)")
    if j and j.plateau:
        flags.append(f"{key}: plateau over the last {j.trend_n} points")
    return SeriesStats(
        key=key, goal=goal, points=len(pts), first_step=pts[0][0] if pts else None,
        last_step=pts[-1][0] if pts else None, last=finite[-1][1] if finite else None,
        best=best_pt[1] if best_pt else None, best_step=best_pt[0] if best_pt else None,
        trend=j.trend if j else "unknown", trend_slope=j.slope if j else None, trend_n=j.trend_n if j else 0,
        nan_count=sum(1 for p in nonfinite if math.isnan(p[1])),
        inf_count=sum(1 for p in nonfinite if math.isinf(p[1])), first_nonfinite_step=first_bad,
        diverged=bool(j and j.diverged), plateau=bool(j and j.plateau), flags=flags)


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
