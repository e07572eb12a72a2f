"""One entry point for a tracker source on this machine: a W&B run folder (or the `wandb` folder above
them), an MLflow store (a file store folder, a SQLite database, or its `file:` / `sqlite:` URI), or a
folder of TensorBoard event files. The path goes through the path policy's local side first (never a
credential folder or the server's own state); the backend is recognised from what the path holds
unless named. Online W&B (its public API) is not a source here."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from mcp_server.deliver.trackers import mlflow_store, tensorboard_logs, wandb_offline
from mcp_server.deliver.trackers.models import MAX_RUNS, Backend, TrackerRuns
from mcp_server.errors import ConfigError, InputError, NotFoundError
from mcp_server.paths.local import LocalScope, check_local

_NEEDS: dict[Backend, tuple[str, str]] = {
    "wandb": ("wandb", "trackers"), "mlflow": ("mlflow", "trackers"), "tensorboard": ("tensorboard", "tensorboard"),
}
_READERS: dict[Backend, Callable[[Path, int], TrackerRuns]] = {
    "wandb": wandb_offline.read_wandb, "mlflow": mlflow_store.read_mlflow,
    "tensorboard": tensorboard_logs.read_tensorboard,
}
_LAYOUTS = ("a W&B run folder or the wandb folder above run folders (run-*.wandb inside), an MLflow store "
            "(the mlruns folder, a SQLite database, or a file:/sqlite: tracking URI), or a folder holding "
            "TensorBoard events.out.tfevents.* files")


def read_source(source: str, backend: Backend | None = None, *, max_runs: int = MAX_RUNS) -> TrackerRuns:
    """The runs in one tracker source (newest first, at most `max_runs`), read with its own library."""
    path = check_local(_as_path(source), "read", LocalScope(next_step="point source at the tracker's own folder"),
                       what="path", done="nothing was read")  # the capsule tool's argument
    if not path.exists():
        raise NotFoundError("source does not exist on this machine",
                            next_step=f"give the path of {_LAYOUTS}")
    chosen = backend or detect(path)
    if chosen is None:
        raise InputError("source holds no tracker runs this server can read", expected=_LAYOUTS,
                         next_step="name the folder the tracker wrote into, or pass backend")
    module, extra = _NEEDS[chosen]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"reading {chosen} runs needs the {module} package, which this server's environment lacks",
                          next_step=f"pip install 'remote-gpu-trainer-mcp[{extra}]' where the server runs, then "
                                    "restart it")
    return _READERS[chosen](path, max_runs)


def detect(path: Path) -> Backend | None:
    """The tracker whose files `path` holds: a SQLite file or mlruns folder is MLflow, a run-*.wandb
    log W&B, an event file TensorBoard (checked in that order: cheapest first)."""
    if mlflow_store.is_sqlite(path) or mlflow_store.is_file_store(path):
        return "mlflow"
    if wandb_offline.is_source(path):
        return "wandb"
    if tensorboard_logs.is_source(path) or path.name.startswith(tensorboard_logs.PREFIX):
        return "tensorboard"
    return None


def _as_path(source: str) -> str:
    """A `file:` or `sqlite:` tracking URI's path; anything else as given."""
    if source.startswith("sqlite:///"):
        return unquote(source.removeprefix("sqlite:///"))  # sqlite:////abs/path or sqlite:///relative/path
    if source.startswith(("file:", "sqlite:")):
        parsed = urlparse(source)
        if parsed.netloc not in ("", "localhost"):
            raise InputError("source is a tracking URI on another machine; only local stores are read",
                             next_step="copy the store here (verify_artifacts) and give its path")
        return unquote(parsed.path)
    return source
