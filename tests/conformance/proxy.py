"""A loopback HTTP proxy that adds the server's bearer token to every request and passes
everything else through byte for byte: the conformance suite cannot send a token, and the suite's
DNS-rebinding scenario must reach the server's own Host/Origin check with the headers it sent.

One request per connection: the proxy rewrites only the request head (the token in, any
Authorization and keep-alive out, `Connection: close` added) and then pipes both directions
unchanged, so an SSE response streams through as the server writes it, and a client that hangs
up closes the server's side too."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

HEAD_LIMIT = 64 * 1024
DROPPED = (b"authorization", b"connection", b"keep-alive", b"proxy-connection")


def rewrite_head(head: bytes, token: str) -> bytes:
    """The request head with our token and `Connection: close`; the request line and every
    other header (Host and Origin included) exactly as the client sent them."""
    request_line, *headers = head.rstrip(b"\r\n").split(b"\r\n")
    kept = [h for h in headers if h.split(b":", 1)[0].strip().lower() not in DROPPED]
    added = [b"Authorization: Bearer " + token.encode(), b"Connection: close"]
    return b"\r\n".join([request_line, *kept, *added]) + b"\r\n\r\n"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, target_port: int,
                  token: str) -> None:
    try:
        head = await client_r.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        client_w.close()
        return
    try:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_w.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        client_w.close()
        return
    server_w.write(rewrite_head(head, token))
    upstream = asyncio.ensure_future(_pipe(client_r, server_w))
    try:
        await _pipe(server_r, client_w)
    finally:
        upstream.cancel()
        server_w.close()
        client_w.close()
        with contextlib.suppress(asyncio.CancelledError):
            await upstream


@contextlib.contextmanager
def running(target_port: int, token: str) -> Iterator[int]:
    """Serve the proxy on a free loopback port in a thread of its own; yields that port. On exit
    every open connection (an SSE stream the suite left open included) is cut."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    port: list[int] = []

    async def serve() -> None:
        handlers: set[asyncio.Task[None]] = set()

        async def accept(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            handlers.add(task)
            try:
                await _handle(r, w, target_port, token)
            finally:
                handlers.discard(task)

        server = await asyncio.start_server(accept, "127.0.0.1", 0, limit=HEAD_LIMIT)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        await stop.wait()
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name="conformance-proxy", daemon=True)
    thread.start()
    if not ready.wait(timeout=10):
        raise AssertionError("the conformance proxy did not start listening within 10 s")
    try:
        yield port[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()
