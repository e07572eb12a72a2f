"""Shared fixtures: every test gets its own RGT_HOME; SSH tests talk to a real OpenSSH sshd
on 127.0.0.1 started once per session; tools are exercised through a real MCP client."""

from __future__ import annotations

import json
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_server.hosts.destination import Destination
from mcp_server.hosts.known_hosts import HostKeyPolicy
from mcp_server.hosts.local import LocalHost
from mcp_server.hosts.ssh import SshHost
from mcp_server.server import build_server
from mcp_server.settings import Settings
from tests.support import fakegpu
from tests.support.sshd import Sshd
from tests.support.wait import until


@dataclass
class Env:
    root: Path
    home: Path
    config: Path
    ssh_config: Path

    def settings(self) -> Settings:
        return Settings.from_env()

    def write_inventory(self, hosts: dict[str, dict[str, Any]]) -> None:
        lines = []
        for name, entry in hosts.items():
            lines.append(f"[hosts.{json.dumps(name)}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
        text = "\n".join(lines) + "\n"
        tomllib.loads(text)
        self.config.write_text(text)


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    e = Env(tmp_path, tmp_path / "rgt-home", tmp_path / "hosts.toml", tmp_path / "ssh_config")
    e.ssh_config.write_text("")
    monkeypatch.setenv("RGT_HOME", str(e.home))
    monkeypatch.setenv("RGT_CONFIG", str(e.config))
    monkeypatch.setenv("RGT_SSH_CONFIG", str(e.ssh_config))
    monkeypatch.setenv("RGT_CONNECT_TIMEOUT", "5")
    monkeypatch.setenv("RGT_HTTP_TIMEOUT", "5")
    # Slurm tests follow jobs through their states: ask the test cluster every time (its own
    # test sets the production interval).
    monkeypatch.setenv("RGT_SLURM_POLL", "0")
    # Tests pull into their own tmp folders; the refusal of any other dest has its own tests.
    monkeypatch.setenv("RGT_PULL_ROOTS", str(tmp_path))
    return e


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def box(sshd: Sshd, env: Env) -> Sshd:
    """The sshd reachable as alias `testbox` through this test's ssh config."""
    if sshd.proc is None or sshd.proc.poll() is not None:
        sshd.start()
    env.ssh_config.write_text(sshd.client_config("testbox"))
    return sshd


@pytest.fixture
def gpu(box: Sshd) -> Iterator[Callable[[str], fakegpu.Scenario]]:
    """Install a fake nvidia-smi scenario on the test box's PATH."""

    def use(name: str) -> fakegpu.Scenario:
        fakegpu.uninstall(box.fakebin)
        s = fakegpu.scenario(name)
        fakegpu.install(box.fakebin, s)
        return s

    yield use
    fakegpu.uninstall(box.fakebin)


def make_ssh_host(env: Env, name: str = "testbox", policy: HostKeyPolicy = "strict",
                  command_channel: bool = True) -> SshHost:
    s = Settings.from_env()
    return SshHost(name, Destination.parse(name), known_hosts_path=s.known_hosts_path,
                   ssh_config=s.ssh_config, host_key_policy=policy,
                   connect_timeout_s=s.connect_timeout_s, command_timeout_s=s.command_timeout_s,
                   command_channel=command_channel)


async def warm_command_channel(host: SshHost) -> None:
    """Run commands until the host's persistent command channel is up (the first call on a
    connection takes the exec path and starts the channel in the background)."""
    async def up() -> bool:
        await host.run("true")
        return host.command_channel is not None and host.command_channel.up
    await until(up, what="the command channel to start")


@pytest.fixture(params=["local", "ssh", "ssh-exec"])
async def any_host(request: pytest.FixtureRequest, env: Env) -> AsyncIterator[LocalHost | SshHost]:
    """The host contract runs on both kinds, and over SSH on both paths: the persistent command
    channel (warm calls) and one exec channel per command (first calls, boxes without python3)."""
    if request.param == "local":
        host: LocalHost | SshHost = LocalHost()
    else:
        request.getfixturevalue("box")
        host = make_ssh_host(env, command_channel=request.param == "ssh")
        if request.param == "ssh":
            await warm_command_channel(host)
    yield host
    await host.close()


class Caller:
    """A real MCP client per call (a fresh server instance each time, like a client that
    reconnects). Use `session()` for several calls on one connection."""

    def session(self) -> Client:
        return Client(build_server(Settings.from_env()), read_timeout_seconds=120)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
        async with self.session() as c:
            return await c.call_tool(name, arguments or {}, **kw)


@pytest.fixture
def client() -> Caller:
    return Caller()


def hints(annotations: Any) -> tuple[bool, bool, bool, bool]:
    """A tool's (readOnly, destructive, idempotent, openWorld) hints as a client reads them: a hint
    the server leaves out is the spec's default (false, true, false, true), and a read-only tool
    destroys nothing (the spec gives destructiveHint meaning only when readOnlyHint is false)."""
    def given(value: bool | None, default: bool) -> bool:
        return default if value is None else value

    a = annotations
    read_only = given(a.read_only_hint, False)
    return (read_only, given(a.destructive_hint, not read_only), given(a.idempotent_hint, False),
            given(a.open_world_hint, True))


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, [getattr(c, "text", c) for c in result.content]
    payload: dict[str, Any] | None = result.structured_content
    assert payload is not None
    return payload


def error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return "\n".join(getattr(c, "text", "") for c in result.content)
