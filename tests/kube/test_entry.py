"""The container entry (scripts/kube_entry.sh), run here with bash as the container would run it:
the command's exit code is the container's and lands in the run dir on the durable volume; an
Indexed Job's index picks its command and run dir; a TERM (deletion, preemption) reaches the
command and the end is still recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from mcp_server import scripts


def start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["bash", "-c", scripts.load("kube_entry")], env={"PATH": os.environ["PATH"], **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_the_exit_code_is_the_containers_and_is_recorded_on_the_volume(tmp_path: Path) -> None:
    d = tmp_path / "pvc/.rgt/runs/r1"
    p = start({"RGT_RUN_DIRS": str(d), "RGT_COMMAND_0": "echo training; exit 3", "RGT_WORKDIR": str(tmp_path)})
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 3 and b"training" in out
    assert (d / "exit_code").read_text() == "3\n" and (d / "ended_at").read_text().strip().isdigit()
    assert not list(d.glob("*.tmp")), "written by rename: never half a file"


def test_an_indexed_job_runs_its_own_command_into_its_own_run_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / f"runs/c{i}" for i in range(3)]
    env = {"RGT_RUN_DIRS": "\n".join(map(str, dirs)), "RGT_WORKDIR": "", "JOB_COMPLETION_INDEX": "1",
           **{f"RGT_COMMAND_{i}": f"echo cell {i}" for i in range(3)}}
    p = start(env)
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 0 and b"cell 1" in out and b"cell 0" not in out
    assert (dirs[1] / "exit_code").read_text() == "0\n" and not dirs[0].exists()


def test_a_term_reaches_the_command_and_the_end_is_recorded(tmp_path: Path) -> None:
    d = tmp_path / "run"
    marker = tmp_path / "got-term"
    p = start({"RGT_RUN_DIRS": str(d), "RGT_WORKDIR": "",
               "RGT_COMMAND_0": f"trap 'touch {marker}; exit 143' TERM; while :; do sleep 0.1; done"})
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=20)
    assert marker.exists(), "the training command got the TERM (to checkpoint)"
    assert (d / "exit_code").read_text() == "143\n"
