"""SshHost: a box over SSH (asyncssh). The only module that imports asyncssh.

One pooled connection per host; warm commands go over its persistent command channel (one round
trip each, session.py), others over one exec channel each, at most `max_channels` at once (sshd's
MaxSessions is 10). ~/.ssh/config and ssh-agent are honoured. Host keys are checked strictly
against known_hosts; `accept-new` pins a first-seen key in the server's own file; a changed key is
always refused with both fingerprints. asyncssh and socket errors are mapped to ours in
`_mapped_errors`, nowhere else. Rules that need no asyncssh live beside it: destination.py,
ssh_config.py (what the config means), known_hosts.py (policy), commands.py (shell words).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Final

from mcp_server.quiet_imports import quiet_known_warnings

with quiet_known_warnings():
    import asyncssh
    from asyncssh.config import SSHClientConfig

from mcp_server.errors import (
    AuthError,
    ConfigError,
    HostKeyError,
    NotFoundError,
    RgtError,
    TransportError,
)
from mcp_server.hosts.base import DEFAULT_MAX_OUTPUT, CommandResult, FileStat
from mcp_server.hosts.commands import (
    command_timeout,
    kill_group,
    parse_stat,
    read_range_command,
    refuse_nul,
    remote_command,
    shell_status,
    stat_command,
)
from mcp_server.hosts.destination import Destination
from mcp_server.hosts.known_hosts import (
    HostKeyPolicy,
    changed_key_error,
    known_hosts_label,
    known_hosts_text,
    pin_key,
    unknown_key_error,
)
from mcp_server.hosts.session import NotSent, Opened, Session, SessionSlot, Wedged, open_channel, start_command
from mcp_server.hosts.ssh_config import ResolvedDestination, resolve_options
from mcp_server.hosts.streams import read_capped, read_stderr_and_pgid
from mcp_server.settings import COMMAND_TIMEOUT_S, CONNECT_TIMEOUT_S, MAX_CHANNELS

log = logging.getLogger(__name__)

_Connection = asyncssh.SSHClientConnection
_Process = asyncssh.SSHClientProcess[bytes]
_CONNECT_RETRIES = (0.2, 0.6, 1.5)
# AES-GCM first: with AES-NI it moves bulk data about 1.7x faster than chacha20 in asyncssh.
_CIPHERS = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
            "aes128-ctr", "aes256-ctr"]
_KILL_TIMEOUT_S = 5.0
QUICK_RESERVE = 2  # channels slow commands and file streams never take


def _resolve(dest: Destination, ssh_config: Path | None) -> ResolvedDestination:
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


@contextlib.contextmanager
def _mapped_errors(host: str, what: str) -> Iterator[None]:
    """asyncssh/OSError -> our hierarchy. The one mapping point for this library."""
    try:
        yield
    except RgtError:
        raise
    except asyncssh.PermissionDenied as exc:
        agent = "an ssh-agent is reachable" if os.environ.get("SSH_AUTH_SOCK") else (
            "no ssh-agent is reachable (SSH_AUTH_SOCK is not set: MCP clients start servers with a "
            "minimal environment; name SSH_AUTH_SOCK in the client config's env, or set an "
            "IdentityFile for this host in ~/.ssh/config)"
        )
        raise AuthError(
            f"authentication refused while {what}; {agent}",
            host=host, observed=exc.reason,
            next_step="check the user, the key in authorized_keys on the box, and the agent",
        ) from exc
    except asyncssh.HostKeyNotVerifiable as exc:
        raise HostKeyError(f"host key not trusted while {what}", host=host, observed=exc.reason) from exc
    except asyncssh.ChannelOpenError as exc:
        if exc.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED:
            raise TransportError(
                f"the box refused a new channel while {what}", host=host, observed=exc.reason,
                next_step="too many sessions open (sshd MaxSessions); retry shortly",
            ) from exc
        raise TransportError(
            f"the connection could not open a channel while {what}; this says nothing about jobs on the box",
            host=host, observed=exc.reason, next_step="retry; the pool reconnects",
        ) from exc
    except (asyncssh.DisconnectError, asyncssh.ConnectionLost) as exc:
        raise TransportError(
            f"connection lost while {what}; this says nothing about jobs on the box",
            host=host, observed=exc.reason, next_step="retry; the pool reconnects",
        ) from exc
    except asyncssh.Error as exc:
        raise TransportError(f"ssh error while {what}", host=host, observed=str(exc)) from exc
    except TimeoutError as exc:
        raise TransportError(
            f"timed out while {what}", host=host,
            next_step="check that the box is up and reachable (ports change on many rentals)",
        ) from exc
    except OSError as exc:
        raise TransportError(
            f"network error while {what}", host=host, observed=f"{type(exc).__name__}: {exc}",
            next_step="check the address and port; a stopped rental box refuses connections",
        ) from exc


class SshHost:
    """A box over one pooled SSH connection."""

    kind: Final = "ssh"

    def __init__(
        self,
        name: str,
        destination: Destination,
        *,
        known_hosts_path: Path,
        ssh_config: Path | None,
        host_key_policy: HostKeyPolicy = "strict",
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        command_timeout_s: float = COMMAND_TIMEOUT_S,
        max_channels: int = MAX_CHANNELS,
        command_channel: bool = True,
    ) -> None:
        self.name = name
        self.destination = destination
        self.known_hosts_path = known_hosts_path
        self.ssh_config = ssh_config
        self.host_key_policy = host_key_policy
        self.connect_timeout_s = connect_timeout_s
        self.command_timeout_s = command_timeout_s
        self._channels = asyncio.Semaphore(max_channels)
        # Commands that hold a channel on purpose (and file streams) get all but QUICK_RESERVE of
        # the channels, so a burst of them never makes a quick call wait.
        self._slow = asyncio.Semaphore(max(1, max_channels - QUICK_RESERVE))
        self._lock = asyncio.Lock()
        self._conn: _Connection | None = None
        self._jumps: list[_Connection] = []
        self.connects = 0  # how many TCP+SSH handshakes this host has made (pool reuse)
        self.round_trips = 0
        self.command_channel = SessionSlot(name, self._open_command_channel) if command_channel else None

    # -- connection -------------------------------------------------------------------
    async def connection(self) -> _Connection:
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            await self._drop()
            with _mapped_errors(self.name, "connecting"):
                self._conn = await self._open(self.destination, depth=0)
            self.connects += 1
            return self._conn

    async def _open(self, dest: Destination, depth: int) -> _Connection:
        """`dest` through its ProxyJump hops, each kept open (and closed with the host) as the next
        one's tunnel. As in OpenSSH, the first hop is reached as its own config says, its own
        ProxyJump included; each later hop through the one before it."""
        if depth > 4:
            raise ConfigError("ProxyJump chain too long (more than 4 hops)", host=self.name)
        r = _resolve(dest, self.ssh_config)
        tunnel: _Connection | None = None
        for i, hop in enumerate(r.jump_hops()):
            tunnel = await (self._open(hop, depth + 1) if i == 0 else
                            self._open_checked(_resolve(hop, self.ssh_config), tunnel))
            self._jumps.append(tunnel)
        return await self._open_checked(r, tunnel)

    def _trusted(self, r: ResolvedDestination) -> asyncssh.SSHKnownHosts:
        return asyncssh.import_known_hosts(known_hosts_text((self.known_hosts_path, *r.known_hosts_files)))

    async def _open_checked(self, r: ResolvedDestination, tunnel: _Connection | None) -> _Connection:
        try:
            return await self._connect(r, tunnel)
        except asyncssh.HostKeyNotVerifiable:
            await self._diagnose_host_key(r, tunnel)
            return await self._connect(r, tunnel)

    async def _connect(self, r: ResolvedDestination, tunnel: _Connection | None) -> _Connection:
        for attempt, pause in enumerate((*_CONNECT_RETRIES, None)):
            try:
                # Connect by the alias so asyncssh applies its Host block (IdentityFile...).
                return await asyncssh.connect(
                    r.alias, r.explicit_port or (), username=r.explicit_user or (),
                    config=[str(self.ssh_config)] if self.ssh_config and self.ssh_config.is_file() else (),
                    known_hosts=self._trusted(r), tunnel=tunnel,
                    connect_timeout=self.connect_timeout_s, login_timeout=self.connect_timeout_s,
                    encryption_algs=_CIPHERS,
                    keepalive_interval=15, keepalive_count_max=3,
                )
            except (ConnectionResetError, asyncssh.ConnectionLost) as exc:
                # sshd's MaxStartups resets bursts of new connections: back off and retry.
                if pause is None:
                    raise
                log.info("ssh %s: connect attempt %d reset (%s); retrying", self.name, attempt + 1, exc)
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    async def _diagnose_host_key(self, r: ResolvedDestination, tunnel: _Connection | None) -> None:
        """Called when the key was not trusted: refuse with both fingerprints, or pin a
        first-seen key when the policy is accept-new. Returns only after pinning."""
        label = known_hosts_label(r.host, r.port)
        # A ProxyJump hop's refusal says which hop it is.
        named = label if r.alias == self.destination.host else f"{label} (ProxyJump hop {r.alias})"
        presented = await asyncio.wait_for(
            asyncssh.get_server_host_key(r.host, r.port, tunnel=tunnel, config=[]),
            self.connect_timeout_s,
        )
        if presented is None:
            raise HostKeyError("the box presented no host key", host=self.name)
        shown = presented.get_fingerprint("sha256")
        trusted = asyncssh.match_known_hosts(self._trusted(r), r.host, r.host, None if r.port == 22 else r.port)[0]
        if trusted:
            raise changed_key_error(self.name, named, shown, list(dict.fromkeys(k.get_fingerprint("sha256")
                                                                                for k in trusted)))
        if self.host_key_policy != "accept-new":
            raise unknown_key_error(self.name, named, shown, r.host, r.port)
        pin_key(self.known_hosts_path, label, presented.export_public_key("openssh").decode())
        log.warning("ssh %s: pinned new host key %s for %s in %s", self.name, shown, label, self.known_hosts_path)

    async def _drop(self) -> None:
        for c in [self._conn, *reversed(self._jumps)]:
            if c is not None:
                c.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.wait_closed(), 2)
        self._conn, self._jumps = None, []

    async def close(self) -> None:
        async with self._lock:
            if self.command_channel is not None:
                self.command_channel.close()
            await self._drop()

    # -- commands ---------------------------------------------------------------------
    async def run(
        self,
        script: str,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        slow: bool = False,
    ) -> CommandResult:
        limit = self.command_timeout_s if timeout is None else timeout
        refuse_nul(script, "the command")
        self.round_trips += 1
        conn = await self.connection()
        started = time.monotonic()
        session = self.command_channel.for_call(conn, stdin) if self.command_channel else None
        with contextlib.suppress(NotSent):  # the channel was already gone: the command never ran, so exec it
            if session is not None:
                return await self._run_in_session(session, conn, script, stdin, limit, max_output, started)
        command, stdin = remote_command(script, stdin)
        async with self._slow if slow else contextlib.nullcontext(), self._channels:
            try:
                proc = await self._start(conn, command)
            except TransportError:
                # The box dropped the pooled connection (sshd restarted, a network blip): the
                # command never started, so one retry on a fresh connection is safe.
                if not conn.is_closed():
                    raise
                conn = await self.connection()
                proc = await self._start(conn, command)
            pgid: list[int] = []
            try:
                async with asyncio.timeout(limit):
                    with _mapped_errors(self.name, "running a command"):
                        out, trunc, err, done = await self._exchange(proc, stdin, pgid, max_output)
            except TimeoutError:
                await self._kill(conn, pgid)
                proc.close()
                raise command_timeout(self.name, script, limit) from None
            except BaseException:
                await asyncio.shield(self._kill(conn, pgid))
                proc.close()
                raise
        status = self._exit_status(done, script)
        return CommandResult(self.name, script, status, out, err, time.monotonic() - started, trunc)

    async def _open_command_channel(self, conn: _Connection) -> Opened:
        with _mapped_errors(self.name, "starting the command channel"):
            return await open_channel(lambda: conn.create_process(start_command(), encoding=None),
                                      self._channels, self.name)

    async def _run_in_session(self, session: Session, conn: _Connection, script: str, stdin: bytes | None,
                              limit: float, max_output: int, started: float) -> CommandResult:
        try:
            done = await session.call(script, stdin, limit, max_output)
        except Wedged as exc:
            await self._kill(conn, [exc.pgid] if exc.pgid else [])
            raise command_timeout(self.name, script, limit) from None
        return done.result(self.name, script, limit, time.monotonic() - started)

    async def _exchange(
        self, proc: _Process, stdin: bytes | None, pgid: list[int], max_output: int
    ) -> tuple[bytes, bool, bytes, asyncssh.SSHCompletedProcess]:
        """Send stdin, collect both outputs (noting the process group in `pgid` as soon as the
        wrapper reports it) and wait until the session is closed."""
        if stdin:
            proc.stdin.write(stdin)
        proc.stdin.write_eof()
        (out, trunc), err = await asyncio.gather(
            read_capped(proc.stdout, max_output),
            read_stderr_and_pgid(proc.stderr, pgid, max_output),
        )
        with _mapped_errors(self.name, "waiting for a command"):
            done = await proc.wait()
            # Hold the channel slot until sshd has really closed the session,
            # or a burst of calls outruns MaxSessions.
            await proc.wait_closed()
        return out, trunc, err, done

    def _exit_status(self, done: asyncssh.SSHCompletedProcess, script: str) -> int:
        """The exit status the shell would report (128 + signal for a signal death)."""
        status = shell_status(done.exit_status, done.exit_signal[0] if done.exit_signal else None)
        if status is None:
            raise TransportError("the connection closed before the command reported an exit status; "
                                 "its outcome on the box is unknown", host=self.name, command=script)
        return status

    async def _start(self, conn: _Connection, command: str) -> _Process:
        """Open a session channel; a refusal (MaxSessions shared with other clients) is
        retried briefly before it is reported."""
        for pause in (*_CONNECT_RETRIES, None):
            try:
                with _mapped_errors(self.name, "starting a command"):
                    return await conn.create_process(command, encoding=None)
            except TransportError as exc:
                if pause is None or not isinstance(exc.__cause__, asyncssh.ChannelOpenError):
                    raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    async def _kill(self, conn: _Connection, pgid: list[int]) -> None:
        """Kill what a cancelled or timed-out call started: its whole process group."""
        if not pgid or conn.is_closed():
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                conn.run(f"{kill_group(pgid[0], 'TERM')}; sleep 0.5; {kill_group(pgid[0], 'KILL')}"),
                _KILL_TIMEOUT_S,
            )

    # -- files ------------------------------------------------------------------------
    async def stat(self, path: str) -> FileStat | None:
        return parse_stat((await self.run(stat_command(path))).text)

    async def read_stream(
        self, path: str, offset: int = 0, chunk_size: int = 1024 * 1024, length: int | None = None
    ) -> AsyncIterator[bytes]:
        """Stream a file from `offset` over an exec channel (`tail -c +N` seeks), which moves
        bulk data faster than asyncssh's SFTP; stopping early closes the channel."""
        if await self.stat(path) is None:
            raise NotFoundError("file not found", host=self.name, path=path)
        conn = await self.connection()
        async with self._slow, self._channels:
            proc = await self._start(conn, read_range_command(path, offset, length))
            try:
                with _mapped_errors(self.name, f"reading {path}"):
                    while chunk := await proc.stdout.read(chunk_size):
                        yield chunk
                    done = await proc.wait()
                if done.exit_status not in (0, None):
                    stderr = (await proc.stderr.read()).decode("utf-8", "replace")
                    raise TransportError("reading the file failed on the box", host=self.name, path=path,
                                         exit_status=done.exit_status, stderr=stderr)
            finally:
                proc.close()

