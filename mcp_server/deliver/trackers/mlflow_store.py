"""MLflow runs from a tracking store on this machine, a file store (`mlruns/`) or a SQLite database,
read through mlflow's own `MlflowClient`. The user's store is never opened for writing: mlflow creates
or upgrades the tables of a SQLite database it opens, so the database is read from a copy (sqlite's
backup API, the original opened read-only); a file store is read in place once it looks complete (mlflow
creates `.trash` and a default experiment in a folder that lacks them), else from a copy without its
artifacts. mlflow 3 refuses file stores unless MLFLOW_ALLOW_FILE_STORE is set: set while reading."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp_server.deliver.trackers.linking import explicit_id, flat_config
from mcp_server.deliver.trackers.models import MAX_RUNS, TrackerRun, TrackerRuns, TrackerState
from mcp_server.errors import InputError

MAX_DB_BYTES = 1024**3
MAX_HISTORY_KEYS = 10  # metric series counted per run for history_length
MAX_HISTORY_CALLS = 2000  # get_metric_history calls per source
_STATES: dict[str, TrackerState] = {"RUNNING": "running", "FINISHED": "finished", "FAILED": "failed",
                                    "KILLED": "killed"}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC


def is_file_store(path: Path) -> bool:
    return path.is_dir() and any(path.glob("*/meta.yaml"))


def read_mlflow(store: Path, max_runs: int = MAX_RUNS) -> TrackerRuns:
    """The newest `max_runs` runs of the store's active experiments."""
    with tempfile.TemporaryDirectory(prefix="rgt-mlflow-") as tmp:
        uri = _sqlite_copy(store, Path(tmp)) if is_sqlite(store) else _file_store_uri(store, Path(tmp))
        with _mlflow_reading():
            from mlflow.exceptions import MlflowException
            from mlflow.tracking import MlflowClient

            try:
                client = MlflowClient(tracking_uri=uri)
                found = _search(client, max_runs + 1)
                budget = [MAX_HISTORY_CALLS]
                runs = [_run(client, exp, run, store, budget) for exp, run in found[:max_runs]]
            except MlflowException as exc:
                raise InputError("source is not an MLflow tracking store mlflow can read",
                                 observed=exc.error_code, next_step="point source at the store's root folder "
                                 "(the one holding mlruns' experiment folders) or its SQLite database") from exc
    notes = [f"history counted for at most {MAX_HISTORY_CALLS} metric series"] if budget[0] <= 0 else []
    return TrackerRuns(backend="mlflow", source=str(store), runs=runs, found=len(found), cut=len(found) > max_runs,
                       notes=notes)


@contextlib.contextmanager
def _mlflow_reading() -> Iterator[None]:
    """mlflow's import and store set-up, quiet and allowed: sqlalchemy 2.1 deprecates the `noload`
    strategy mlflow's SQL store maps at import (a warning, not our bug); mlflow 3 refuses a file store
    without MLFLOW_ALLOW_FILE_STORE; NullPool closes the copy's connections after each query."""
    wanted = {"MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_SQLALCHEMYSTORE_POOLCLASS": "NullPool"}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The ``noload`` loader strategy is deprecated",
                                    category=DeprecationWarning)
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _sqlite_copy(db: Path, tmp: Path) -> str:
    if db.stat().st_size > MAX_DB_BYTES:
        raise InputError(f"the MLflow database is larger than {MAX_DB_BYTES // 2**30} GiB, the most read from a "
                         "copy", next_step="read a smaller store, or export the runs to one")
    copy = tmp / "mlflow.db"
    try:
        with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as src, \
                contextlib.closing(sqlite3.connect(copy)) as dst:
            src.backup(dst)
            tables = {row[0] for row in dst.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise InputError("source is a SQLite file sqlite could not read", observed=str(exc),
                         next_step="check the file is a complete MLflow database (not one being copied)") from exc
    if not {"experiments", "runs", "alembic_version"} <= tables:
        raise InputError("source is a SQLite database but not an MLflow tracking store (no experiments, runs "
                         "and alembic_version tables)",
                         next_step="point source at the database MLflow's tracking URI names (sqlite:///...)")
    return f"sqlite:///{copy}"


def _file_store_uri(root: Path, tmp: Path) -> str:
    if (root / ".trash").is_dir():
        return root.as_uri()
    copy = tmp / "mlruns"
    shutil.copytree(root, copy, ignore=_artifact_contents, symlinks=True)
    return copy.as_uri()


def _artifact_contents(folder: str, names: list[str]) -> set[str]:
    """A run's artifacts left out of a copy, their folder kept (mlflow checks a run folder's shape)."""
    return set(names) if Path(folder).name == "artifacts" else set()


def _search(client: Any, limit: int) -> list[tuple[Any, Any]]:
    """(experiment, run) pairs, newest runs first within each experiment, at most `limit`."""
    out: list[tuple[Any, Any]] = []
    for exp in client.search_experiments():
        if len(out) >= limit:
            break
        for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"],
                                      max_results=limit - len(out)):
            out.append((exp, run))
    return out


def _run(client: Any, exp: Any, run: Any, store: Path, budget: list[int]) -> TrackerRun:
    info, data = run.info, run.data
    config, config_cut = flat_config(dict(data.params))
    tags = sorted(f"{k}={v}" for k, v in data.tags.items() if not k.startswith("mlflow."))
    rgt_run_id, matched_by = explicit_id(config, tags)
    length, cut = _history(client, info.run_id, sorted(data.metrics), budget)
    notes = ["params have more keys than were kept"] if config_cut else []
    return TrackerRun(
        backend="mlflow", id=info.run_id, name=info.run_name or None, project=exp.name,
        state=_STATES.get(info.status, "unknown"), started_at=_ms(info.start_time), ended_at=_ms(info.end_time),
        config=config, tags=tags, summary={k: float(v) for k, v in data.metrics.items()}, history_length=length,
        history_cut=cut, rgt_run_id=rgt_run_id, matched_by=matched_by,
        source=str(store / exp.experiment_id / info.run_id) if store.is_dir() else str(store), store=str(store),
        notes=notes)


def _history(client: Any, run_id: str, keys: list[str], budget: list[int]) -> tuple[int, bool]:
    """The longest of the run's first MAX_HISTORY_KEYS metric series, within the source's call budget."""
    counted = keys[:MAX_HISTORY_KEYS][: max(budget[0], 0)]
    budget[0] -= len(counted)
    longest = max((len(client.get_metric_history(run_id, k)) for k in counted), default=0)
    return longest, len(counted) < len(keys)


def _ms(value: int | None) -> str | None:
    return datetime.fromtimestamp(value / 1000, UTC).isoformat() if value else None
