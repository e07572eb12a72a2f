"""Progress for long calls, without the MCP import: a tool adapter hands a domain function a
`Report` (progress, total, message); the domain calls it as work completes. `Monotone` wraps
one so values never go backwards and a failing report never fails the work; `ticking`
reports elapsed time while one long step (a single round trip) runs; `Counter` counts
finished items of a concurrent batch."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

Report = Callable[[float, float | None, str | None], Awaitable[None]]
log = logging.getLogger(__name__)


class Monotone:
    """Forward a report only when its value is above the last one sent (equal values with a new
    message are forwarded too); swallow and log a transport error: progress is advisory."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._last: float | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        async with self._lock:
            if self._last is not None and progress < self._last:
                return
            self._last = progress
            try:
                await self._report(progress, total, message)
            except Exception as exc:  # a closed stream must never fail the work being reported
                log.debug("progress report dropped: %s", exc)


class Counter:
    """Items done of a known total, reported as each finishes (in any order)."""

    def __init__(self, report: Report | None, total: int, what: str) -> None:
        self.report, self.total, self.what, self.done = report, total, what, 0

    async def finished(self, item: str) -> None:
        self.done += 1
        if self.report is not None:
            await self.report(self.done, self.total, f"{self.what} {self.done}/{self.total}: {item}")


@contextlib.asynccontextmanager
async def ticking(report: Report | None, total: float, message: str, interval: float = 1.0) -> AsyncIterator[None]:
    """Report elapsed seconds (capped just under `total`) every `interval` while the body runs."""
    if report is None:
        yield
        return
    start = time.monotonic()

    async def tick() -> None:
        while True:
            await asyncio.sleep(interval)
            elapsed = time.monotonic() - start
            value = min(elapsed, total * 0.99) if total else elapsed
            await report(value, total or None, f"{message} ({elapsed:.0f} s)")

    await report(0, total or None, message)
    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
