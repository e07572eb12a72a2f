"""Protocol answers the SDK leaves to the server: an unknown tool gets a coded error naming the
tools there are, a pagination cursor this server never issued is refused, and `initialize` and
`server/discover` declare one set of capabilities. Also the two reaches into the SDK that
handlers for methods MCPServer does not wrap need (its low-level server, a request's connection)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_server.errors import InputError, NotFoundError, RgtError
from mcp_server.redact import Redactor
from mcp_server.tools._common import coded_message

# Every list fits one page: no answer carries a nextCursor, so no cursor is ever valid.
PAGED_LISTS = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list"})
MAX_NAME_CHARS = 200  # a longer name is compared with nothing (difflib's cost grows with its square)


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The SDK's low-level server under MCPServer, where `add_request_handler` registers methods
    MCPServer does not wrap (resources/subscribe, logging/setLevel) and replaces server/discover.
    MCPServer 2.3 has no public accessor; its own in-memory transport reads the same attribute."""
    found = getattr(server, "_lowlevel_server", None)
    if not isinstance(found, Server):
        raise TypeError("this mcp SDK keeps no low-level Server under MCPServer: pin mcp>=2.3,<3")
    return found


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The connection a request came on: its standalone channel outlives the request (where a
    subscription's updates and the log go) and its exit stack runs when the client goes. The SDK
    hands handlers only the per-request session, which holds it."""
    found = getattr(ctx.session, "_connection", None)
    return found if isinstance(found, Connection) else None


def did_you_mean(given: object, valid: Iterable[str]) -> str:
    """` Did you mean <name>?` for the closest valid name, or nothing (the given text is never quoted)."""
    if not isinstance(given, str) or len(given) > MAX_NAME_CHARS:
        return ""
    close = difflib.get_close_matches(given, list(valid), n=1, cutoff=0.6)
    return f" Did you mean {close[0]}?" if close else ""


def coded(exc: RgtError) -> str:
    """An error's client text, `[CODE] ` first (these name no secret: the server's own names only)."""
    return coded_message(exc, Redactor())


def no_such_tool(given: object, names: list[str], next_step: str) -> NotFoundError:
    """A name that is no tool here, with the tools there are and the closest one."""
    return NotFoundError(f"this server has no tool by that name.{did_you_mean(given, names)} "
                         f"Its tools: {', '.join(sorted(names))}", next_step=next_step)


def unknown_tool(result: HandlerResult, given: object, names: list[str]) -> HandlerResult:
    """tools/call's error result for a name that is no tool here (the SDK's says only "Unknown
    tool: <the name>"), led by its code like every other tool error; its envelope kept."""
    if not isinstance(result, dict) or not result.get("isError"):
        return result
    exc = no_such_tool(given, names, "call one of these by its exact name (tools/list describes each)")
    return {**result, "content": [{"type": "text", "text": coded(exc)}]}


def _conformance(server: MCPServer[Any]) -> Any:
    async def conformance(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if ctx.method in PAGED_LISTS and params.get("cursor") is not None:
            exc = InputError(f"cursor is not one this server issued: {ctx.method} answers every item in one "
                             "page and never returns a nextCursor", next_step=f"call {ctx.method} without a cursor")
            raise MCPError(types.INVALID_PARAMS, coded(exc), data={"code": exc.code})
        if ctx.method == "tools/call" and isinstance(params.get("name"), str):
            names = [t.name for t in await server.list_tools()]
            if params["name"] not in names:
                return unknown_tool(await call_next(ctx), params["name"], names)
        return await call_next(ctx)

    return conformance


def declare_one_capability_set(server: MCPServer[Any]) -> None:
    """server/discover (the 2026-07-28 probe) declares what `initialize` does. The SDK's own
    answer derives `subscribe` and every `listChanged` from serving subscriptions/listen, while
    `initialize` derives them from the handlers: a 2025 client was told no subscriptions, a
    2026 one was told yes. Both now read the handlers: `subscribe` as resources/subscribe is
    served (on every version), and `listChanged` false: the lists change only with a release."""
    low = lowlevel(server)

    async def discover(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> types.DiscoverResult:
        return types.DiscoverResult(supported_versions=list(MODERN_PROTOCOL_VERSIONS),
                                    capabilities=low.get_capabilities(), instructions=low.instructions)

    low.add_request_handler("server/discover", types.RequestParams, discover)


def register(server: MCPServer[Any]) -> None:
    server.middleware.append(_conformance(server))
