"""build_server(settings) -> MCPServer. The lifespan owns the App (host pool + ledger)."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_server import __version__
from mcp_server.app import App
from mcp_server.paths.serving import serve_with, stop_serving
from mcp_server.settings import Settings
from mcp_server.tools import register_all
from mcp_server.tools._common import lone_surrogate_at
from mcp_server.tools._views import views_extension
from mcp_server.tools.protocol import declare_one_capability_set
from mcp_server.tools.run_resources import Subscribers, watch_subscriptions

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Run deep-learning experiments on GPU boxes you own or rent, verify the numbers are real, and
deliver them from one evidence layer. Start with audit_box on the box. Every `host` argument takes
"local" (this machine, the default), an inventory name, an ssh config alias or user@host[:port].
Reference pages are resources (references://..., profiles://<platform>); read the one a check or
finding routes you to. Destructive actions are two-phase: plan, then confirm with the token the
plan returned (plan_teardown, then teardown with its token, only on the user's explicit yes)."""


# The lists that change only with a new release (tools, prompts, reference pages, templates): a
# client may keep them an hour instead of asking again each session turn.
STATIC_LISTS: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=3_600_000, scope="public")
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list")}


# Why no OAuth metadata: the HTTP transport takes one static bearer token (RGT_HTTP_TOKEN, else the
# one generated into $RGT_HOME/http-token), and no authorization server exists to get it from. The
# SDK's resource-server setup would point every 401 (WWW-Authenticate resource_metadata) and a
# /.well-known/oauth-protected-resource document at this endpoint as the "authorization server",
# which serves no such metadata: a client that tries OAuth goes down a dead end instead of asking
# its user for the token. So nothing OAuth is advertised or routed, and the 401 says where the token is.
TOKEN_HINT = ("this server takes one static bearer token, not OAuth: send the header Authorization: Bearer "
              "<token>, the token being RGT_HTTP_TOKEN where the server runs, else the content of $RGT_HOME/http-token")


class TokenHint:
    """ASGI middleware: the SDK's 401 (a missing or wrong token) answered as a plain Bearer
    challenge whose error_description says how to send the token, and nothing OAuth."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = False

        async def relay(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message.get("status") == 401:
                refused = True
                body = json.dumps({"error": "invalid_token", "error_description": TOKEN_HINT}).encode()
                challenge = f'Bearer error="invalid_token", error_description="{TOKEN_HINT}"'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode())]})
                await send({"type": "http.response.body", "body": body})
            elif not refused:  # the SDK's own body of a refusal is replaced above
                await send(message)

        await self.app(scope, receive, relay if scope["type"] == "http" else send)


class RgtServer(MCPServer[App]):
    """MCPServer whose streamable HTTP app refuses a request without the token with TOKEN_HINT."""

    def streamable_http_app(self, *args: Any, **kwargs: Any) -> Starlette:
        app = super().streamable_http_app(*args, **kwargs)
        app.add_middleware(TokenHint)
        return app


class StaticToken:
    """The HTTP transport's bearer token check (the SDK's TokenVerifier): one token, compared in
    constant time."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.encode(), self._token.encode()):
            return None
        return AccessToken(token="bearer", client_id="remote-gpu-trainer-http", scopes=[])


def build_server(settings: Settings | None = None, *, http_token: str | None = None,
                 http_url: str | None = None, only_tool: str | None = None) -> MCPServer[App]:
    """The server; with `http_token` (and the URL it serves at) every HTTP request must carry
    `Authorization: Bearer <token>`; with `only_tool`, a server of that one tool (the CLI's call)."""
    settings = settings or Settings.from_env()

    bus = InMemorySubscriptionBus()
    subscribers = Subscribers()

    async def publish(uri: str) -> None:
        await bus.publish(ResourceUpdated(uri=uri))  # subscriptions/listen streams (2026-07-28)
        await subscribers.notify(uri)  # resources/subscribe (the 2025 versions)

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[App]) -> AsyncIterator[App]:
        app = App(settings, publish)
        serving = serve_with(settings)  # the path policy keeps this server's state folder out of reach
        log.info("remote-gpu-trainer %s: state in %s", __version__, settings.home)
        try:
            yield app
        finally:
            stop_serving(serving)
            await app.close()

    server: MCPServer[App] = RgtServer(
        "remote-gpu-trainer",
        title="Remote GPU Trainer",
        description="Runs, verifies and delivers deep-learning experiments on GPU boxes you own or rent.",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=settings.log_level,
        subscriptions=bus,
        token_verifier=StaticToken(http_token) if http_token else None,
        # issuer_url is a required field that the SDK reads only with an authorization-server
        # provider (none here); without resource_server_url no OAuth metadata is served (see TOKEN_HINT).
        auth=AuthSettings(issuer_url=http_url, resource_server_url=None) if http_token and http_url else None,
        cache_hints=STATIC_LISTS,
        extensions=[views_extension()],  # MCP Apps: the ui:// views bound tools name
    )
    register_all(server, only_tool)
    server.middleware.append(watch_subscriptions)
    subscribers.serve(server)
    declare_one_capability_set(server)
    return server


