"""audit_box on a box it cannot reach, through the real MCP client: the error carries the
connection doctor's steps and the failure's route (a closed port, a port that answers without an
SSH banner, a changed host key, a key the box does not know), and nothing is pinned or changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_text, structured
from tests.support import listeners
from tests.support.sshd import keygen


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    async with listeners.silent_port() as port:
        yield port


async def test_a_closed_port_is_diagnosed_with_the_rental_port_route(env: Any, client: Any) -> None:
    env.write_inventory({"gone": {"destination": "root@127.0.0.1:1"}})
    text = error_text(await client.call_tool("audit_box", {"host": "gone"}))
    assert "[HOST_UNREACHABLE]" in text
    assert "connection doctor" in text and "connection_refused" in text
    assert "tcp: fail" in text and "says nothing about jobs on the box" in text
    assert "next:" in text and "port" in text.split("next:")[1]


async def test_a_port_without_an_ssh_banner_is_its_own_class(env: Any, client: Any, silent_port: int) -> None:
    env.write_inventory({"clashed": {"destination": f"root@127.0.0.1:{silent_port}"}})
    text = error_text(await client.call_tool("audit_box", {"host": "clashed"}))
    assert "banner_timeout" in text and "tcp: ok" in text and "banner: fail" in text


async def test_a_changed_host_key_is_named_with_both_fingerprints_and_never_re_accepted(
        env: Any, box: Any, client: Any, tmp_path: Path) -> None:
    keygen(tmp_path / "old_hostkey")
    known = tmp_path / "known_hosts"
    known.write_text(box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n")
    env.ssh_config.write_text(box.client_config("testbox", known_hosts=known))
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path)}})
    text = error_text(await client.call_tool("audit_box", {"host": "gpu1"}))
    assert "[HOST_KEY_REFUSED]" in text and "host_key_mismatch" in text
    assert "accept-new" not in text.split("connection doctor")[1]
    assert known.read_text() == box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n", "nothing pinned"


async def test_in_a_fan_out_the_unreachable_box_carries_its_diagnosis(
        env: Any, box: Any, client: Any, tmp_path: Path) -> None:
    env.write_inventory({"a": {"destination": "testbox", "durable_root": str(tmp_path)},
                         "gone": {"destination": "root@127.0.0.1:1"}})
    res = structured(await client.call_tool("audit_box", {"hosts": ["a", "gone"]}))
    outcomes = {o["host"]: o for o in res["outcomes"]}
    assert outcomes["a"]["audit"] is not None
    assert "connection_refused" in outcomes["gone"]["error"]["message"]


async def test_detail_all_on_a_reachable_box_adds_the_connection_doctor(env: Any, box: Any, client: Any) -> None:
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    (outcome,) = structured(await client.call_tool("audit_box", {"host": "gpu1", "detail": "all"}))["outcomes"]
    connection = outcome["audit"]["connection"]
    assert connection["failure_class"] == "ok" and connection["auth_method"] == "publickey"
    steps = {s["name"]: s for s in connection["steps"]}
    assert steps["session"]["status"] == "ok" and "MB/s down" in steps["session"]["verdict"]
    (problems,) = structured(await client.call_tool("audit_box", {"host": "gpu1"}))["outcomes"]
    assert problems["audit"].get("connection") is None, "the default detail stays as short as before"
