"""Keys from a real ssh-agent, and agent forwarding: an encrypted key the box authorizes works when an
agent holds it (and is named as the problem when none does); the box gets a path to this machine's
agent only when the inventory says `forward_agent = true`, whatever ForwardAgent the ssh config says;
the inventory's Clash fallback settings are checked when it is read."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_server.errors import AuthError, ConfigError
from mcp_server.hosts.fallback_options import DEFAULT_DOH_RESOLVER
from mcp_server.hosts.inventory import Inventory
from mcp_server.hosts.pool import HostPool
from mcp_server.hosts.ssh import SshHost
from tests.conftest import Env, make_ssh_host
from tests.hosts.test_doctor import config_with_identity, run_doctor
from tests.support.sshd import Sshd

PASSPHRASE = "a passphrase only the agent was told"


@pytest.fixture
def locked_key(box: Sshd, tmp_path: Path) -> Path:
    """An encrypted key the box authorizes (beside its usual client key)."""
    key = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-f", str(key)], check=True)
    authorized = box.root / "authorized_keys"
    original = authorized.read_text()
    authorized.write_text(original + (tmp_path / "locked.pub").read_text())
    yield key
    authorized.write_text(original)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real ssh-agent on a private socket, as SSH_AUTH_SOCK."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"], check=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield sock
    finally:
        proc.terminate()
        proc.wait(5)


def add_to_agent(key: Path, agent: Path) -> None:
    """ssh-add reads the passphrase from an askpass program (never from argv)."""
    askpass = key.parent / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\necho '{PASSPHRASE}'\n")
    askpass.chmod(0o700)
    env = {**os.environ, "SSH_AUTH_SOCK": str(agent), "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force",
           "DISPLAY": ":0"}
    subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, stdin=subprocess.DEVNULL, timeout=10)


async def test_an_encrypted_key_held_by_an_agent_authenticates(box: Sshd, env: Env, locked_key: Path,
                                                              agent: Path) -> None:
    add_to_agent(locked_key, agent)
    config_with_identity(box, env, locked_key)
    host = make_ssh_host(env)
    try:
        assert (await host.run("echo in")).text == "in\n"
    finally:
        await host.close()
    report = await run_doctor(env)
    assert report.failure_class == "ok" and report.auth_method == "publickey"


async def test_an_encrypted_key_without_an_agent_is_refused_naming_the_agent(
        box: Sshd, env: Env, locked_key: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    config_with_identity(box, env, locked_key)
    host = make_ssh_host(env)
    try:
        with pytest.raises(AuthError, match="no ssh-agent is reachable"):
            await host.run("echo never")
    finally:
        await host.close()


def forwarding_host(box: Sshd, env: Env, forward: bool) -> SshHost:
    env.ssh_config.write_text(box.client_config("testbox") + "  ForwardAgent yes\n")
    env.write_inventory({"gpu1": {"destination": "testbox", "forward_agent": forward}})
    pool = HostPool(env.settings())
    host = pool._make(pool.spec("gpu1"))
    assert isinstance(host, SshHost)
    return host


async def box_agent_socket(host: SshHost) -> str:
    try:
        return (await host.run('printf "%s" "${SSH_AUTH_SOCK:-none}"')).text
    finally:
        await host.close()


async def test_agent_forwarding_stays_off_when_only_the_ssh_config_asks_for_it(
        box: Sshd, env: Env, agent: Path) -> None:
    assert await box_agent_socket(forwarding_host(box, env, forward=False)) == "none"


async def test_the_inventory_turns_agent_forwarding_on_for_the_box(box: Sshd, env: Env, agent: Path) -> None:
    forwarded = await box_agent_socket(forwarding_host(box, env, forward=True))
    assert forwarded != "none" and forwarded != str(agent), "sshd made a socket of its own on the box"


def inventory_error(env: Env, entry: dict[str, object]) -> str:
    env.write_inventory({"gpu1": {"destination": "gpu@box.example", **entry}})
    with pytest.raises(ConfigError) as refused:
        Inventory.load(env.config)
    return str(refused.value)


def test_the_clash_fallback_is_opt_in_with_a_public_resolver_by_default(env: Env) -> None:
    env.write_inventory({"plain": {"destination": "gpu@box.example"},
                         "clash": {"destination": "gpu@box.example", "transport_fallback": "clash",
                                   "fallback_interface": "en0", "fallback_local_address": "192.168.1.20"}})
    pool = HostPool(env.settings())
    assert pool.spec("plain").fallback is None and pool.spec("plain").forward_agent is False
    options = pool.spec("clash").fallback
    assert options is not None and options.resolver_url == DEFAULT_DOH_RESOLVER
    assert (options.interface, options.local_address) == ("en0", "192.168.1.20")


@pytest.mark.parametrize(("entry", "named"), [
    ({"transport_fallback": "clash", "doh_resolver": "http://1.1.1.1/dns-query"}, "not_https"),
    ({"transport_fallback": "clash", "doh_resolver": "https://user:pw@dns.example/dns-query"}, "userinfo"),
    ({"transport_fallback": "vpn"}, "transport_fallback"),
    ({"fallback_local_address": "eth0.local"}, "fallback_local_address"),
    ({"fallback_interface": "eth0; reboot"}, "fallback_interface"),
])
def test_bad_fallback_settings_are_refused_when_the_inventory_is_read(env: Env, entry: dict[str, object],
                                                                     named: str) -> None:
    text = inventory_error(env, entry)
    assert named in text
    assert "pw@" not in text, "a resolver URL with a password is never quoted back"


def test_the_readme_fallback_example_is_a_valid_inventory(env: Env) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in readme.split("```toml\n")[1:] if b.startswith("[hosts.gpu1]")]
    env.config.write_text(block.split("```")[0])
    entry = Inventory.load(env.config).hosts["gpu1"]
    assert entry.transport_fallback == "clash" and entry.doh_resolver == DEFAULT_DOH_RESOLVER
