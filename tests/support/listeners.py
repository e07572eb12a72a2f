"""A TCP port that accepts and never sends a byte: what a proxy's dead high port looks like to SSH
(the connection opens, no banner comes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


@asynccontextmanager
async def silent_port() -> AsyncIterator[int]:
    """The port of a loopback listener that holds every connection open without a word."""
    release = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        release.set()
        server.close()
        await server.wait_closed()
