"""Each drill attempt's output as points in time: the step (x) and loss of every metrics line,
stamped with when the line arrived, on the drill's one clock. The parser is plot_run's
(metrics.iter_records), line by line, after the box-text cleaner.

Which stream counts: stdout when it carries a loss series, stderr only when stdout carries none.
A line printed on the other stream never adds a point, so a script cannot forge its progress
there (a training loop that logs to stdout and warns on stderr is the common shape)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from mcp_server import untrusted
from mcp_server.run.jobs.metrics import X_KEYS, goal_of, iter_records

Stream = Literal["stdout", "stderr"]


@dataclass(frozen=True)
class Point:
    x: float | None  # the line's step (or iter, epoch ...) when it names one
    loss: float
    t: float  # seconds on the drill's clock when the line arrived


@dataclass
class AttemptOutput:
    n: int
    out: str
    err: str
    out_times: list[float]
    err_times: list[float]
    points: list[Point] = field(default_factory=list)
    stream: Stream | None = None
    key: str | None = None


def line_times(text: str, marks: list[list[float]]) -> list[float]:
    """The arrival time of each `\\n`-line of `text`, from the drill's (end offset, time) marks;
    a line past the last mark gets the last time (the drill stops marking after LINES_MAX)."""
    times: list[float] = []
    offset, i, last = 0, 0, 0.0
    for line in text.encode("utf-8", "surrogateescape").split(b"\n"):
        offset += len(line) + 1
        while i < len(marks) and marks[i][0] < offset - 1:
            i += 1
        if i < len(marks):
            last = float(marks[i][1])
        times.append(last)
    return times


def pick_key(keys: list[str], wanted: str | None) -> str | None:
    """The series the drill follows: the one asked for, else `loss`, else a loss-like name, else
    the first lower-is-better series."""
    if wanted:
        return wanted if wanted in keys else None
    for exact in ("loss", "train_loss", "train/loss", "loss/train", "total_loss"):
        if exact in keys:
            return exact
    lossy = [k for k in keys if "loss" in k.lower() and not k.lower().startswith(("eval", "val", "test"))]
    rest = lossy or [k for k in keys if goal_of(k) == "min"]
    return rest[0] if rest else None


def _records(text: str, times: list[float]) -> list[tuple[float, dict[str, float]]]:
    out = []
    for t, line in zip(times, text.split("\n"), strict=False):
        for _, rec in iter_records(untrusted.clean(line)):
            out.append((t, rec))
    return out


def _x_of(rec: dict[str, float]) -> float | None:
    return next((rec[k] for k in X_KEYS if k in rec and math.isfinite(rec[k])), None)


def points_of(a: AttemptOutput, wanted: str | None, stream: Stream | None = None,
              key: str | None = None) -> None:
    """Fill `a.points` from the stream and key given, else from the first stream with a series."""
    order: list[Stream] = [stream] if stream else ["stdout", "stderr"]
    for name in order:
        recs = _records(a.out, a.out_times) if name == "stdout" else _records(a.err, a.err_times)
        keys = list(dict.fromkeys(k for _, r in recs for k in r if k not in X_KEYS))
        chosen = key if key in keys else pick_key(keys, wanted)
        if chosen is None:
            continue
        a.stream, a.key = name, chosen
        a.points = [Point(_x_of(r), r[chosen], t) for t, r in recs if chosen in r]
        return


def finite(points: list[Point]) -> list[Point]:
    return [p for p in points if math.isfinite(p.loss)]
