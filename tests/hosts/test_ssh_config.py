"""What an ssh destination resolves to through ~/.ssh/config, and the known_hosts policy
helpers. Pure rules, plus the real config parser for the security-relevant cases."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mcp_server.errors import InputError
from mcp_server.hosts.destination import Destination
from mcp_server.hosts.known_hosts import known_hosts_label, pin_key
from mcp_server.hosts.ssh_config import DEFAULT_GLOBAL_KNOWN_HOSTS, resolve_options
from mcp_server.hosts.ssh_connect import resolve as _resolve


def resolved_with(config: Path, dest: str):
    return _resolve(Destination.parse(dest), config)


def test_an_alias_takes_address_port_user_and_jump_from_the_config(tmp_path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text("Host gpu\n  HostName 10.0.0.5\n  Port 2222\n  User ubuntu\n  ProxyJump bastion,me@hop2:22\n")
    r = resolved_with(cfg, "gpu")
    assert (r.alias, r.host, r.port, r.user) == ("gpu", "10.0.0.5", 2222, "ubuntu")
    assert r.jump_hops() == [Destination("bastion"), Destination("hop2", "me", 22)]


def test_known_hosts_file_none_never_turns_host_key_checking_off(tmp_path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text("Host gpu\n  HostName 10.0.0.5\n  UserKnownHostsFile none\n  ProxyJump none\n")
    r = resolved_with(cfg, "gpu")
    assert r.known_hosts_files == (Path("~/.ssh/known_hosts").expanduser(), Path(DEFAULT_GLOBAL_KNOWN_HOSTS))
    assert r.jump is None and r.jump_hops() == []


def test_what_the_user_wrote_wins_over_the_config(tmp_path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text("Host gpu\n  Port 2222\n  User ubuntu\n")
    r = resolved_with(cfg, "root@gpu:2200")
    assert (r.explicit_user, r.explicit_port, r.user, r.port) == ("root", 2200, "root", 2200)


def test_options_are_read_by_name_with_defaults_for_the_missing() -> None:
    options = {"UserKnownHostsFile": ["/k1", "~/k2"], "Port": 2022}
    r = resolve_options(Destination.parse("box"), options.get)
    assert (r.host, r.port, r.jump) == ("box", 2022, None)
    assert r.known_hosts_files == (Path("/k1"), Path("~/k2").expanduser(), Path(DEFAULT_GLOBAL_KNOWN_HOSTS))


@pytest.mark.parametrize("bad", ["-oProxyCommand=x", "a b", "user@host:99999", ""])
def test_destinations_that_are_options_or_malformed_are_refused(bad) -> None:
    with pytest.raises(InputError):
        Destination.parse(bad)


@pytest.mark.parametrize(("host", "port", "label"), [("box", 22, "box"), ("127.0.0.1", 2222, "[127.0.0.1]:2222")])
def test_known_hosts_labels_follow_openssh(host, port, label) -> None:
    assert known_hosts_label(host, port) == label


def test_a_pinned_key_is_appended_to_a_private_file(tmp_path) -> None:
    path = tmp_path / "state" / "known_hosts"
    pin_key(path, "[127.0.0.1]:2222", "ssh-ed25519 AAAA1\n")
    pin_key(path, "box", "ssh-ed25519 AAAA2")
    assert path.read_text() == "[127.0.0.1]:2222 ssh-ed25519 AAAA1\nbox ssh-ed25519 AAAA2\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
