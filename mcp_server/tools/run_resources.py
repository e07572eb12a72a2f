"""Runs as resources: runs://{host}/{run_id} (status JSON) and runs://{host}/{run_id}/log (the
bounded log tail), read on demand. A client that subscribes to them gets a resource-updated
event when the run changes, on every protocol version: on 2026-07-28 through a
`subscriptions/listen` stream (`watch_subscriptions` sees each stream open and close), on the
2025 versions through resources/subscribe and resources/unsubscribe (`Subscribers`, whose
subscriptions end with their connection). Both tell the App's watchers which runs to poll
(run/jobs/watch.py): one per host, polling only while someone is subscribed."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError

from mcp_server.app import App
from mcp_server.errors import NotFoundError, RgtError
from mcp_server.run.jobs.runview import read_log, run_view
from mcp_server.run.jobs.watch import parse_run_uri
from mcp_server.tools._common import app_of, coded_message
from mcp_server.tools.protocol import connection_of, lowlevel


async def _status(ctx: Context[Any, Any], host: str, run_id: str) -> str:
    app = app_of(ctx)
    try:
        spec = app.pool.spec(host)
        view = await run_view(await app.pool.host(spec), spec, run_id, app.redactor, host)
    except NotFoundError as exc:
        raise ResourceNotFoundError(coded_message(exc, app.redactor)) from exc
    except RgtError as exc:
        raise ResourceError(coded_message(exc, app.redactor)) from exc
    return view.model_dump_json(indent=1)


async def _log(ctx: Context[Any, Any], host: str, run_id: str) -> str:
    app = app_of(ctx)
    try:
        spec = app.pool.spec(host)
        tail = await read_log(await app.pool.host(spec), spec, run_id, app.redactor)
    except NotFoundError as exc:
        raise ResourceNotFoundError(coded_message(exc, app.redactor)) from exc
    except RgtError as exc:
        raise ResourceError(coded_message(exc, app.redactor)) from exc
    head = f"# {run_id} on {host}: {tail.state.status if tail.state else '?'}; bytes {tail.offset}..{tail.size}\n"
    return head + tail.text


def register(server: MCPServer) -> None:
    @server.resource("runs://{host}/{run_id}", name="run-status", title="A run's status",
                     description="One run as JSON: state, exit code, last log line, failure signatures, elapsed "
                                 "time and cost so far. host: 'local' or an inventory name; run_id from "
                                 "launch_detached or list_runs.", mime_type="application/json")
    async def run_status(host: str, run_id: str, ctx: Context) -> str:
        return await _status(ctx, host, run_id)

    @server.resource("runs://{host}/{run_id}/log", name="run-log", title="A run's log tail",
                     description="The last 64 KiB of a run's log (secrets masked), after a one-line header with "
                                 "its state and byte range; tail_logs pages the rest.", mime_type="text/plain")
    async def run_log(host: str, run_id: str, ctx: Context) -> str:
        return await _log(ctx, host, run_id)


def _listened_uris(params: Any) -> list[str]:
    """The resource URIs a raw `subscriptions/listen` request asks for."""
    notes = params.get("notifications") if isinstance(params, dict) else None
    uris = notes.get("resourceSubscriptions") if isinstance(notes, dict) else None
    return [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []


async def watch_subscriptions(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: while a listen stream asking for runs:// URIs is open, their host is watched.
    The stream is the request itself, so its end (client gone, cancelled) ends the watch."""
    if ctx.method != "subscriptions/listen":
        return await call_next(ctx)
    app = ctx.lifespan_context
    watched = app.watch.add(_listened_uris(ctx.params)) if isinstance(app, App) else []
    try:
        return await call_next(ctx)
    finally:
        if watched:
            app.watch.remove(watched)


class Subscribers:
    """resources/subscribe and resources/unsubscribe (the 2025 protocol versions): the URIs each
    connection subscribed to. A subscription to a run URI is watched while it lasts; each lasts
    until unsubscribed or until its connection closes. `notify` sends a changed URI's
    notifications/resources/updated to the connections subscribed to it."""

    def __init__(self) -> None:
        self._uris: dict[Connection, set[str]] = {}

    def serve(self, server: MCPServer) -> None:
        low = lowlevel(server)
        low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, self.subscribe)
        low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, self.unsubscribe)

    async def notify(self, uri: str) -> None:
        for conn, uris in list(self._uris.items()):
            if uri in uris:
                await conn.send_resource_updated(uri)  # best effort: a closed stream drops it

    async def subscribe(self, ctx: ServerRequestContext[Any, Any],
                        params: types.SubscribeRequestParams) -> types.EmptyResult:
        conn, app = _connection_and_app(ctx)
        _check_run_host(app, params.uri)
        uris = self._uris.get(conn)
        if uris is None:
            uris = self._uris[conn] = set()
            conn.exit_stack.push_async_callback(self._close, conn, app)
        if params.uri not in uris:
            uris.add(params.uri)
            app.watch.add([params.uri])
        return types.EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        conn, app = _connection_and_app(ctx)
        uris = self._uris.get(conn, set())
        if params.uri in uris:
            uris.discard(params.uri)
            app.watch.remove([params.uri])
        return types.EmptyResult()

    async def _close(self, conn: Connection, app: App) -> None:
        app.watch.remove(sorted(self._uris.pop(conn, set())))


def _connection_and_app(ctx: ServerRequestContext[Any, Any]) -> tuple[Connection, App]:
    conn, app = connection_of(ctx), ctx.lifespan_context
    if conn is None or not isinstance(app, App):
        raise MCPError(types.INTERNAL_ERROR, "this connection cannot carry resource updates; "
                       "subscribe with subscriptions/listen (protocol 2026-07-28) instead")
    return conn, app


def _check_run_host(app: App, uri: str) -> None:
    """A run URI's host is one a tool would accept (local, an inventory name, a valid ssh
    destination), or the subscription is refused (-32602) now, not left polling nothing."""
    parsed = parse_run_uri(uri)
    if parsed is None:
        return
    try:
        app.pool.spec(parsed[0])
    except RgtError as exc:
        raise MCPError(types.INVALID_PARAMS, coded_message(exc, app.redactor), data={"code": exc.code}) from exc
