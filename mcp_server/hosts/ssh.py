"""SshHost: a box over SSH (asyncssh). The only module that imports asyncssh.

One pooled connection per host, reused across calls; at most `max_channels` channels at
once (sshd's MaxSessions is 10). ~/.ssh/config (Host aliases, HostName, Port, User,
IdentityFile, ProxyJump) and ssh-agent are honoured. Host keys are checked strictly
against known_hosts; `accept-new` pins a first-seen key in the server's own file; a
changed key is always refused with both fingerprints. asyncssh and socket errors are
mapped to ours in `_mapped_errors`, nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import asyncssh
from asyncssh.config import SSHClientConfig

from mcp_server.errors import (
    AuthError,
    CommandTimeout,
    ConfigError,
    HostKeyError,
    InputError,
    NotFoundError,
    RgtError,
    TransportError,
)
from mcp_server.hosts.base import DEFAULT_MAX_OUTPUT, CommandResult, FileStat
from mcp_server.hosts.commands import PID_MARKER, kill_group, path_word, remote_wrapper
from mcp_server.hosts.local import read_capped

log = logging.getLogger(__name__)

HostKeyPolicy = Literal["strict", "accept-new"]
_DEST_RE = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]{0,63})@)?"
    r"(?P<host>[A-Za-z0-9_][A-Za-z0-9._-]{0,252}|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?$"
)
_CONNECT_RETRIES = (0.2, 0.6, 1.5)
# AES-GCM first: with AES-NI it moves bulk data about 1.7x faster than chacha20 in asyncssh.
_CIPHERS = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
            "aes128-ctr", "aes256-ctr"]
_KILL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Destination:
    """An ssh destination as the user wrote it: an alias or [user@]host[:port]."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Destination:
        m = _DEST_RE.match(text or "")
        if not m or text.startswith("-"):
            raise InputError(
                "not an ssh destination",
                observed=text,
                expected="an inventory name, an ~/.ssh/config alias or user@host[:port]",
            )
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 1 <= port <= 65535:
            raise InputError("ssh port out of range", observed=port, expected="1..65535")
        return cls(host=m["host"].strip("[]"), user=m["user"], port=port)

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


@dataclass(frozen=True)
class _Resolved:
    """A destination after ~/.ssh/config: what we actually connect to."""

    alias: str
    explicit_user: str | None
    explicit_port: int | None
    host: str
    port: int
    user: str
    jump: str | None
    known_hosts_files: tuple[Path, ...]


def _resolve(dest: Destination, ssh_config: Path | None) -> _Resolved:
    paths = [str(ssh_config)] if ssh_config and ssh_config.is_file() else []
    try:
        cfg = SSHClientConfig.load(
            None, paths, False, False, False, getpass.getuser(),
            dest.user if dest.user else (), dest.host, dest.port if dest.port else (),
        )
    except (asyncssh.config.ConfigParseError, OSError) as exc:
        raise ConfigError("cannot read the ssh config", path=str(ssh_config), observed=str(exc)) from exc
    jump = cfg.get("ProxyJump")
    files = cfg.get("UserKnownHostsFile")
    # "UserKnownHostsFile none" would turn host-key checking off in asyncssh: we never allow
    # that, so an empty list falls back to the default file like an absent one.
    user_files = [Path(f).expanduser() for f in files] if files else [Path("~/.ssh/known_hosts").expanduser()]
    global_files = [Path(f) for f in (cfg.get("GlobalKnownHostsFile") or ["/etc/ssh/ssh_known_hosts"])]
    return _Resolved(
        alias=dest.host,
        explicit_user=dest.user,
        explicit_port=dest.port,
        host=str(cfg.get("Hostname") or dest.host),
        port=int(cfg.get("Port") or 22),
        user=str(cfg.get("User") or getpass.getuser()),
        jump=str(jump) if jump and str(jump).lower() != "none" else None,
        known_hosts_files=tuple(user_files + global_files),
    )


