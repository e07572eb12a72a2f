"""Opening the SSH connection to a box (asyncssh): the user's ~/.ssh/config (Host blocks, ProxyJump
chains, each hop's key checked), strict host keys (a changed key is refused with both fingerprints,
`accept-new` pins a first-seen key in the server's own file), agent forwarding only where the
inventory turns it on, and, for a host that opted in, the Clash/Mihomo fallback ladder
(transport.py) after a direct failure with path evidence. With ssh.py the only modules that import
asyncssh; `mapped_errors` is the one place its errors and socket errors become ours."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_server.quiet_imports import quiet_known_warnings

with quiet_known_warnings():
    import asyncssh
    from asyncssh.config import SSHClientConfig

from mcp_server.errors import AuthError, ConfigError, HostKeyError, RgtError, TransportError
from mcp_server.hosts.destination import Destination
from mcp_server.hosts.fallback import FallbackPlan
from mcp_server.hosts.fallback_options import FallbackOptions, TransportRecord
from mcp_server.hosts.known_hosts import (
    HostKeyPolicy,
    changed_key_error,
    known_hosts_label,
    known_hosts_text,
    pin_key,
    unknown_key_error,
)
from mcp_server.hosts.ssh_config import ResolvedDestination, resolve_options
from mcp_server.hosts.transport import DIRECT, FreshSocket, connect_with_fallback

log = logging.getLogger(__name__)

Connection = asyncssh.SSHClientConnection
_CONNECT_RETRIES = (0.2, 0.6, 1.5)
# AES-GCM first: with AES-NI it moves bulk data about 1.7x faster than chacha20 in asyncssh.
_CIPHERS = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
            "aes128-ctr", "aes256-ctr"]
_MAX_HOPS = 4


def resolve(dest: Destination, ssh_config: Path | None) -> ResolvedDestination:
    """`dest` after the ssh config file (parsed by asyncssh, interpreted by ssh_config.py)."""
    paths = [str(ssh_config)] if ssh_config and ssh_config.is_file() else []
    try:
        cfg = SSHClientConfig.load(
            None, paths, False, False, False, getpass.getuser(),
            dest.user if dest.user else (), dest.host, dest.port if dest.port else (),
        )
    except (asyncssh.config.ConfigParseError, OSError) as exc:
        raise ConfigError("cannot read the ssh config", path=str(ssh_config), observed=str(exc)) from exc
    return resolve_options(dest, cfg.get)


def _auth_error(exc: asyncssh.PermissionDenied, host: str, what: str) -> AuthError:
    agent = "an ssh-agent is reachable" if os.environ.get("SSH_AUTH_SOCK") else (
        "no ssh-agent is reachable (SSH_AUTH_SOCK is not set: MCP clients start servers with a "
        "minimal environment; name SSH_AUTH_SOCK in the client config's env, or set an "
        "IdentityFile for this host in ~/.ssh/config)"
    )
    return AuthError(f"authentication refused while {what}; {agent}", host=host, observed=exc.reason,
                     next_step="check the user, the key in authorized_keys on the box, and the agent")


def _channel_error(exc: asyncssh.ChannelOpenError, host: str, what: str) -> TransportError:
    if exc.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED:
        return TransportError(f"the box refused a new channel while {what}", host=host, observed=exc.reason,
                              next_step="too many sessions open (sshd MaxSessions); retry shortly")
    return TransportError(
        f"the connection could not open a channel while {what}; this says nothing about jobs on the box",
        host=host, observed=exc.reason, next_step="retry; the pool reconnects")


@contextlib.contextmanager
def mapped_errors(host: str, what: str) -> Iterator[None]:
    """asyncssh/OSError -> our hierarchy. The one mapping point for this library."""
    try:
        yield
    except RgtError:
        raise
    except asyncssh.PermissionDenied as exc:
        raise _auth_error(exc, host, what) from exc
    except asyncssh.HostKeyNotVerifiable as exc:
        raise HostKeyError(f"host key not trusted while {what}", host=host, observed=exc.reason) from exc
    except asyncssh.ChannelOpenError as exc:
        raise _channel_error(exc, host, what) from exc
    except (asyncssh.DisconnectError, asyncssh.ConnectionLost) as exc:
        raise TransportError(
            f"connection lost while {what}; this says nothing about jobs on the box",
            host=host, observed=exc.reason, next_step="retry; the pool reconnects",
        ) from exc
    except asyncssh.Error as exc:
        raise TransportError(f"ssh error while {what}", host=host, observed=str(exc)) from exc
    except TimeoutError as exc:
        raise TransportError(
            f"timed out while {what}; this says nothing about jobs on the box", host=host,
            next_step="check that the box is up and reachable (ports change on many rentals)",
        ) from exc
    except OSError as exc:
        raise TransportError(
            f"network error while {what}", host=host, observed=f"{type(exc).__name__}: {exc}",
            next_step="check the address and port; a stopped rental box refuses connections",
        ) from exc


class Connector:
    """Makes a host's connection; keeps its ProxyJump hops (closed with it) and how it got there."""

    def __init__(self, name: str, destination: Destination, *, known_hosts_path: Path, ssh_config: Path | None,
                 host_key_policy: HostKeyPolicy, connect_timeout_s: float, forward_agent: bool = False,
                 fallback: FallbackOptions | None = None) -> None:
        self.name = name
        self.destination = destination
        self.known_hosts_path = known_hosts_path
        self.ssh_config = ssh_config
        self.host_key_policy = host_key_policy
        self.connect_timeout_s = connect_timeout_s
        self.forward_agent = forward_agent
        self.fallback = fallback
        self.jumps: list[Connection] = []
        self.transport: TransportRecord | None = None  # of the last connection made

    async def open(self) -> Connection:
        """The box, connected directly, or over the fallback when the host opted in and the
        doctor found path evidence. Errors are ours (mapped)."""
        started = time.monotonic()
        try:
            with mapped_errors(self.name, "connecting"):
                conn = await self._open(self.destination, depth=0)
        except TransportError as exc:
            if self.fallback is None:
                raise
            conn, self.transport = await connect_with_fallback(
                exc, destination=str(self.destination), options=self.fallback, ssh_config=self.ssh_config,
                known_hosts_path=self.known_hosts_path, started=started,
                connect_timeout_s=self.connect_timeout_s, connect_over=self._connect_over)
            return conn
        self.transport = DIRECT
        return conn

    async def _open(self, dest: Destination, depth: int) -> Connection:
        """`dest` through its ProxyJump hops, each kept open (and closed with the host) as the next
        one's tunnel. As in OpenSSH, the first hop is reached as its own config says, its own
        ProxyJump included; each later hop through the one before it."""
        if depth > _MAX_HOPS:
            raise ConfigError(f"ProxyJump chain too long (more than {_MAX_HOPS} hops)", host=self.name)
        r = resolve(dest, self.ssh_config)
        tunnel: Connection | None = None
        for i, hop in enumerate(r.jump_hops()):
            tunnel = await (self._open(hop, depth + 1) if i == 0 else
                            self._open_checked(resolve(hop, self.ssh_config), tunnel))
            self.jumps.append(tunnel)
        return await self._open_checked(r, tunnel)

    def _trusted(self, r: ResolvedDestination) -> asyncssh.SSHKnownHosts:
        return asyncssh.import_known_hosts(known_hosts_text((self.known_hosts_path, *r.known_hosts_files)))

    def _is_box(self, r: ResolvedDestination) -> bool:
        return r.alias == self.destination.host

    async def _open_checked(self, r: ResolvedDestination, tunnel: Connection | None) -> Connection:
        try:
            return await self._connect(r, tunnel=tunnel)
        except asyncssh.HostKeyNotVerifiable:
            await self._check_presented(r, await self._presented(r, tunnel=tunnel))
            return await self._connect(r, tunnel=tunnel)

    def _options(self, r: ResolvedDestination) -> dict[str, Any]:
        """What every connect of `r` passes asyncssh: the alias (so its Host block applies), the
        config, and our fixed choices. Agent forwarding is off unless the inventory turned it on for
        the box itself (never for a hop), whatever ForwardAgent the config says."""
        return {"host": r.alias, "port": r.explicit_port or (), "username": r.explicit_user or (),
                "config": [str(self.ssh_config)] if self.ssh_config and self.ssh_config.is_file() else (),
                "connect_timeout": self.connect_timeout_s, "login_timeout": self.connect_timeout_s,
                "encryption_algs": _CIPHERS, "keepalive_interval": 15, "keepalive_count_max": 3,
                "agent_forwarding": self.forward_agent and self._is_box(r)}

    async def _connect(self, r: ResolvedDestination, *, tunnel: Connection | None) -> Connection:
        for attempt, pause in enumerate((*_CONNECT_RETRIES, None)):
            try:
                return await asyncssh.connect(**self._options(r), known_hosts=self._trusted(r), tunnel=tunnel)
            except (ConnectionResetError, asyncssh.ConnectionLost) as exc:
                # sshd's MaxStartups resets bursts of new connections: back off and retry.
                if pause is None:
                    raise
                log.info("ssh %s: connect attempt %d reset (%s); retrying", self.name, attempt + 1, exc)
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    async def _connect_over(self, plan: FallbackPlan, fresh: FreshSocket) -> Connection:
        """The box over fallback sockets: the presented key must be one pinned for the logical
        name (never for the address the socket went to), checked before authentication; no name is
        resolved again (the socket is connected; hostname canonicalisation is off)."""
        r = resolve(self.destination, self.ssh_config)
        with mapped_errors(self.name, "connecting over the clash fallback"):
            try:
                return await self._connect_socket(r, plan, await fresh())
            except asyncssh.HostKeyNotVerifiable:
                await self._check_presented(r, await self._presented(r, sock=await fresh()))
                return await self._connect_socket(r, plan, await fresh())

    async def _connect_socket(self, r: ResolvedDestination, plan: FallbackPlan, sock: Any) -> Connection:
        trusted = self._trusted(r)
        # By the name alone (no address: the entries for the IP the socket went to never count).
        pins = asyncssh.match_known_hosts(trusted, plan.logical_host, "", None if plan.port == 22 else plan.port)
        return await asyncssh.connect(**self._options(r), sock=sock, known_hosts=pins,
                                      canonicalize_hostname=False)

    async def _presented(self, r: ResolvedDestination, *, tunnel: Connection | None = None,
                         sock: Any = None) -> asyncssh.SSHKey:
        presented = await asyncio.wait_for(
            asyncssh.get_server_host_key(r.host, r.port, tunnel=tunnel, sock=sock, config=[]),
            self.connect_timeout_s)
        if presented is None:
            raise HostKeyError("the box presented no host key", host=self.name)
        return presented

    async def _check_presented(self, r: ResolvedDestination, presented: asyncssh.SSHKey) -> None:
        """The key was not trusted: refuse with both fingerprints, or pin a first-seen key when
        the policy is accept-new. Returns only after pinning."""
        label = known_hosts_label(r.host, r.port)
        # A ProxyJump hop's refusal says which hop it is.
        named = label if self._is_box(r) else f"{label} (ProxyJump hop {r.alias})"
        shown = presented.get_fingerprint("sha256")
        trusted = asyncssh.match_known_hosts(self._trusted(r), r.host, "", None if r.port == 22 else r.port)[0]
        if trusted:
            raise changed_key_error(self.name, named, shown, list(dict.fromkeys(k.get_fingerprint("sha256")
                                                                                for k in trusted)))
        if self.host_key_policy != "accept-new":
            raise unknown_key_error(self.name, named, shown, r.host, r.port)
        pin_key(self.known_hosts_path, label, presented.export_public_key("openssh").decode())
        log.warning("ssh %s: pinned new host key %s for %s in %s", self.name, shown, label, self.known_hosts_path)
