"""Curves small enough to draw in a view: each series cut by metrics.downsample (every bucket's
lowest and highest point, so a spike survives) to a bounded number of finite points."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from mcp_server.run.jobs.metrics import Points, downsample

MAX_PER_SERIES = 200
# Every series of every run together: at about 17 bytes of JSON a point, the lot stays near 27 KB,
# well inside a result's budget beside the runs' own numbers.
MAX_TOTAL = 1600
DIGITS = 6  # significant digits kept: finer than a chart's pixels, and a third of a full float's bytes


class SeriesPoints(BaseModel):
    run_id: str
    key: str
    xy: list[tuple[float, float]] = Field(description="[step, value] in log order, finite values only, downsampled")


def _round(v: float) -> float:
    return float(f"{v:.{DIGITS}g}")


def curve_points(runs: list[tuple[str, dict[str, Points]]], keys: list[str]) -> list[SeriesPoints]:
    """Each of `keys` in each run that has it, downsampled so that no series has more than
    MAX_PER_SERIES points and all of them together no more than MAX_TOTAL; NaN and Inf are left
    out (the series' own numbers count them)."""
    found = [(run_id, k, data[k]) for run_id, data in runs for k in keys if k in data]
    if not found:
        return []
    limit = max(3, min(MAX_PER_SERIES, MAX_TOTAL // len(found)))
    return [SeriesPoints(run_id=run_id, key=k, xy=[(_round(x), _round(y)) for x, y in downsample(pts, limit)
                                                   if math.isfinite(x) and math.isfinite(y)])
            for run_id, k, pts in found]
