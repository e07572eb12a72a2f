"""Receive one file's pieces (spans.py) into its partial file: a few streams take the pieces in
file order; one thread writes each chunk at its offset; the running SHA-256 takes the file in
order, once: a chunk at the hash's edge is hashed as it is written, a piece received ahead of
the edge is read back from disk when the edge reaches it (another thread, so writing never
waits on it). Every byte is received once, written once and hashed once.

A stream the box ends early (its reader killed, a pipe broken) is asked again from where it
stopped, unless the file on the box now ends there (then it is short: the size check names it).
A lost connection stops every stream; what each piece holds is saved either way, and the next
call goes on from there."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_server import portable_io
from mcp_server.errors import TransportError
from mcp_server.hosts.base import Host
from mcp_server.verify.artifacts.spans import CHUNK, STREAMS, Span, SpanPlan

T = TypeVar("T")
Progress = Callable[[int, int, str], Awaitable[None]]
RETRIES = 3  # times one piece may end early (the box's file still longer) before the call gives up
CHECKPOINT_S = 2.0  # a split file's plan is saved (after its bytes are synced) at most this often


@dataclass
class Counts:
    """What this process has done to pulled bytes: how the tests and benchmarks prove 'once'."""

    hashed: int = 0  # bytes fed to a file's running hash (all of them, wherever they were read)
    read_back: int = 0  # of those, bytes read from the partial: a piece received ahead of the hash
    retries: int = 0  # streams the box ended early that were asked again
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, hashed: int = 0, read_back: int = 0, retries: int = 0) -> None:
        with self.lock:  # the hashing threads of files pulled at once
            self.hashed += hashed
            self.read_back += read_back
            self.retries += retries


COUNTS = Counts()


@dataclass
class Meter:
    """Bytes of a transfer accounted for (held or received), told to the client as they arrive."""

    done: int
    total: int
    progress: Progress | None

    async def add(self, n: int, label: str) -> None:
        self.done += n
        if self.progress:
            await self.progress(self.done, self.total, label)


@dataclass(frozen=True)
class Got:
    finished: bool  # every piece arrived, or the box's file ended early; False: stopped in time
    size: int  # bytes from the start without a gap (all of the file when it is complete)
    held: int  # bytes held in all pieces
    digest: str  # sha256 of the first `size` bytes


async def together(coros: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run `coros` at once; the first error (or a cancellation) stops the rest before it is raised."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Receiver:
    """One file's transfer in one call: its streams, and the disk side they feed."""

    def __init__(self, host: Host, remote: str, fd: int, plan: SpanPlan, h: hashlib._Hash,
                 stop: Callable[[], bool], on_bytes: Callable[[int], Awaitable[None]],
                 save: Callable[[SpanPlan], None] | None) -> None:
        self.host, self.remote, self.plan, self.stop, self.on_bytes = host, remote, plan, stop, on_bytes
        self.disk = _Disk(fd, plan, h, save)
        self.short = False
        self.settled = False
        self.sent = [s.at for s in plan.spans]  # per piece: where its bytes queued for writing end
        self.todo: Iterator[int] = iter([k for k, s in enumerate(plan.spans) if not s.done])

    async def run(self) -> Got:
        disk = _thread(self.disk.run)  # started now: the thread owns the descriptor and closes it
        try:
            n = min(STREAMS, sum(1 for s in self.plan.spans if not s.done))
            await together([self._stream() for _ in range(n)])
        finally:
            self.disk.q.put(None)
            await asyncio.shield(disk)
            self.settled = True  # every queued byte is written and hashed, and the plan saved
        complete = all(s.done for s in self.plan.spans)
        return Got(finished=complete or self.short, size=self.disk.hashed, held=self.plan.held(),
                   digest=self.disk.h.hexdigest())

    async def _stream(self) -> None:
        for k in self.todo:  # shared by the streams: each piece is taken once, in file order
            if self.stop() or self.short:
                return
            await self._piece(k, self.plan.spans[k])

    async def _piece(self, k: int, span: Span) -> None:
        """Receive one piece, asking again where the box ended it early."""
        tries = 0
        while self.sent[k] < span.end and not self.stop():
            failed: TransportError | None = None
            try:
                await self._read(k, span.end)
            except TransportError as exc:
                if exc.exit_status is None:  # the connection, not the stream: the next call resumes
                    raise
                failed = exc  # the box's reader ended with an error (killed, a broken pipe)
            if self.sent[k] >= span.end or self.stop():
                return
            found = await self.host.stat(self.remote)
            if found is None or found.size <= self.sent[k]:  # the file on the box is shorter than the manifest
                self.short = True
                return
            tries += 1
            COUNTS.add(retries=1)
            if tries > RETRIES:
                raise failed or TransportError(
                    "the box ended the file's stream early, again and again", host=self.host.name, path=self.remote,
                    next_step="call verify_artifacts again: the bytes received so far are kept, not sent again")

    async def _read(self, k: int, end: int) -> None:
        """One stream of piece `k` from what is queued of it until `end`, the stream's end or the deadline."""
        # The last piece reads to the end of the file: one process on the box, not `tail | head`.
        length = None if end == self.plan.size else end - self.sent[k]
        stream = self.host.read_stream(self.remote, self.sent[k], CHUNK, length=length)
        try:
            async for chunk in stream:
                await self._put(k, chunk[: end - self.sent[k]])
                if self.sent[k] >= end or self.stop():
                    break
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:  # release the channel now, not when the stream is collected
                await aclose()

    async def _put(self, k: int, chunk: bytes) -> None:
        while self.disk.q.full() or self.disk.broken is not None:
            if self.disk.broken is not None:
                raise self.disk.broken
            await asyncio.sleep(0.001)
        self.disk.q.put_nowait((k, chunk))
        self.sent[k] += len(chunk)
        await self.on_bytes(len(chunk))


