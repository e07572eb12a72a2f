"""What a destination means after ~/.ssh/config: the address, user, ProxyJump hops and
known_hosts files we actually use. asyncssh parses the file (in hosts/ssh.py); the rules
we apply to its options live here."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp_server.hosts.destination import Destination

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
DEFAULT_GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"

# One option of the parsed config by its name (None when unset): `SSHClientConfig.get`.
OptionLookup = Callable[[str], object]


@dataclass(frozen=True)
class ResolvedDestination:
    """A destination after ~/.ssh/config: what we actually connect to."""

    alias: str
    explicit_user: str | None
    explicit_port: int | None
    host: str
    port: int
    user: str
    jump: str | None
    known_hosts_files: tuple[Path, ...]

    def jump_hops(self) -> list[Destination]:
        """The ProxyJump hops in order, each a destination of its own."""
        return [Destination.parse(h.strip()) for h in (self.jump or "").split(",") if h.strip()]


def _text(option: OptionLookup, name: str) -> str | None:
    value = option(name)
    return None if value is None or value == "" else str(value)


def _paths(option: OptionLookup, name: str) -> list[str]:
    value = option(name)
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def resolve_options(dest: Destination, option: OptionLookup) -> ResolvedDestination:
    """Apply our rules to the config's options for `dest`."""
    jump = _text(option, "ProxyJump")
    # "UserKnownHostsFile none" would turn host-key checking off in asyncssh: we never allow
    # that, so an empty list falls back to the default file like an absent one.
    user_files = [Path(f).expanduser() for f in _paths(option, "UserKnownHostsFile") or [DEFAULT_KNOWN_HOSTS]]
    global_files = [Path(f) for f in _paths(option, "GlobalKnownHostsFile") or [DEFAULT_GLOBAL_KNOWN_HOSTS]]
    return ResolvedDestination(
        alias=dest.host,
        explicit_user=dest.user,
        explicit_port=dest.port,
        host=_text(option, "Hostname") or dest.host,
        port=int(_text(option, "Port") or 22),
        user=_text(option, "User") or getpass.getuser(),
        jump=jump if jump and jump.lower() != "none" else None,
        known_hosts_files=tuple(user_files + global_files),
    )
