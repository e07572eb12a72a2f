"""Scalars from TensorBoard event files, when the `tensorboard` package is importable here (the
optional `[tensorboard]` extra): the box sends the files' bytes, this side reads them with
tensorboard's own loader. Without the package, event files are listed as skipped, never guessed."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from mcp_server.run.jobs.metrics import Points

MAX_FILES = 4


def available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def parse_events(blob: bytes) -> dict[str, Points]:
    """Every scalar series in one event file: {tag: [(step, value), ...]} in file order. A file
    cut short (the box sent its first bytes only) yields what its complete records hold."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out: dict[str, Points] = {}
    with tempfile.TemporaryDirectory(prefix="rgt-tb-") as d:
        path = Path(d) / "events.out.tfevents.rgt"
        path.write_bytes(blob)
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                number = _scalar(value, tensor_util)
                if number is not None:
                    out.setdefault(value.tag, []).append((float(event.step), number))
    return out


def _scalar(value: Any, tensor_util: Any) -> float | None:
    """A summary value's scalar: the TF1 `simple_value`, or a one-element numeric tensor (TF2,
    PyTorch's SummaryWriter). NaN and Inf are kept: plot_run flags them."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor"):
        arr = tensor_util.make_ndarray(value.tensor)
        if arr.size == 1 and arr.dtype.kind in "fiu":
            return float(arr.reshape(()))
    return None