class _Disk:
    """The partial file's side, in threads: one writes chunks at their offsets and counts them in
    the plan; the hash follows in file order (in the writing thread itself for a file of one piece,
    whose chunks always arrive at the hash's edge). The writing thread owns the file descriptor:
    it closes it only after the hash has finished with it, even when the call is cancelled."""

    def __init__(self, fd: int, plan: SpanPlan, h: hashlib._Hash, save: Callable[[SpanPlan], None] | None) -> None:
        self.fd, self.plan, self.spans, self.h, self.save = fd, plan, plan.spans, h, save
        self.hashed = plan.frontier()
        self.edge = next((k for k, s in enumerate(self.spans) if not s.done), len(self.spans) - 1)
        self.q: queue.Queue[tuple[int, bytes] | None] = queue.Queue(maxsize=16)
        # Written chunks for the hashing thread: bounded, so a hash slower than the link slows the streams.
        self.hq: queue.Queue[tuple[int, bytes] | None] = queue.Queue(maxsize=64)
        self.failed: BaseException | None = None  # the hashing thread's error
        self.broken: BaseException | None = None  # the writing thread's (a full disk): the streams stop
        self.saved_at = time.monotonic()

    def run(self) -> None:
        """The writing thread (with a hashing thread beside it for a file of several pieces)."""
        hasher = threading.Thread(target=self._hash, name="rgt-pull-hash") if self.plan.split() else None
        try:
            if hasher is not None:
                hasher.start()
            self._write(inline=hasher is None)
        except BaseException as exc:
            self.broken = exc
            while self.q.get() is not None:  # never leave the event loop blocked on a full queue
                pass
            raise
        finally:
            if hasher is not None:
                self.hq.put(None)
                hasher.join()
            try:
                os.fsync(self.fd)
                if self.save is not None:
                    self.save(self.plan)
            finally:
                os.close(self.fd)
        if self.failed is not None:
            raise self.failed

    def _write(self, inline: bool) -> None:
        while (item := self.q.get()) is not None:
            k, chunk = item
            span = self.spans[k]
            off = span.at
            _pwrite(self.fd, chunk, off)
            span.held += len(chunk)
            if inline:
                self._feed(chunk)
            else:
                self.hq.put((off, chunk))
            if self.save is not None and time.monotonic() - self.saved_at >= CHECKPOINT_S:
                portable_io.datasync(self.fd)  # the plan never counts a byte that is not on disk
                self.save(self.plan)
                self.saved_at = time.monotonic()

    def _hash(self) -> None:
        try:
            self._advance()
            while (item := self.hq.get()) is not None:
                off, chunk = item
                if off == self.hashed:  # at the edge: from memory; behind it: already read back; ahead: later
                    self._feed(chunk)
                    self._advance()
            self._advance()
        except BaseException as exc:  # told by the writing thread, which outlives this one
            self.failed = exc
            while self.hq.get() is not None:  # keep the writer from blocking on a full queue
                pass

    def _advance(self) -> None:
        """Past a finished piece, hash what the next one already holds, from disk."""
        while self.hashed >= self.spans[self.edge].end and self.edge + 1 < len(self.spans):
            self.edge += 1
            upto = self.spans[self.edge].at
            while self.hashed < upto:
                data = portable_io.pread(self.fd, min(CHUNK, upto - self.hashed), self.hashed)
                if not data:
                    raise OSError(f"the partial file ends before a piece it holds (at byte {self.hashed})")
                COUNTS.add(read_back=len(data))
                self._feed(data)

    def _feed(self, data: bytes) -> None:
        self.h.update(data)
        self.hashed += len(data)
        COUNTS.add(hashed=len(data))


def _thread(fn: Callable[[], None]) -> asyncio.Future[None]:
    """Run `fn` in a thread of its own, not the loop's shared executor: a transfer holds its thread
    for as long as it lasts, and a few pulls at once must not starve every other `to_thread`."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def tell(exc: BaseException | None) -> None:
        if done.done():
            return
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)

    def target() -> None:
        failed: BaseException | None = None
        try:
            fn()
        except BaseException as exc:
            failed = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is left to tell
            loop.call_soon_threadsafe(tell, failed)

    threading.Thread(target=target, name="rgt-pull-write", daemon=True).start()
    return done


def _pwrite(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = portable_io.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n

