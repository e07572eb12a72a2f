"""Verdicts on a training curve read from a smoothed series, never from single points.

Training losses are noisy: a raw minimum is one lucky batch and a raw last value one unlucky
one, so "last is 3x the best" on raw points calls a healthy run diverged. Every verdict here reads
the running median over the trailing `window(n)` finite points (about a tenth of the series, 5 to
25): a median ignores any run of outliers shorter than half its window, so a spike or a dip moves
nothing, while a level that stays changed for half a window moves it.
- level: the running median at the last point; best level: the best running median so far.
- diverged (lower-is-better series only): the level is `factor`x its best level (past it by
  `factor`x its size when the best is <= 0), or the series went NaN/Inf after finite values.
- wander: how far a running median strays by chance (`wander`); a change smaller than
  TREND_WANDERS / PLATEAU_WANDERS wanders, or than 1% of the level, is no news. The multiples were
  set on synthetic curves (a decay to a noisy floor, a slow decay) and the captured logs in
  tests/fixtures/trainlogs: no false divergence, no false "worsening" at a run's end, no plateau
  on a curve still improving by more than its noise.
- trend: a least-squares line over the last max(`trend_n`, window) running medians.
- plateau: over those same last points, the best running median beats the best before them by
  less than the margin."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Goal = Literal["min", "max"]
Trend = Literal["improving", "worsening", "flat", "unknown"]
Points = list[tuple[float, float]]
TREND_WANDERS = 3.5  # a false "worsening" on a noisy floor costs more than a late "improving"
PLATEAU_WANDERS = 2.0


def window(n: int) -> int:
    """The running median's width for a series of n finite points."""
    return max(1, min(n, 25, max(5, n // 10)))


def running_median(values: list[float], w: int) -> list[float]:
    """Each point's median over the trailing `w` points (fewer at the start)."""
    import numpy as np

    y = np.asarray(values, dtype=float)
    if len(y) == 0:
        return []
    head = [float(np.median(y[:j + 1])) for j in range(min(w - 1, len(y)))]
    if len(y) < w:
        return head
    tail = np.median(np.lib.stride_tricks.sliding_window_view(y, w), axis=1)
    return head + [float(v) for v in tail]


def wander(raw: list[float], smooth: list[float], w: int) -> float:
    """How far a median of `w` points strays by chance: the interquartile range of the points
    around their running median, over sqrt(w). Distribution-free (exact for uniform noise, 8% high
    for Gaussian), and a spike or a trend within the window barely moves it."""
    res = sorted(r - s for r, s in zip(raw, smooth, strict=True))
    if len(res) < 4:
        return 0.0
    return (res[3 * len(res) // 4] - res[len(res) // 4]) / math.sqrt(w)


@dataclass(frozen=True)
class Judgement:
    window: int
    level: float
    best_level: float
    best_level_step: float
    diverged: bool
    plateau: bool
    trend: Trend
    slope: float | None
    trend_n: int


def _better(a: float, b: float, goal: Goal) -> bool:
    return a < b if goal == "min" else a > b


def _slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return None if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def _margin(level: float, stray: float, wanders: float) -> float:
    """The smallest change of a running median that is news: 1% of the level, or `wanders` times
    the median's own chance wander."""
    return max(0.01 * abs(level), wanders * stray, 1e-12)


def _trend(xs: list[float], ys: list[float], goal: Goal, margin: float) -> tuple[Trend, float | None]:
    slope = _slope(xs, ys)
    if slope is None:
        return "unknown", None
    if abs(slope * (xs[-1] - xs[0])) < margin:
        return "flat", slope
    return ("improving" if (slope < 0) == (goal == "min") else "worsening"), slope


def _diverged(level: float, best: float, factor: float) -> bool:
    return level > factor * best if best > 0 else level > best + factor * max(abs(best), 1e-12)


def _plateau(smooth: list[float], trend_n: int, goal: Goal, stray: float) -> bool:
    if len(smooth) < 2 * trend_n or trend_n < 2:
        return False
    pick = min if goal == "min" else max
    before, recent = pick(smooth[:-trend_n]), pick(smooth[-trend_n:])
    gain = before - recent if goal == "min" else recent - before
    return gain < _margin(before, stray, PLATEAU_WANDERS)


def judge(finite: Points, goal: Goal, *, trend_n: int, factor: float, nonfinite_after: bool) -> Judgement | None:
    """The verdicts on a series' finite points (the module's docstring); None when it has none."""
    if not finite:
        return None
    ys = [p[1] for p in finite]
    w = window(len(ys))
    smooth = running_median(ys, w)
    best_i = 0
    for i, v in enumerate(smooth):
        if _better(v, smooth[best_i], goal):
            best_i = i
    n = min(max(trend_n, w), len(smooth))
    recent = max(n, 2 * w)
    stray = wander(ys[-recent:], smooth[-recent:], w)
    trend, slope = _trend([p[0] for p in finite[-n:]], smooth[-n:], goal, _margin(smooth[-1], stray, TREND_WANDERS))
    diverged = nonfinite_after or (goal == "min" and len(ys) >= 3 and _diverged(smooth[-1], smooth[best_i], factor))
    return Judgement(window=w, level=smooth[-1], best_level=smooth[best_i], best_level_step=finite[best_i][0],
                     diverged=diverged, plateau=_plateau(smooth, n, goal, stray), trend=trend,
                     slope=slope, trend_n=n)
