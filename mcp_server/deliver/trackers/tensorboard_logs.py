"""TensorBoard runs from event files: each folder holding `events.out.tfevents.*` files is one run, as
TensorBoard shows it. Read with tensorboard's loader and plot_run's scalar rule (run/jobs/tbevents.py):
the last value and length of each scalar series, the first and last event times, and the hparams
plugin's session when the script wrote one (its hparams are the config, its end status the state).
TensorBoard records no run state of its own: without a session the state is 'unknown'."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp_server.deliver.trackers.linking import explicit_id, flat_config
from mcp_server.deliver.trackers.models import MAX_RUNS, TrackerRun, TrackerRuns, TrackerState
from mcp_server.run.jobs import tbevents

PREFIX = "events.out.tfevents."
MAX_EVENTS = 100_000  # events read per run
MAX_FOLDERS = 5000  # folders walked per source
_STATUS: dict[int, TrackerState] = {1: "finished", 2: "failed", 3: "running"}  # hparams api_pb2.Status


def find_runs(root: Path) -> tuple[list[Path], bool]:
    """Folders at or under `root` that hold event files, newest first; True when the walk stopped at
    MAX_FOLDERS folders."""
    found: list[tuple[float, Path]] = []
    for walked, (folder, _, files) in enumerate(os.walk(root), start=1):
        if walked > MAX_FOLDERS:
            return [p for _, p in sorted(found, reverse=True)], True
        events = [Path(folder) / f for f in files if f.startswith(PREFIX)]
        if events:
            found.append((max(p.stat().st_mtime for p in events), Path(folder)))
    return [p for _, p in sorted(found, reverse=True)], False


def is_source(root: Path) -> bool:
    return root.is_dir() and bool(find_runs(root)[0])


def read_tensorboard(root: Path, max_runs: int = MAX_RUNS) -> TrackerRuns:
    root = root.parent if root.is_file() else root
    folders, walk_cut = find_runs(root)
    notes = [f"stopped looking after {MAX_FOLDERS} folders"] if walk_cut else []
    runs = [read_run(root, f) for f in folders[:max_runs]]
    return TrackerRuns(backend="tensorboard", source=str(root), runs=runs, found=len(folders),
                       cut=walk_cut or len(folders) > max_runs, notes=notes)


class _Fold:
    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.points: dict[str, int] = {}
        self.times: list[float] = []
        self.hparams: dict[str, Any] = {}
        self.status: int | None = None
        self.started: bool = False
        self.events = 0


def read_run(root: Path, folder: Path) -> TrackerRun:
    """One run from the event files in `folder`, oldest file first."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    fold = _Fold()
    for path in sorted(folder.glob(PREFIX + "*")):
        for event in EventFileLoader(str(path)).Load():
            fold.events += 1
            if fold.events > MAX_EVENTS:
                break
            fold.times.append(event.wall_time)
            for value in event.summary.value:
                _apply(fold, value, event.step, tensor_util)
    return _run(root, folder, fold)


def _apply(fold: _Fold, value: Any, step: int, tensor_util: Any) -> None:
    plugin = value.metadata.plugin_data
    if plugin.plugin_name == "hparams":
        _session(fold, value.tag, plugin.content)
        return
    number = tbevents._scalar(value, tensor_util)
    if number is not None:
        fold.last[value.tag] = number
        fold.points[value.tag] = fold.points.get(value.tag, 0) + 1


def _session(fold: _Fold, tag: str, content: bytes) -> None:
    from tensorboard.plugins.hparams import metadata

    if tag == metadata.SESSION_START_INFO_TAG:
        fold.started = True
        info = metadata.parse_session_start_info_plugin_data(content)
        fold.hparams.update({k: _value(v) for k, v in info.hparams.items()})
    elif tag == metadata.SESSION_END_INFO_TAG:
        fold.status = metadata.parse_session_end_info_plugin_data(content).status


def _value(v: Any) -> Any:
    kind = v.WhichOneof("kind")
    return None if kind in (None, "null_value") else getattr(v, kind)


def _state(fold: _Fold) -> TrackerState:
    if fold.status is not None:
        return _STATUS.get(fold.status, "unknown")
    return "running" if fold.started else "unknown"


def _run(root: Path, folder: Path, fold: _Fold) -> TrackerRun:
    config, config_cut = flat_config(fold.hparams)
    rgt_run_id, matched_by = explicit_id(config, [])
    cut = fold.events > MAX_EVENTS
    notes = [f"only the first {MAX_EVENTS} events were read"] if cut else []
    if config_cut:
        notes.append("hparams have more keys than were kept")
    return TrackerRun(
        backend="tensorboard", id=folder.relative_to(root).as_posix(), name=folder.name, project=root.name,
        state=_state(fold), started_at=_iso(min(fold.times, default=None)),
        ended_at=_iso(max(fold.times, default=None)) if fold.status is not None else None,
        config=config, summary=fold.last, history_length=max(fold.points.values(), default=0), history_cut=cut,
        rgt_run_id=rgt_run_id, matched_by=matched_by, source=str(folder), store=str(root), notes=notes)


def _iso(seconds: float | None) -> str | None:
    return datetime.fromtimestamp(seconds, UTC).isoformat() if seconds is not None else None
