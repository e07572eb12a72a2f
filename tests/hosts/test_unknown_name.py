"""A host name that names nothing (not in the inventory, not routed by the ssh config, not
resolvable) gets an error that says where names come from and how to add one; everything that
connected before (an address, a resolvable name, an ssh alias) still does, with its old errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mcp_server.hosts.unknown_name import config_routes
from tests.conftest import error_text

UNRESOLVABLE = "rgt-no-such-box.invalid"  # .invalid never resolves (RFC 6761)


def code_of(result: Any) -> str:
    m = re.match(r"^Error executing tool \w+: \[(?P<code>[A-Z_]+)\] ", error_text(result))
    assert m, error_text(result)
    return m["code"]


@pytest.mark.parametrize(("config", "host", "routed"), [
    ("Host gpubox\n  User root\n", "gpubox", True),  # an alias by its own name, even without HostName
    ("Host *\n  ServerAliveInterval 30\n", "gpubox", False),  # a catch-all that does not route
    ("Host *\n  ProxyJump bastion\n", "gpubox", True),  # resolved on the far side of the jump
    ("Host gpu-*\n  HostName %h.lab.example\n", "gpu-7", True),
    ("Host gpu-*\n  HostName %h.lab.example\n", "cpu-7", False),
    ("Host * !gpubox\n  HostName relay\n", "gpubox", False),  # negated
    ("HostName relay\n", "gpubox", True),  # before any Host line: every host
    ("host=GPUBOX\n  user=root\n", "gpubox", True),  # keywords and names are case-insensitive; `=` works
    ("Match host gpubox\n  HostName 10.0.0.5\n", "gpubox", None),  # cannot tell: callers leave it alone
    ("# Host gpubox\n", "gpubox", False),
])
def test_what_the_ssh_config_routes(tmp_path: Path, config: str, host: str, routed: bool | None) -> None:
    path = tmp_path / "config"
    path.write_text(config)
    assert config_routes(path, host) is routed


def test_an_included_file_counts_and_a_missing_config_routes_nothing(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "lab").write_text("Host labbox\n  HostName 10.1.2.3\n")
    (tmp_path / "config").write_text("Include conf.d/*\nHost other\n  HostName 10.0.0.1\n")
    assert config_routes(tmp_path / "config", "labbox") is True
    assert config_routes(tmp_path / "config", "elsewhere") is False
    assert config_routes(tmp_path / "absent", "labbox") is False


@pytest.mark.parametrize("name", ["nosuchhost", f"me@{UNRESOLVABLE}:2222"])
async def test_a_name_in_neither_place_says_where_names_come_from_and_how_to_add_it(
        client: Any, env: Any, name: str) -> None:
    result = await client.call_tool("audit_box", {"host": name})
    text = error_text(result)
    assert code_of(result) == "NOT_FOUND", text
    assert f"not in the inventory {env.config} (RGT_CONFIG)" in text
    assert f"not a Host alias in the ssh config {env.ssh_config} (RGT_SSH_CONFIG)" in text
    assert 'destination = "root@203.0.113.7:22"' in text and "[hosts." in text and "Host " in text
    assert "Name or service not known" not in text


async def test_the_error_says_when_the_ssh_config_is_off(client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_SSH_CONFIG", "none")
    text = error_text(await client.call_tool("audit_box", {"host": "nosuchhost"}))
    assert "off: RGT_SSH_CONFIG=none" in text


async def test_an_inventory_entry_whose_destination_names_nothing_is_a_config_error(client, env: Any) -> None:
    env.write_inventory({"gpu1": {"destination": f"root@{UNRESOLVABLE}"}})
    result = await client.call_tool("audit_box", {"host": "gpu1"})
    assert code_of(result) == "BAD_CONFIG"
    assert str(env.config) in error_text(result) and "[hosts.gpu1]" in error_text(result)


@pytest.mark.parametrize("name", ["nobody@localhost:1", "nobody@127.0.0.1:1", "refusing"])
async def test_addresses_resolvable_names_and_aliases_connect_as_before(client, env: Any, name: str) -> None:
    env.ssh_config.write_text("Host refusing\n  HostName 127.0.0.1\n  Port 1\n")
    result = await client.call_tool("audit_box", {"host": name})
    assert code_of(result) == "HOST_UNREACHABLE", "the connection was tried: refused on port 1"
