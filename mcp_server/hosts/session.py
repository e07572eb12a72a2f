"""The server side of a persistent command channel to a box (see session_onbox.py).

One channel per connection runs the on-box loop; each command is one framed request and the
frames that answer it, so a warm command costs one round trip. Commands run concurrently (at most
MAX_IN_FLIGHT at once). A channel that misbehaves (a frame that does not parse, an answer that does
not come within the command's bound, the channel closing) fails the commands waiting on it and is
never used again; SshHost starts a fresh one. This module does not know asyncssh: it reads and
writes the channel's streams through the two small protocols below.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import itertools
import json
import logging
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_server.errors import TransportError
from mcp_server.hosts.base import CommandResult
from mcp_server.hosts.commands import command_timeout, shell_status

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 16
READY_TIMEOUT_S = 10.0
MAX_SESSION_STDIN = 1024 * 1024
MAX_FRAME = 1024 * 1024  # the box sends at most 256 KiB per output frame


def grace_s(timeout: float) -> float:
    """How long past a command's own bound the box may take to answer before the channel is
    declared wedged: the box kills the command at its bound (TERM, then KILL) and drains output."""
    return 8.0 + 0.1 * timeout


class FrameReader(Protocol):
    async def readline(self) -> bytes: ...
    async def readexactly(self, n: int) -> bytes: ...


class FrameWriter(Protocol):
    def write(self, data: bytes) -> None: ...


class NotSent(Exception):
    """The channel was gone before the command was written: it did not run, so SshHost runs it over
    an exec channel instead (never raised out of SshHost, so not one of the coded errors)."""


class Wedged(Exception):
    """The box did not answer within the command's bound plus grace; `pgid` is the command's
    process group when the box had reported it."""

    def __init__(self, pgid: int | None) -> None:
        super().__init__("no answer from the command channel")
        self.pgid = pgid


Opened = tuple[FrameReader, FrameWriter, Callable[[], None]]  # the channel's streams and its closer


def start_command() -> str:
    """The command line that starts the on-box loop (127 when the box has no python3)."""
    source = importlib.resources.files("mcp_server.hosts").joinpath("session_onbox.py").read_text()
    return f"command -v python3 >/dev/null 2>&1 || exit 127; exec python3 -u -c {shlex.quote(source)}"


@dataclass
class Outcome:
    """What one command produced, as the box reported it."""

    cap: int
    pgid: int | None = None
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    status: int | None = None
    signal: str | None = None
    truncated: bool = False
    timed_out: bool = False
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def result(self, host: str, script: str, limit: float, duration_s: float) -> CommandResult:
        if self.timed_out:
            raise command_timeout(host, script, limit)
        status = shell_status(self.status, self.signal)
        if status is None:
            raise TransportError("the box reported no exit status; the command's outcome is unknown",
                                 host=host, command=script)
        return CommandResult(host, script, status, bytes(self.out), bytes(self.err), duration_s, self.truncated)


class Session:
    """One persistent channel: `call` sends a command and waits for its outcome."""

    def __init__(self, host: str, reader: FrameReader, writer: FrameWriter) -> None:
        self.host = host
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, Outcome] = {}
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._broken: str | None = None
        self._pump: asyncio.Task[None] | None = None
        self.calls = 0

    @property
    def usable(self) -> bool:
        return self._broken is None

    @property
    def has_room(self) -> bool:
        return not self._slots.locked()

    async def ready(self) -> None:
        """Wait for the loop's first frame, then start reading answers."""
        head = json.loads(await asyncio.wait_for(self._reader.readline(), READY_TIMEOUT_S) or b"null")
        if not isinstance(head, dict) or head.get("ready") != 1 or not isinstance(head.get("pid"), int):
            raise TransportError("the box's command loop did not start", host=self.host)
        self.box_pid: int = head["pid"]
        self._pump = asyncio.create_task(self._read_frames())

    async def call(self, script: str, stdin: bytes | None, timeout: float, cap: int) -> Outcome:
        """Run `script`; the box enforces `timeout`. Cancelling the call kills the command's group."""
        async with self._slots:
            if self._broken:
                raise TransportError(f"the command channel broke: {self._broken}", host=self.host)
            rid = next(self._ids)
            self.calls += 1
            outcome = self._pending[rid] = Outcome(cap)
            body = script.encode("utf-8", "surrogateescape")
            data = stdin or b""
            head = {"id": rid, "script": len(body), "stdin": len(data), "timeout": timeout, "cap": cap}
            try:
                self._writer.write(json.dumps(head).encode() + b"\n" + body + data)
            except Exception as exc:  # the channel closed under us: nothing was sent
                self._pending.pop(rid, None)
                self.fail(f"{type(exc).__name__} while sending")
                raise NotSent(f"the command channel closed before the command was sent ({type(exc).__name__})") from exc
            try:
                await asyncio.wait_for(asyncio.shield(outcome.done), timeout + grace_s(timeout))
            except TimeoutError:
                self._pending.pop(rid, None)
                self.fail("a command's answer did not arrive within its bound")
                raise Wedged(outcome.pgid) from None
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    self._writer.write(json.dumps({"cancel": rid}).encode() + b"\n")
                raise
            finally:
                self._pending.pop(rid, None)
            return outcome

    def fail(self, why: str) -> None:
        """Stop using this channel: every waiting command gets a transport error."""
        if self._broken is None:
            self._broken = why
            log.info("ssh %s: command channel dropped (%s)", self.host, why)
        for outcome in self._pending.values():
            if not outcome.done.done():
                outcome.done.set_exception(TransportError(
                    f"the command channel to the box broke ({why}); the command's outcome on the box "
                    "is unknown, and this says nothing about jobs on the box", host=self.host,
                    next_step="check the box with another call (the channel is replaced)"))
        if self._pump is not None and self._pump is not asyncio.current_task():
            self._pump.cancel()

    async def _read_frames(self) -> None:
        try:
            while line := await self._reader.readline():
                await self._take(json.loads(line))
            self.fail("the channel closed")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # anything unexpected on the channel ends it
            self.fail(f"{type(exc).__name__} while reading its frames")

    async def _take(self, head: dict[str, object]) -> None:
        """Apply one frame, reading the bytes it announces. A frame for a command no one waits
        for any more (cancelled, bounded out) is read and dropped."""
        rid = head["id"]
        outcome = self._pending.get(rid) if isinstance(rid, int) else None
        for key in ("o", "e"):
            size = head.get(key)
            if isinstance(size, int):
                if not 0 <= size <= MAX_FRAME:
                    raise ValueError("an output frame out of bounds")
                body = await self._reader.readexactly(size)
                if outcome is not None:
                    kept = outcome.out if key == "o" else outcome.err
                    room = outcome.cap - len(kept)
                    outcome.truncated |= size > room
                    kept.extend(body[:max(0, room)])
                return
        if outcome is None:
            return
        if "pgid" in head:
            outcome.pgid = int(str(head["pgid"]))
        elif "done" in head:
            outcome.status = int(str(head["done"]))
            outcome.signal = str(head["sig"]) if head.get("sig") else None
            outcome.truncated = bool(head.get("trunc"))
            outcome.timed_out = bool(head.get("timed_out"))
            outcome.done.set_result(None)
        else:
            raise ValueError("unknown frame")


