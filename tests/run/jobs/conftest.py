"""A box for the run tests that go through the MCP client: inventory host `gpu1`, on LocalHost
or over the test sshd, with a durable root and a scratch workdir; every run's process group
(and tmux session) is stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_server.app import App
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.settings import Settings


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


@dataclass
class JobBox:
    """The domain-level box (no MCP client): the app, the host's spec and its pooled Host."""

    app: App
    spec: HostSpec
    host: Host
    durable: Path


class CountingHost:
    """The box, counting round trips."""

    def __init__(self, host: Host) -> None:
        self.inner, self.name, self.calls = host, host.name, 0

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return await self.inner.run(*args, **kwargs)


@pytest.fixture
async def job_box(durable_box: Box) -> AsyncIterator[JobBox]:
    """durable_box (local and over the sshd, its runs stopped afterwards) at the domain level."""
    app = App(Settings.from_env())
    spec = app.pool.spec("gpu1")
    yield JobBox(app, spec, await app.pool.host(spec), durable_box.durable)
    await app.close()
