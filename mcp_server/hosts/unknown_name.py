"""A host name that names nothing: not in the inventory, not given a route by the ssh config,
and not resolvable here. Without this check it fails as a bare DNS error ("Name or service not
known") that does not say where names come from; with it, the error names the inventory file
and the ssh config in use and how to add the box to either.

The check is only ever a better error: a name the ssh config routes (HostName, ProxyJump or
ProxyCommand in a block that applies to it), an address, or any name this machine resolves goes
on to connect exactly as before."""

from __future__ import annotations

import asyncio
import glob
import ipaddress
import re
import socket
from pathlib import Path

from mcp_server.errors import ConfigError, NotFoundError

# Options that decide where a name connects to: when one applies, the name is the config's.
_ROUTING = {"hostname", "proxyjump", "proxycommand"}
_MAX_INCLUDE_DEPTH = 8
_INVENTORY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
EXAMPLE_DESTINATION = "root@203.0.113.7:22"


def _pattern_matches(pattern: str, host: str) -> bool:
    """OpenSSH's Host pattern: `*` and `?` wildcards, case-insensitive; nothing else is special."""
    rx = re.escape(pattern.lower()).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(rx, host.lower()) is not None


def _block_applies(patterns: list[str], host: str) -> bool:
    """A `Host` line applies when a pattern matches and no negated (`!`) pattern does."""
    if any(p.startswith("!") and _pattern_matches(p[1:], host) for p in patterns):
        return False
    return any(not p.startswith("!") and _pattern_matches(p, host) for p in patterns)


_LINE = re.compile(r"\s*(?P<key>[A-Za-z]+)(?:\s*=\s*|\s+)(?P<args>.*)")


def _words(line: str) -> tuple[str, list[str]] | None:
    """A config line as (keyword in lower case, its arguments); None for a blank or comment."""
    if line.lstrip().startswith("#"):
        return None
    m = _LINE.match(line)
    return (m["key"].lower(), m["args"].split()) if m else None


def config_routes(path: Path, host: str, depth: int = 0) -> bool | None:
    """Whether the ssh config at `path` (and the files it includes) routes `host`: True when a Host
    line names it or a block that applies sets HostName, ProxyJump or ProxyCommand; None when it
    cannot tell (a `Match` block, an unreadable file), which callers treat like True."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return False
    except OSError:
        return None
    applies = True  # lines before the first Host apply to every host
    for line in lines:
        words = _words(line)
        if words is None:
            continue
        key, args = words
        if key == "match":
            return None
        if key == "host":
            applies = _block_applies(args, host)
            if applies and host.lower() in (a.lower() for a in args):
                return True  # an alias by its own name: the config's, even with no HostName
        elif key == "include" and applies:
            if depth >= _MAX_INCLUDE_DEPTH:
                return None
            for pattern in args:
                full = Path(pattern).expanduser()
                full = full if full.is_absolute() else path.parent / full
                for found in sorted(glob.glob(str(full))):
                    routed = config_routes(Path(found), host, depth + 1)
                    if routed is not False:
                        return routed
        elif key in _ROUTING and applies:
            return True
    return False


async def resolves(host: str, port: int, timeout_s: float) -> bool:
    """False only when this machine's resolver says the name does not exist (EAI_NONAME); any
    other answer (an address, a timeout, a resolver down) lets the connection try as before."""
    lookup = asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    try:
        await asyncio.wait_for(lookup, timeout_s)
    except socket.gaierror as exc:
        return exc.errno != socket.EAI_NONAME
    except (OSError, TimeoutError):
        return True
    return True


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _ssh_config_label(ssh_config: Path | None) -> str:
    return f"the ssh config {ssh_config} (RGT_SSH_CONFIG)" if ssh_config else \
        "the ssh config (off: RGT_SSH_CONFIG=none)"


def _table(name: str) -> str:
    """The inventory table header for `name` (a dotted name quoted, so it stays one name)."""
    return f'[hosts."{name}"]' if "." in name else f"[hosts.{name}]"


def unknown_host_error(name: str, host: str, inventory: Path, ssh_config: Path | None) -> NotFoundError:
    """The error for a name that is in neither place and does not resolve."""
    example = host if _INVENTORY_NAME.fullmatch(host) else "mybox"
    return NotFoundError(
        f"no box by this name: it is not in the inventory {inventory} (RGT_CONFIG), not a Host alias in "
        f"{_ssh_config_label(ssh_config)}, and this machine cannot resolve it as a host name", host=name,
        next_step=f"add it to the inventory {inventory}:\n  {_table(example)}\n"
                  f"  destination = \"{EXAMPLE_DESTINATION}\"\n"
                  f"or add a \"Host {example}\" block with HostName, User and Port to the ssh config; or pass "
                  "user@address[:port] as host (\"local\" is this machine)")


def unrouted_destination_error(name: str, destination: str, inventory: Path,
                               ssh_config: Path | None) -> ConfigError:
    """The error for an inventory entry whose destination is in neither place and does not resolve."""
    return ConfigError(
        f"the inventory entry's destination names nothing: it is not a Host alias in "
        f"{_ssh_config_label(ssh_config)} and this machine cannot resolve it as a host name",
        host=name, path=str(inventory), observed=destination,
        next_step=f"set destination = \"{EXAMPLE_DESTINATION}\" (the box's user, address and port) in "
                  f"{_table(name)}, or add a \"Host {destination}\" block with its HostName to the ssh config")
