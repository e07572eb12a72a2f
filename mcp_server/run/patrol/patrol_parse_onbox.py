"""The on-box patrol's small readers: a metrics line's step, loss and planned total, a bounded
ring of samples with its trend, and how spans and sizes are written. Standard library only,
Python 3.8+: copied to the box beside patrol_onbox.py, never imported by the server."""

from __future__ import annotations

import json
import re

RING = 720  # memory/disk samples kept: one hour at the default 5 s
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|[Nn]a[Nn]|NAN|[Ii]nf(?:inity)?|INF)"
_STEP = re.compile(r"(?<![\w/.-])['\"]?(global_step|step|iteration|iter)['\"]?\s*([=:]?)\s*(\d+)"
                   r"(?:\s*/\s*(\d+))?(?![\d.])", re.I)
_LOSS = re.compile(r"(?<![\w/.-])['\"]?(?:train[_/])?loss['\"]?\s*[=:]?\s*['\"]?(" + _NUM + r")(?![\w.])", re.I)


def span(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def parse_line(line: str) -> tuple[int | None, float | None, int | None]:
    """The step, loss and planned total (`step 12/500`) a metrics-like line gives (JSON, `key=value`,
    `key: value`)."""
    step: int | None = None
    total: int | None = None
    loss: float | None = None
    text = line.strip()
    if text.startswith("{") and len(text) < 65536:
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict):  # `type(...) is`: a bool is no step
            step = next((obj[k] for k in ("global_step", "step", "iteration", "iter") if type(obj.get(k)) is int), None)
            loss = next((float(obj[k]) for k in ("loss", "train_loss", "train/loss")
                         if type(obj.get(k)) in (int, float)), None)
            return step, loss, None
    m = _LOSS.search(text)
    if m:
        loss = float(m.group(1))
    for s in _STEP.finditer(text):
        if s.group(2) or loss is not None:  # `step 12` alone is prose; with a loss it is a marker
            step, total = int(s.group(3)), int(s.group(4)) if s.group(4) else total
    return step, loss, total


class Ring:
    """Bounded (time, used, limit) samples and the trend of `used` over a window."""

    def __init__(self) -> None:
        self.items: list[tuple[float, float, float]] = []

    def add(self, t: float, used: float, limit: float) -> None:
        self.items.append((t, used, limit))
        del self.items[:-RING]

    def slope(self, window: float, min_span: float) -> float | None:
        """Least-squares growth of `used` per second over the last `window` seconds."""
        pts = [(t, u) for t, u, _ in self.items if t >= self.items[-1][0] - window] if self.items else []
        if len(pts) < 3 or pts[-1][0] - pts[0][0] < min_span:
            return None
        mt, mu = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
        var = sum((p[0] - mt) ** 2 for p in pts)
        return sum((p[0] - mt) * (p[1] - mu) for p in pts) / var if var else None


def gib(n: float) -> str:
    return "%.1f GiB" % (n / 2**30)
