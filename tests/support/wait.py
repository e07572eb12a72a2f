"""Polling with a deadline: the one way tests wait for something to happen."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(
    check: Callable[[], T | Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"
) -> T:
    """Call `check` until it returns something truthy and return that; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def until_sync(check: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> T:
    """The same for code that is not async (fixtures, threads)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