def _error(request_id: str | int | None, code: int, message: str, error_code: str | None = None) -> SessionMessage:
    error = (types.ErrorData(code=code, message=message, data={"code": error_code}) if error_code
             else types.ErrorData(code=code, message=message))
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _id_of(raw: object) -> str | int | None:
    got = raw.get("id") if isinstance(raw, dict) else None
    return got if isinstance(got, (str, int)) and not isinstance(got, bool) else None


def _with_lone_surrogate(line: object) -> tuple[dict[str, Any], str] | None:
    """The message and the field that the SDK's parser called not JSON because a string escapes
    a lone surrogate (`"\\udcff"`: valid JSON syntax, not valid text); None for any other line."""
    try:
        message = json.loads(line) if isinstance(line, str) else None
    except (ValueError, RecursionError):
        return None
    where = lone_surrogate_at(message) if isinstance(message, dict) else None
    return (message, where) if isinstance(message, dict) and where is not None else None


def _not_unicode_reply(message: dict[str, Any], where: str) -> SessionMessage | None:
    """A coded error for the request's own id, naming the field, so its caller is not left
    waiting; none for a notification (JSON-RPC answers none)."""
    log.warning("message on stdin with text that is not valid Unicode at %s; refused", where)
    if "id" not in message and "method" in message:
        return None
    code = types.INVALID_PARAMS if where.startswith("params") else types.INVALID_REQUEST
    return _error(_id_of(message), code, f"[BAD_INPUT] {where} is not valid Unicode text (a lone surrogate "
                  "escape such as \\udcff); the request was not run. Next: send it again as valid UTF-8 text",
                  "BAD_INPUT")


def malformed_reply(exc: Exception) -> SessionMessage | None:
    """The JSON-RPC error a line that is not a message gets (the SDK's stdio transport drops it
    silently, so a client waits forever): -32700 when it is not JSON, else -32600 with its id
    when it has a usable one. A string that is not valid Unicode gets a coded error with the
    request's id; a notification gets none."""
    code, what = types.INVALID_REQUEST, "not a JSON-RPC 2.0 message"
    request_id: str | int | None = None
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        invalid = next((e for e in errors if e.get("type") == "json_invalid"), None)
        if invalid is not None:
            found = _with_lone_surrogate(invalid.get("input"))
            if found is not None:
                return _not_unicode_reply(*found)
            code, what = types.PARSE_ERROR, "not valid JSON"
        else:
            request_id = _id_of(next((e.get("input") for e in errors if isinstance(e.get("input"), dict)), None))
    log.warning("malformed message on stdin: %s", what)
    return _error(request_id, code, f"{what}; ignored")


async def serve_stdio(server: MCPServer[App]) -> None:
    """Serve over stdio, answering a malformed line with a JSON-RPC error instead of silence."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:  # another SDK layout: its own transport, malformed lines unanswered
        await server.run_stdio_async()
        return
    async with stdio_server() as (read_stream, write_stream):
        to_server, from_wire = create_context_streams[SessionMessage | Exception](0)

        async def sort() -> None:
            async with to_server:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        reply = malformed_reply(item)
                        if reply is not None:
                            await write_stream.send(reply)
                    else:
                        await to_server.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sort)
            await lowlevel.run(from_wire, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()
