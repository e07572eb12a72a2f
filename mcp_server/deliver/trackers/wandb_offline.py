"""W&B runs from the run folders wandb writes locally (`wandb/offline-run-*/run-<id>.wandb` with
WANDB_MODE=offline, `wandb/run-*/run-<id>.wandb` online): the run, its config and tags, the last value
of each metric, the number of history rows, and whether an exit record closes the log. A log with no
exit record belongs to a process that is still running or died before wandb.finish (killed, OOM, a
crash): its state reads 'running', as W&B's own server shows such a run until it gives up on it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp_server.deliver.trackers import wandb_log
from mcp_server.deliver.trackers.linking import explicit_id, flat_config
from mcp_server.deliver.trackers.models import MAX_RUNS, TrackerRun, TrackerRuns, TrackerState

_PATTERNS = ("*.wandb", "*run-*/run-*.wandb", "wandb/*run-*/run-*.wandb")


def find_logs(root: Path) -> list[Path]:
    """The run logs at or under `root` (a log, a run folder, a `wandb` folder or the folder above it),
    newest first (run folders are named by their start time)."""
    if root.is_file():
        return [root]
    found = {p.resolve(): p for pattern in _PATTERNS for p in root.glob(pattern) if p.is_file()}
    return sorted(found.values(), key=lambda p: (p.parent.name, p.name), reverse=True)


def is_source(root: Path) -> bool:
    return any(_is_log(p) for p in find_logs(root)[:3])


def read_wandb(root: Path, max_runs: int = MAX_RUNS) -> TrackerRuns:
    logs = [p for p in find_logs(root) if _is_log(p)]
    runs = [read_log(p, store=str(root)) for p in logs[:max_runs]]
    return TrackerRuns(backend="wandb", source=str(root), runs=runs, found=len(logs), cut=len(logs) > max_runs)


def _is_log(path: Path) -> bool:
    with path.open("rb") as f:
        return wandb_log.is_log(f.read(wandb_log.HEADER.size))


@dataclass
class _Fold:
    """What the records say so far."""

    run: Any = None
    config: dict[str, Any] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    rows: int = 0
    exit: Any = None


def read_log(path: Path, store: str | None = None) -> TrackerRun:
    """One run from its transaction log, records applied in file order."""
    read, fold = wandb_log.LogRead(), _Fold()
    for record in wandb_log.records(path, read):
        _apply(fold, record)
    return _run(path, fold, read).model_copy(update={"store": store})


def _apply(fold: _Fold, record: Any) -> None:
    kind = record.WhichOneof("record_type")
    if kind == "run":
        fold.run = record.run
        _update(fold.config, record.run.config.update)
    elif kind == "config":
        _update(fold.config, record.config.update)
        for item in record.config.remove:
            fold.config.pop(_key(item), None)
    elif kind == "history":
        fold.rows += 1
        _numbers(fold.last, record.history.item)
    elif kind == "summary":
        _numbers(fold.last, record.summary.update)
    elif kind == "exit":
        fold.exit = record.exit


def _key(item: Any) -> str:
    return ".".join(item.nested_key) if item.nested_key else str(item.key)


def _update(into: dict[str, Any], items: Any) -> None:
    for item in items:
        if item.value_json:
            into[_key(item)] = json.loads(item.value_json)


def _numbers(into: dict[str, float], items: Any) -> None:
    for item in items:
        key = _key(item)
        if not item.value_json or key.startswith("_"):
            continue  # _step, _runtime, _timestamp, _wandb.*: W&B's own bookkeeping
        value = json.loads(item.value_json)
        if isinstance(value, int | float) and not isinstance(value, bool):
            into[key] = float(value)


def _run(path: Path, fold: _Fold, read: wandb_log.LogRead) -> TrackerRun:
    run, notes = fold.run, _notes(fold, read)
    config, config_cut = flat_config({k: v for k, v in fold.config.items() if k != "_wandb"})
    if config_cut:
        notes.append("config has more keys than were kept")
    tags = list(run.tags) if run is not None else []
    rgt_run_id, matched_by = explicit_id(config, tags)
    started = _time(run.start_time) if run is not None and run.HasField("start_time") else None
    return TrackerRun(
        backend="wandb", id=run.run_id if run is not None else path.stem.removeprefix("run-"),
        name=(run.display_name or None) if run is not None else None,
        project=(run.project or None) if run is not None else None,
        state=_state(fold.exit), started_at=started, ended_at=_ended(started, fold.exit),
        config=config, tags=tags, summary=fold.last, history_length=fold.rows, history_cut=read.cut,
        rgt_run_id=rgt_run_id, matched_by=matched_by, source=str(path), notes=notes)


def _notes(fold: _Fold, read: wandb_log.LogRead) -> list[str]:
    notes = []
    if fold.exit is None:
        notes.append("no exit record: the process is still running, or died before wandb.finish")
    if fold.run is None:
        notes.append("no run record: the log holds no complete record of the run's start")
    if read.cut:
        notes.append(f"log larger than {wandb_log.FULL_READ // 2**20} MiB: only its first "
                     f"{wandb_log.HEAD_READ // 2**20} MiB and last {wandb_log.TAIL_READ // 2**20} MiB were read, "
                     "so history_length counts the rows in those parts")
    if read.torn:
        notes.append("the log ends in a partial or damaged chunk (its writer stopped mid-write)")
    if read.bad:
        notes.append(f"{read.bad} damaged record(s) skipped")
    return notes


def _state(exit_record: Any) -> TrackerState:
    if exit_record is None:
        return "running"
    return "finished" if exit_record.exit_code == 0 else "failed"


def _time(stamp: Any) -> str:
    return datetime.fromtimestamp(stamp.seconds + stamp.nanos / 1e9, UTC).isoformat()


def _ended(started: str | None, exit_record: Any) -> str | None:
    """The exit record holds the run's length in seconds, not a time: the start plus that length."""
    if started is None or exit_record is None or not math.isfinite(exit_record.runtime):
        return None
    return datetime.fromtimestamp(datetime.fromisoformat(started).timestamp() + exit_record.runtime, UTC).isoformat()
