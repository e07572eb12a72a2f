"""Every tool refuses an argument name it does not have. The SDK's argument models drop unknown
names without a word, so a misspelled optional argument (`min_age_sec` for `min_age_s`) would run
the call on the default it meant to change. One check wraps the tools/call handler, for every
tool: the unknown names (never their values), the valid ones, and the closest match."""

from __future__ import annotations

import difflib
import json
from typing import Any

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.context import HandlerResult, ServerRequestContext

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.redact import Redactor
from mcp_server.tools._common import coded_message, shown_key
from mcp_server.tools._unquoted import unquote_arguments

Schema = dict[str, Any]
MAX_NAMED = 5  # unknown names shown in one refusal; the rest are counted


def model_fields(prop: Schema, defs: Schema) -> list[str] | None:
    """The field names of an argument that is one object model (an optional one too), else None:
    a union of several shapes or a free-form map has no one list of names."""
    variants = prop.get("anyOf")
    if isinstance(variants, list):
        rest = [v for v in variants if v != {"type": "null"}]
        if len(rest) != 1:
            return None
        prop = rest[0]
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        prop = defs.get(ref.removeprefix("#/$defs/"), {})
    fields = prop.get("properties")
    if not isinstance(fields, dict) or prop.get("additionalProperties") not in (None, False):
        return None
    return list(fields)


def _named(key: object, valid: list[str], prefix: str = "") -> str:
    """One unknown name as a refusal shows it, with the valid name it most likely meant."""
    shown = shown_key(key)
    close = difflib.get_close_matches(shown, valid, n=1) if shown != "<key>" else []
    return f"{prefix}{shown}" + (f" (did you mean {prefix}{close[0]}?)" if close else "")


def _as_object(value: object) -> object:
    """A nested object as the SDK will read it: clients may send one as a JSON string."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def unknown_names(arguments: dict[str, Any], schema: Schema) -> tuple[list[str], list[str]]:
    """The unknown argument names (`min_age_sec`, one level into an object argument
    `expect_gpu.nmae`) as shown, and the valid names of each object that had one."""
    props: Schema = schema.get("properties") or {}
    defs: Schema = schema.get("$defs") or {}
    valid = list(props)
    found = [_named(k, valid) for k in arguments if k not in props]
    takes: list[str] = []
    for name, value in arguments.items():
        fields = model_fields(props[name], defs) if name in props and isinstance(props[name], dict) else None
        nested = _as_object(value)
        if fields is None or not isinstance(nested, dict):
            continue
        extra = [_named(k, fields, f"{name}.") for k in nested if k not in fields]
        if extra:
            found += extra
            takes.append(f"{name} takes {', '.join(fields)}")
    return found, takes


def refusal(tool: str, arguments: dict[str, Any], schema: Schema) -> InputError | None:
    """The error for a call with names `tool` does not take; None when every name is known."""
    found, takes = unknown_names(arguments, schema)
    if not found:
        return None
    shown = "; ".join(found[:MAX_NAMED]) + (f"; and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else "")
    valid = ", ".join(schema.get("properties") or {}) or "none"
    plural = "s" if len(found) > 1 else ""
    return InputError(
        f"unknown argument{plural} for {tool}: {shown}; the call was not run. "
        f"{tool} takes: {valid}" + "".join(f". {t}" for t in takes),
        next_step=f"call {tool} again with the right names (schemas://tools/{tool} has each one's type)")


def _unquoted(result: HandlerResult, arguments: dict[str, Any]) -> HandlerResult:
    """An error result's text without the caller's values that could carry text (_unquoted.py)."""
    if not isinstance(result, types.CallToolResult) or not result.is_error or not arguments:
        return result
    content = [c.model_copy(update={"text": unquote_arguments(c.text, arguments)})
               if isinstance(c, types.TextContent) else c for c in result.content]
    return result.model_copy(update={"content": content})


def register(server: MCPServer) -> None:
    """Wrap the tools/call handler with the check, as the SDK wraps it for an extension's
    interceptor: after the handshake gate and the params' validation, and inside the envelope
    pass, so a refusal is shaped like any tool result on every protocol version."""
    lowlevel = server._lowlevel_server  # the handler table: MCPServer publishes no setter for it
    entry = lowlevel.get_request_handler("tools/call")
    if entry is None:
        raise RuntimeError("the SDK registered no tools/call handler to wrap")
    inner = entry.handler
    schemas: dict[str, Schema] = {}

    async def checked(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> HandlerResult:
        if params.name not in schemas:
            schemas.update({t.name: t.input_schema for t in await server.list_tools()})
        schema = schemas.get(params.name)
        error = refusal(params.name, params.arguments or {}, schema) if schema is not None else None
        if error is None:
            return _unquoted(await inner(ctx, params), params.arguments or {})
        app = ctx.lifespan_context
        text = coded_message(error, app.redactor if isinstance(app, App) else Redactor())
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"Error executing tool "
                                                                                  f"{params.name}: {text}")],
                                    is_error=True)

    lowlevel.add_request_handler("tools/call", types.CallToolRequestParams, checked)
