"""SshHost: a box over SSH (asyncssh; with ssh_connect.py, which makes the connection, the only
modules that import it).

One pooled connection per host; warm commands go over its persistent command channel (one round
trip each, session.py), others over one exec channel each, at most `max_channels` at once (sshd's
MaxSessions is 10). ~/.ssh/config and ssh-agent are honoured; host keys, jump hosts and the
Clash fallback are ssh_connect.py's. asyncssh and socket errors are mapped to ours in
`mapped_errors`, nowhere else. Rules that need no asyncssh live beside it: destination.py,
ssh_config.py (what the config means), known_hosts.py (policy), commands.py (shell words).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from mcp_server.quiet_imports import quiet_known_warnings

with quiet_known_warnings():
    import asyncssh

from mcp_server.errors import NotFoundError, TransportError
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
from mcp_server.hosts.fallback_options import FallbackOptions, TransportRecord
from mcp_server.hosts.known_hosts import HostKeyPolicy
from mcp_server.hosts.session import NotSent, Opened, Session, SessionSlot, Wedged, open_channel, start_command
from mcp_server.hosts.ssh_connect import Connector, mapped_errors
from mcp_server.hosts.streams import read_capped, read_stderr_and_pgid
from mcp_server.settings import COMMAND_TIMEOUT_S, CONNECT_TIMEOUT_S, MAX_CHANNELS

log = logging.getLogger(__name__)

_Connection = asyncssh.SSHClientConnection
_Process = asyncssh.SSHClientProcess[bytes]
_START_RETRIES = (0.2, 0.6, 1.5)
_KILL_TIMEOUT_S = 5.0
QUICK_RESERVE = 2  # channels slow commands and file streams never take


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
        forward_agent: bool = False,
        fallback: FallbackOptions | None = None,
    ) -> None:
        self.name = name
        self.destination = destination
        self.command_timeout_s = command_timeout_s
        self._channels = asyncio.Semaphore(max_channels)
        # Commands that hold a channel on purpose (and file streams) get all but QUICK_RESERVE of
        # the channels, so a burst of them never makes a quick call wait.
        self._slow = asyncio.Semaphore(max(1, max_channels - QUICK_RESERVE))
        self._lock = asyncio.Lock()
        self._conn: _Connection | None = None
        self._connector = Connector(name, destination, known_hosts_path=known_hosts_path, ssh_config=ssh_config,
                                    host_key_policy=host_key_policy, connect_timeout_s=connect_timeout_s,
                                    forward_agent=forward_agent, fallback=fallback)
        self.connects = 0  # how many TCP+SSH handshakes this host has made (pool reuse)
        self.round_trips = 0
        self.command_channel = SessionSlot(name, self._open_command_channel) if command_channel else None

    # -- connection -------------------------------------------------------------------
    @property
    def _jumps(self) -> list[_Connection]:
        return self._connector.jumps

    @property
    def transport(self) -> TransportRecord | None:
        """How the current connection reached the box (direct, or the Clash fallback and why)."""
        return self._connector.transport

    @property
    def diagnoses_failures(self) -> bool:
        """A failed connect already comes with the connection doctor's report (the fallback ran it)."""
        return self._connector.fallback is not None

    async def connection(self) -> _Connection:
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            await self._drop()
            self._conn = await self._connector.open()
            self.connects += 1
            return self._conn

    async def _drop(self) -> None:
        for c in [self._conn, *reversed(self._connector.jumps)]:
            if c is not None:
                c.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.wait_closed(), 2)
        self._conn, self._connector.jumps = None, []

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
                    with mapped_errors(self.name, "running a command"):
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
        with mapped_errors(self.name, "starting the command channel"):
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
        with mapped_errors(self.name, "waiting for a command"):
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
        for pause in (*_START_RETRIES, None):
            try:
                with mapped_errors(self.name, "starting a command"):
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
                with mapped_errors(self.name, f"reading {path}"):
                    while chunk := await proc.stdout.read(chunk_size):
                        yield chunk
                    done = await proc.wait()
                if done.exit_status not in (0, None):
                    stderr = (await proc.stderr.read()).decode("utf-8", "replace")
                    raise TransportError("reading the file failed on the box", host=self.name, path=path,
                                         exit_status=done.exit_status, stderr=stderr)
            finally:
                proc.close()