def _known_hosts_text(files: tuple[Path, ...]) -> str:
    chunks = []
    for f in files:
        with contextlib.suppress(OSError):
            chunks.append(f.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(chunks)


def _known_hosts_label(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _append_pin(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


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
        raise TransportError(
            f"the box refused a new channel while {what}", host=host, observed=exc.reason,
            next_step="too many sessions open (sshd MaxSessions); retry shortly",
        ) from exc
    except (asyncssh.DisconnectError, asyncssh.ConnectionLost) as exc:
        raise TransportError(
            f"connection lost while {what}; this says nothing about jobs on the box",
            host=host, observed=exc.reason, next_step="retry; the pool reconnects",
        ) from exc
    except asyncssh.Error as exc:
        raise TransportError(f"ssh error while {what}", host=host, observed=str(exc)) from exc
    except (TimeoutError, asyncio.TimeoutError) as exc:
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

    kind = "ssh"

    def __init__(
        self,
        name: str,
        destination: Destination,
        *,
        known_hosts_path: Path,
        ssh_config: Path | None,
        host_key_policy: HostKeyPolicy = "strict",
        connect_timeout_s: float = 10.0,
        command_timeout_s: float = 30.0,
        max_channels: int = 8,
    ) -> None:
        self.name = name
        self.destination = destination
        self.known_hosts_path = known_hosts_path
        self.ssh_config = ssh_config
        self.host_key_policy = host_key_policy
        self.connect_timeout_s = connect_timeout_s
        self.command_timeout_s = command_timeout_s
        self._channels = asyncio.Semaphore(max_channels)
        self._lock = asyncio.Lock()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._jumps: list[asyncssh.SSHClientConnection] = []
        self.connects = 0  # how many TCP+SSH handshakes this host has made (pool reuse)

    # -- connection -------------------------------------------------------------------
    async def connection(self) -> asyncssh.SSHClientConnection:
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            await self._drop()
            with _mapped_errors(self.name, "connecting"):
                self._conn = await self._open(self.destination, depth=0)
            self.connects += 1
            return self._conn

    async def _open(self, dest: Destination, depth: int) -> asyncssh.SSHClientConnection:
        if depth > 4:
            raise ConfigError("ProxyJump chain too long (more than 4 hops)", host=self.name)
        r = _resolve(dest, self.ssh_config)
        tunnel = None
        if r.jump:
            hops = [h.strip() for h in r.jump.split(",") if h.strip()]
            for hop in hops:
                tunnel = await self._open_via(Destination.parse(hop), tunnel, depth + 1)
        return await self._open_checked(r, tunnel)

    async def _open_via(self, dest, tunnel, depth):  # type: ignore[no-untyped-def]
        r = _resolve(dest, self.ssh_config)
        conn = await self._open_checked(r, tunnel)
        self._jumps.append(conn)
        return conn

    def _trusted(self, r: _Resolved) -> asyncssh.SSHKnownHosts:
        return asyncssh.import_known_hosts(
            _known_hosts_text((self.known_hosts_path, *r.known_hosts_files))
        )

    async def _open_checked(self, r: _Resolved, tunnel) -> asyncssh.SSHClientConnection:  # type: ignore[no-untyped-def]
        try:
            return await self._connect(r, tunnel)
        except asyncssh.HostKeyNotVerifiable:
            await self._diagnose_host_key(r, tunnel)
            return await self._connect(r, tunnel)

    async def _connect(self, r: _Resolved, tunnel) -> asyncssh.SSHClientConnection:  # type: ignore[no-untyped-def]
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

    async def _diagnose_host_key(self, r: _Resolved, tunnel) -> None:  # type: ignore[no-untyped-def]
        """Called when the key was not trusted: refuse with both fingerprints, or pin a
        first-seen key when the policy is accept-new. Returns only after pinning."""
        label = _known_hosts_label(r.host, r.port)
        presented = await asyncio.wait_for(
            asyncssh.get_server_host_key(r.host, r.port, tunnel=tunnel, config=[]),
            self.connect_timeout_s,
        )
        if presented is None:
            raise HostKeyError("the box presented no host key", host=self.name)
        shown = presented.get_fingerprint("sha256")
        trusted = asyncssh.match_known_hosts(self._trusted(r), r.host, r.host, None if r.port == 22 else r.port)[0]
        if trusted:
            expected = ", ".join(k.get_fingerprint("sha256") for k in trusted)
            raise HostKeyError(
                f"HOST KEY CHANGED for {label}: refused (a changed key is never accepted "
                "automatically; it can mean a rebuilt box or a man-in-the-middle)",
                host=self.name, observed=shown, expected=expected,
                next_step="confirm the new fingerprint on the provider's console, then remove the old "
                f"entry for {label} from known_hosts (ssh-keygen -R '{label}') and connect again",
            )
        if self.host_key_policy != "accept-new":
            raise HostKeyError(
                f"unknown host key for {label}: refused (strict host-key checking)",
                host=self.name, observed=shown, expected="a key listed in known_hosts",
                next_step="verify this fingerprint with the provider, then add it "
                f"(ssh-keyscan -p {r.port} {r.host} >> ~/.ssh/known_hosts), or set "
                'host_key_policy = "accept-new" for this host in the inventory to pin it on first use',
            )
        line = f"{label} {presented.export_public_key('openssh').decode().strip()}"
        _append_pin(self.known_hosts_path, line)
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
            await self._drop()

    # -- commands ---------------------------------------------------------------------
    async def run(
        self,
        script: str,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        limit = self.command_timeout_s if timeout is None else timeout
        conn = await self.connection()
        started = time.monotonic()
        async with self._channels:
            proc = await self._start(conn, remote_wrapper(script))
            pgid: list[int] = []
            try:
                async with asyncio.timeout(limit):
                    if stdin:
                        proc.stdin.write(stdin)
                    proc.stdin.write_eof()
                    (out, trunc), err = await asyncio.gather(
                        read_capped(proc.stdout, max_output),  # type: ignore[arg-type]
                        _read_stderr(proc.stderr, pgid, max_output),
                    )
                    with _mapped_errors(self.name, "waiting for a command"):
                        done = await proc.wait()
                        # Hold the channel slot until sshd has really closed the session,
                        # or a burst of calls outruns MaxSessions.
                        await proc.wait_closed()
            except TimeoutError:
                await self._kill(conn, pgid)
                proc.close()
                raise CommandTimeout(
                    f"command ran past {limit:g} s; its process group on the box was killed",
                    host=self.name, command=script,
                    next_step="raise the timeout or run the work detached (launch_detached)",
                ) from None
            except BaseException:
                await asyncio.shield(self._kill(conn, pgid))
                proc.close()
                raise
        status = done.exit_status
        if status is None or status < 0:
            if done.exit_signal:
                status = 128 + _signal_number(done.exit_signal[0])
            else:
                raise TransportError(
                    "the connection closed before the command reported an exit status; "
                    "its outcome on the box is unknown",
                    host=self.name, command=script,
                )
        return CommandResult(self.name, script, status, out, err, time.monotonic() - started, trunc)

    async def _start(self, conn: asyncssh.SSHClientConnection, command: str) -> asyncssh.SSHClientProcess:  # type: ignore[type-arg]
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

    async def _kill(self, conn: asyncssh.SSHClientConnection, pgid: list[int]) -> None:
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
        res = await self.run(f"stat -L -c '%s %Y %F' -- {path_word(path)} 2>/dev/null || true")
        parts = res.text.split(" ", 2)
        if len(parts) < 3 or not parts[2].startswith("regular"):
            return None
        return FileStat(size=int(parts[0]), mtime=float(parts[1]))

    async def read_stream(
        self, path: str, offset: int = 0, chunk_size: int = 1024 * 1024
    ) -> AsyncIterator[bytes]:
        """Stream a file from `offset` over an exec channel (`tail -c +N` seeks), which moves
        bulk data faster than asyncssh's SFTP; stopping early closes the channel."""
        if await self.stat(path) is None:
            raise NotFoundError("file not found", host=self.name, path=path)
        conn = await self.connection()
        async with self._channels:
            proc = await self._start(conn, f"exec tail -c +{int(offset) + 1} -- {path_word(path)}")
            try:
                with _mapped_errors(self.name, f"reading {path}"):
                    while chunk := await proc.stdout.read(chunk_size):
                        yield chunk
                    done = await proc.wait()
                if done.exit_status not in (0, None):
                    raise TransportError("reading the file failed on the box", host=self.name, path=path,
                                         exit_status=done.exit_status, stderr=(await proc.stderr.read()).decode("utf-8", "replace"))
            finally:
                proc.close()


async def _read_stderr(stream, pgid: list[int], cap: int) -> bytes:  # type: ignore[no-untyped-def]
    """Collect stderr, lifting out the wrapper's process-group line as soon as it arrives."""
    kept = bytearray()
    while line := await stream.readline():
        if not pgid and line.startswith(PID_MARKER):
            with contextlib.suppress(ValueError):
                pgid.append(int(line[len(PID_MARKER):].strip()))
            continue
        if len(kept) < cap:
            kept += line[: cap - len(kept)]
    return bytes(kept)


def _signal_number(name: str) -> int:
    import signal

    try:
        return int(signal.Signals["SIG" + name.upper().removeprefix("SIG")])
    except KeyError:
        return 0
