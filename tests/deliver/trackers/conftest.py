"""Real tracker files, made once for the package by the real libraries: tiny_train.py logs to W&B
offline, an MLflow file store, an MLflow SQLite store and TensorBoard, in four launches run side by side:

  alpha   run id ALPHA: every tracker, finishes
  retry   run id ALPHA again (a retried launch): W&B and the MLflow file store, 300 steps, finishes
  killed  run id BETA: W&B, the MLflow file store and TensorBoard, SIGKILLed once its logs are on disk
  stray   run id ELSEWHERE (no job of ours): W&B, and TensorBoard in a folder named by no run id
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.wait import until_sync

ALPHA = "tiny-20261206-120000-a1a1a1"
BETA = "tiny-20261206-120500-b2b2b2"
ELSEWHERE = "other-20261206-090000-c3c3c3"
SCRIPT = Path(__file__).with_name("tiny_train.py")
pytest.importorskip("wandb")
pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")


@dataclass
class Tracked:
    root: Path
    wandb: Path
    mlruns: Path
    sqlite: Path
    tb: Path
    final: dict[str, dict[str, float]]  # launch name -> the script's last metrics

    def wandb_log(self, rgt_run_id: str, seed: int) -> Path:
        """The W&B log of the launch with that run id and seed (the config says which)."""
        from mcp_server.deliver.trackers.wandb_offline import find_logs, read_log

        return next(p for p in find_logs(self.wandb) if (r := read_log(p)).rgt_run_id == rgt_run_id
                    and r.config.get("seed") == seed)


def _env(root: Path, run_id: str | None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root / "home"), "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", "WANDB_DIR": str(root), "WANDB_CONFIG_DIR": str(root / "home" / "wandb-config"),
           "WANDB_CACHE_DIR": str(root / "home" / "wandb-cache"), "WANDB_DATA_DIR": str(root / "home" / "wandb-data"),
           "WANDB_DISABLE_GIT": "true", "WANDB_DISABLE_CODE": "true", "MLFLOW_ALLOW_FILE_STORE": "true",
           "PYTHONUNBUFFERED": "1"}
    return env | ({"RGT_RUN_ID": run_id} if run_id else {})


def _start(root: Path, run_id: str | None, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(SCRIPT), *args], cwd=root, env=_env(root, run_id),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finished(proc: subprocess.Popen[str]) -> dict[str, float]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _kill_when_logged(proc: subprocess.Popen[str], wandb_dir: Path) -> dict[str, float]:
    """SIGKILL the launch's process group once it said READY and wandb-core has put a whole block of
    its log on disk (it writes the log in 32 KiB blocks)."""
    assert proc.stdout is not None
    final = json.loads(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "READY"
    logs = lambda: [p for p in wandb_dir.glob("wandb/*run-*/run-*.wandb")  # noqa: E731
                    if (p.stat().st_size >= 32 * 1024 and _is_beta(p))]
    until_sync(logs, timeout=60, interval=0.1, what="the killed launch's W&B log on disk")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    return final


def _is_beta(path: Path) -> bool:
    from mcp_server.deliver.trackers.wandb_offline import read_log

    return read_log(path).rgt_run_id == BETA


def _file_store(uri: str) -> None:
    """The file store and its experiment, made before the launches share it (mlflow's file store
    creates both without a lock)."""
    saved = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=uri).create_experiment("tiny")
    finally:
        if saved is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE")
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = saved


@pytest.fixture(scope="package")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> Tracked:
    root = tmp_path_factory.mktemp("trackers")
    t = Tracked(root, root, root / "mlruns", root / "mlflow.db", root / "tb", {})
    file_uri, sqlite_uri = t.mlruns.as_uri(), f"sqlite:///{t.sqlite}"
    _file_store(file_uri)
    procs = {
        "alpha": _start(root, ALPHA, "--wandb", "--mlflow", file_uri, "--mlflow", sqlite_uri, "--tb", str(t.tb),
                        "--seed", "1"),
        "retry": _start(root, ALPHA, "--wandb", "--mlflow", file_uri, "--seed", "2", "--batch", "16",
                        "--steps", "300"),
        "killed": _start(root, BETA, "--wandb", "--mlflow", file_uri, "--tb", str(t.tb), "--lr", "0.2",
                         "--steps", "400", "--hang"),
        "stray": _start(root, ELSEWHERE, "--wandb", "--tb", str(t.tb), "--tb-name", "untitled", "--seed", "3"),
    }
    try:
        t.final["killed"] = _kill_when_logged(procs["killed"], root)
        t.final.update({name: _finished(p) for name, p in procs.items() if name != "killed"})
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
    return t
