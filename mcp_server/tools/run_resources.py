"""Runs as resources: runs://{host}/{run_id} (status JSON) and runs://{host}/{run_id}/log (the
bounded log tail), read on demand. A client that subscribes to them (`subscriptions/listen`)
gets a resource-updated event when the run changes: `watch_subscriptions` sees each listen
stream open and close and tells the App's watchers which runs to poll (run/jobs/watch.py)."""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from mcp_server.app import App
from mcp_server.errors import NotFoundError, RgtError
from mcp_server.run.jobs.runview import read_log, run_view
from mcp_server.tools._common import app_of, coded_message


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
