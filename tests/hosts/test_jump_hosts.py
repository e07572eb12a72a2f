"""ProxyJump chains over real sshd hops (one loopback sshd reached as three names): a two-hop chain
connects and runs commands on its command channel; every hop's host key is checked, and a hop
whose key changed stops the chain with both fingerprints, naming that hop; agent forwarding stays
off. Through the real MCP client where a tool meets the box."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_server.errors import HostKeyError
from tests.conftest import make_ssh_host, structured, warm_command_channel
from tests.support.sshd import keygen


def hop(box: Any, alias: str, jump: str | None, known_hosts: Path | None = None) -> str:
    """`alias` for the loopback sshd, reached through `jump` when given."""
    config = box.client_config(alias, known_hosts)
    return config if jump is None else config.replace("  HostName 127.0.0.1\n",
                                                      f"  HostName 127.0.0.1\n  ProxyJump {jump}\n")


def two_hops(box: Any, env: Any, middle_known_hosts: Path | None = None) -> None:
    env.ssh_config.write_text(hop(box, "bastion", None) + hop(box, "inner", "bastion", middle_known_hosts)
                              + hop(box, "gpubox", "inner"))


async def test_a_two_hop_chain_connects_and_its_commands_use_the_command_channel(box: Any, env: Any) -> None:
    two_hops(box, env)
    host = make_ssh_host(env, "gpubox")
    try:
        await warm_command_channel(host)
        res = await host.run("echo through two hops")
        assert res.text == "through two hops\n"
        assert len(host._jumps) == 2, "one connection per hop, kept open as the next hop's tunnel"
    finally:
        await host.close()


async def test_a_hop_whose_key_changed_stops_the_chain_naming_that_hop(box: Any, env: Any, tmp_path: Path) -> None:
    keygen(tmp_path / "old_hostkey")
    stale = tmp_path / "inner_known_hosts"
    stale.write_text(box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n")
    two_hops(box, env, middle_known_hosts=stale)
    host = make_ssh_host(env, "gpubox")
    try:
        with pytest.raises(HostKeyError) as refused:
            await host.run("echo never")
        text = str(refused.value)
        assert "HOST KEY CHANGED" in text and "(ProxyJump hop inner)" in text
        assert text.count("SHA256:") == 2, "both fingerprints, once each: the one presented and the one trusted"
        assert stale.read_text() == box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n", "never re-pinned"
    finally:
        await host.close()


async def test_agent_forwarding_is_off_on_every_hop(box: Any, env: Any) -> None:
    two_hops(box, env)
    host = make_ssh_host(env, "gpubox")
    try:
        res = await host.run('printf "%s" "${SSH_AUTH_SOCK:-none}"')
        assert res.text == "none", "the box never gets a path to this machine's agent"
    finally:
        await host.close()


async def test_audit_box_reaches_a_box_behind_two_hops(box: Any, env: Any, client: Any, tmp_path: Path) -> None:
    two_hops(box, env)
    env.write_inventory({"gpu1": {"destination": "gpubox", "durable_root": str(tmp_path)}})
    res = structured(await client.call_tool("audit_box", {"host": "gpu1"}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None and outcome["audit"]["verdict"] in ("PASS", "WARN")
