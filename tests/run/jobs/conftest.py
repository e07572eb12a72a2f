"""A box for the run tests that go through the MCP client: inventory host `gpu1`, on LocalHost
or over the test sshd, with a durable root and a scratch workdir; every run's process group
(and tmux session) is stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (zombies included: killpg still finds them)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Box:
    durable: Path
    work: Path
    destination: str = "local"


@pytest.fixture(params=["local", "ssh"])
def durable_box(request: pytest.FixtureRequest, env, tmp_path: Path) -> Iterator[Box]:
    durable, work = tmp_path / "durable", tmp_path / "scratch"
    durable.mkdir()
    work.mkdir()
    destination = "local"
    if request.param == "ssh":
        request.getfixturevalue("box")
        destination = "testbox"
    env.write_inventory({"gpu1": {"destination": destination, "durable_root": str(durable)}})
    yield Box(durable, work, destination)
    for pid in durable.glob(".rgt/runs/*/pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid.read_text()), signal.SIGKILL)
        subprocess.run(["tmux", "kill-session", "-t", "rgt-" + pid.parent.name.replace(".", "_")],
                       capture_output=True, check=False)
