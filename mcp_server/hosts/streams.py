"""Reading a command's output streams with a cap, the same for local pipes and SSH channels."""

from __future__ import annotations

import contextlib
from typing import Protocol

from mcp_server.hosts.commands import PID_MARKER


class ByteReader(Protocol):
    """What both asyncio.StreamReader and an asyncssh channel reader offer."""

    async def read(self, n: int = -1) -> bytes: ...


class LineReader(Protocol):
    async def readline(self) -> bytes: ...


async def read_capped(stream: ByteReader, cap: int) -> tuple[bytes, bool]:
    """Read a stream to EOF keeping at most `cap` bytes (the rest is drained)."""
    kept = bytearray()
    truncated = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            truncated = True
    return bytes(kept), truncated


async def read_stderr_and_pgid(stream: LineReader, pgid: list[int], cap: int) -> bytes:
    """Collect stderr (at most `cap` bytes), lifting out the wrapper's process-group line
    (see commands.remote_wrapper) into `pgid` as soon as it arrives."""
    kept = bytearray()
    while line := await stream.readline():
        if not pgid and line.startswith(PID_MARKER):
            with contextlib.suppress(ValueError):
                pgid.append(int(line[len(PID_MARKER):].strip()))
            continue
        if len(kept) < cap:
            kept += line[: cap - len(kept)]
    return bytes(kept)
