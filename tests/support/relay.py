"""A TCP relay that delays every chunk: a far link on loopback (benchmarks and the tests of what
round trips cost off loopback)."""

from __future__ import annotations

import asyncio


class DelayedLink:
    """A TCP relay to 127.0.0.1:`port` that holds every chunk for `one_way_s` in each direction
    (delivered in order, pipelined): a link with a real round-trip time of twice that, to measure
    what round trips cost off loopback."""

    def __init__(self, port: int, one_way_s: float) -> None:
        self.target, self.one_way_s, self.port = port, one_way_s, 0
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._relays:
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._relays.add(task)
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target)
        try:
            await asyncio.gather(self._pump(reader, up_w), self._pump(up_r, writer), return_exceptions=True)
        except asyncio.CancelledError:
            writer.close()
            up_w.close()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def deliver() -> None:
            while (item := await queue.get()) is not None:
                await asyncio.sleep(max(0.0, item[0] - loop.time()))
                dst.write(item[1])
                await dst.drain()
            dst.close()

        task = asyncio.create_task(deliver())
        while data := await src.read(65536):
            queue.put_nowait((loop.time() + self.one_way_s, data))
        queue.put_nowait(None)
        await task
