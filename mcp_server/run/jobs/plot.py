"""Render series as one PNG (matplotlib, Agg backend): one panel per series, runs overlaid
with a legend, non-finite points marked where they happened. matplotlib is optional (the
`[plots]` extra): without it `render` raises PlotUnavailable and the numbers still stand."""

from __future__ import annotations

import importlib.util
import io
import math
from typing import Any

from mcp_server.run.jobs.metrics import Points, downsample

WIDTH_PX, HEIGHT_PX, DPI = 800, 450, 100
MAX_PNG_BYTES = 256 * 1024
INSTALL_HINT = ("plots need matplotlib: pip install 'remote-gpu-trainer-mcp[plots]' (or pip install matplotlib) "
                "in the server's environment, then restart the server; the numbers below do not need it")


class PlotUnavailable(RuntimeError):
    """matplotlib is not importable."""


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    if not available():
        raise PlotUnavailable(INSTALL_HINT)
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _panel(ax: Any, key: str, runs: list[tuple[str, Points]], xlabel: str = "step") -> None:
    positive = True
    for label, pts in runs:
        pts = downsample(pts)
        finite = [p for p in pts if math.isfinite(p[1])]
        positive = positive and all(p[1] > 0 for p in finite)
        line = ax.plot([p[0] for p in finite], [p[1] for p in finite], linewidth=1.2, label=label)[0]
        for x, y in pts:
            if not math.isfinite(y):
                ax.axvline(x, color=line.get_color(), linestyle=":", linewidth=1)
                ax.plot([x], [1.0], marker="x", color="red", markersize=7, transform=ax.get_xaxis_transform(),
                        clip_on=False)
    ys = [p[1] for _, pts in runs for p in pts if math.isfinite(p[1])]
    if positive and ys and max(ys) / max(min(ys), 1e-300) > 100:
        ax.set_yscale("log")
    ax.set_title(key, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if len(runs) > 1:
        ax.legend(fontsize=7, loc="best")


def render(panels: dict[str, list[tuple[str, Points]]], title: str, xlabel: str = "step") -> bytes:
    """PNG bytes, 800x450 px: one panel per key (at most 4), each run a line with its label."""
    plt = _pyplot()
    keys = list(panels)[:4]
    cols = 1 if len(keys) == 1 else 2
    rows = max(1, math.ceil(len(keys) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, squeeze=False)
    try:
        for i, ax in enumerate(axes.flat):
            if i < len(keys):
                _panel(ax, keys[i], panels[keys[i]], xlabel)
            else:
                ax.set_visible(False)
        fig.suptitle(title[:120], fontsize=10)
        fig.tight_layout()
        for dpi in (DPI, 80, 60):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi)
            if buf.tell() <= MAX_PNG_BYTES:
                return buf.getvalue()
        return buf.getvalue()
    finally:
        plt.close(fig)
