"""The logging capability: this server's log records (the `mcp_server` loggers) reach the client
as notifications/message, secrets masked by the App's Redactor. On the 2025 protocol versions a
connection opts in with logging/setLevel and gets every record at or above its level until it
closes; on 2026-07-28 a request opts in through its `_meta` log level and gets the records
logged while it ran, sent before its answer. stderr logging is untouched: this is one more
handler, and the server's own log level (RGT_LOG_LEVEL) still decides what is recorded at all."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_server.app import App
from mcp_server.redact import Redactor
from mcp_server.tools.protocol import connection_of, lowlevel

SOURCE = "mcp_server"  # the package's loggers; the SDK's and libraries' own records stay on stderr
MAX_CHARS = 16_000  # one record's text (a traceback included), cut beyond
BACKLOG = 256  # records waiting for a slow client; more are dropped, never blocking the server
# MCP's syslog levels on Python's scale (notice, alert and emergency have no Python name).
LEVELS: dict[types.LoggingLevel, int] = dict(zip(get_args(types.LoggingLevel), (10, 20, 25, 30, 40, 50, 60, 70),
                                                 strict=True))


def mcp_level(levelno: int) -> types.LoggingLevel:
    """The highest MCP level a Python level reaches (WARNING -> warning, 45 -> error)."""
    return max((name for name, n in LEVELS.items() if n <= levelno), key=LEVELS.__getitem__, default="debug")


def _payload(handler: logging.Handler, record: logging.LogRecord, redactor: Redactor) -> dict[str, Any]:
    text = redactor.scrub(handler.format(record))
    text = text if len(text) <= MAX_CHARS else f"{text[:MAX_CHARS]}… ({len(text) - MAX_CHARS} more characters cut)"
    return {"level": mcp_level(record.levelno), "logger": record.name, "data": text}


@dataclass
class _Connection:
    """One 2025-era connection that set a level: what it asked for and its sender."""

    conn: Connection
    threshold: int
    redactor: Redactor
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(BACKLOG))
    sender: asyncio.Task[None] | None = None

    def offer(self, payload: dict[str, Any]) -> None:
        """From any thread: queue one record, dropped when the client is BACKLOG behind."""
        def put() -> None:
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.put_nowait(payload)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is left to tell
            self.loop.call_soon_threadsafe(put)

    async def send(self) -> None:
        while True:
            await self.conn.notify("notifications/message", await self.queue.get())


@dataclass
class _Request:
    """One 2026-era request that asked for the log: its level and the records it has so far."""

    owner: ClientLog
    threshold: int
    redactor: Redactor
    records: list[dict[str, Any]] = field(default_factory=list)


_request: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("rgt_request_log", default=None)


class ClientLog(logging.Handler):
    """A logging handler on the `mcp_server` logger while anyone listens."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter("%(message)s"))
        self._connections: dict[Connection, _Connection] = {}
        self._requests = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            asked = _request.get()
            if (asked is not None and asked.owner is self and record.levelno >= asked.threshold
                    and len(asked.records) < BACKLOG):
                asked.records.append(_payload(self, record, asked.redactor))
            for c in list(self._connections.values()):
                if record.levelno >= c.threshold:
                    c.offer(_payload(self, record, c.redactor))
        except Exception:  # a log record must never break the code that logged it
            self.handleError(record)

    def _attach(self) -> None:
        logger = logging.getLogger(SOURCE)
        if self not in logger.handlers:
            logger.addHandler(self)

    def _detach_when_idle(self) -> None:
        if not self._connections and not self._requests:
            logging.getLogger(SOURCE).removeHandler(self)

    async def set_level(self, ctx: ServerRequestContext[Any, Any],
                        params: types.SetLevelRequestParams) -> types.EmptyResult:
        """logging/setLevel: this connection gets the records at or above `level` from now on."""
        conn, app = connection_of(ctx), ctx.lifespan_context
        if conn is None or not isinstance(app, App):
            raise MCPError(types.INTERNAL_ERROR, "this connection cannot carry log messages")
        known = self._connections.get(conn)
        if known is not None:
            known.threshold = LEVELS[params.level]
            return types.EmptyResult()
        c = _Connection(conn, LEVELS[params.level], app.redactor, asyncio.get_running_loop())
        c.sender = asyncio.create_task(c.send(), name="rgt-client-log")
        self._connections[conn] = c
        conn.exit_stack.push_async_callback(self._close, conn)
        self._attach()
        return types.EmptyResult()

    async def _close(self, conn: Connection) -> None:
        c = self._connections.pop(conn, None)
        self._detach_when_idle()
        if c is not None and c.sender is not None:
            c.sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await c.sender

    async def per_request(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: a 2026-07-28 request whose `_meta` asks for the log gets the records
        logged while it ran, as notifications/message on its own stream before its answer."""
        level = ctx.meta.get(types.LOG_LEVEL_META_KEY) if isinstance(ctx.meta, Mapping) else None
        app = ctx.lifespan_context
        if (ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or ctx.request_id is None
                or level not in LEVELS or not isinstance(app, App)):
            return await call_next(ctx)
        asked = _Request(self, LEVELS[level], app.redactor)
        token = _request.set(asked)
        self._requests += 1
        self._attach()
        try:
            result = await call_next(ctx)
        finally:
            _request.reset(token)
            self._requests -= 1
            self._detach_when_idle()
        for params in asked.records:  # an answer that is an error (raised) goes without them
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await ctx.session.send_notification(
                    types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams(**params)),
                    related_request_id=ctx.request_id)
        return result


def register(server: MCPServer) -> None:
    bridge = ClientLog()
    lowlevel(server).add_request_handler("logging/setLevel", types.SetLevelRequestParams, bridge.set_level)
    server.middleware.append(bridge.per_request)