class SessionSlot:
    """The command channel of one connection: started in the background on first use (that call
    takes the exec path), replaced after it breaks, never retried on a connection whose box
    could not start it (no python3)."""

    def __init__(self, host: str, opener: Callable[[Any], Awaitable[Opened]]) -> None:
        self.host = host
        self._opener = opener
        self._key: object = None
        self._session: Session | None = None
        self._close: Callable[[], None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._refused: object = None

    @property
    def up(self) -> bool:
        return self._session is not None and self._session.usable

    @property
    def session(self) -> Session | None:
        return self._session

    def for_call(self, key: object, stdin: bytes | None) -> Session | None:
        """The session a call on connection `key` should use, or None for an exec channel: while
        the session starts, when it is full (a call never waits behind long commands), and for
        a big stdin (which would hold the shared channel)."""
        if len(stdin or b"") > MAX_SESSION_STDIN:
            return None
        session = self._get(key)
        return session if session is not None and session.has_room else None

    def _get(self, key: object) -> Session | None:
        """The usable session for connection `key`, or None (and a start in the background)."""
        if key is not self._key:
            self.close()
            self._key = key
        if self._session is not None and self._session.usable:
            return self._session
        if self._session is not None:
            self._discard()
        if self._starting is None and self._refused is not key:
            self._starting = asyncio.create_task(self._start(key))
        return None

    async def _start(self, key: object) -> None:
        close: Callable[[], None] | None = None
        try:
            reader, writer, close = await self._opener(key)
            session = Session(self.host, reader, writer)
            await session.ready()
        except BaseException as exc:
            if close is not None:
                close()
            if not isinstance(exc, Exception):
                raise
            # The exec path keeps working without it (a box with no python3, a refused channel).
            log.info("ssh %s: no command channel on this connection (%s)", self.host, type(exc).__name__)
            self._refused = key
            return
        finally:
            self._starting = None
        if key is self._key:
            self._session, self._close = session, close
        else:
            session.fail("its connection was replaced")
            close()

    def _discard(self) -> None:
        if self._session is not None:
            self._session.fail("replaced")
        if self._close is not None:
            self._close()
        self._session, self._close = None, None

    def close(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
            self._starting = None
        self._discard()


async def open_channel(create: Callable[[], Awaitable[Any]], channels: asyncio.Semaphore, host: str) -> Opened:
    """Start the on-box loop on a new channel (`create` opens it). It holds one of the host's
    channel slots while it lives; none is taken from a host whose slots are all busy."""
    if channels.locked():
        raise TransportError("no spare channel for the command channel", host=host)
    await channels.acquire()
    try:
        proc = await create()
    except BaseException:
        channels.release()
        raise
    released = False

    def close() -> None:
        nonlocal released
        proc.close()
        if not released:
            released = True
            channels.release()
    return proc.stdout, proc.stdin, close
