"""What a client reads on every session and after every call, kept small: the tool list with
lean schemas and each description's first paragraph, results whose structured content fits the
call's byte budget (_bounded: cut, and said so, whatever the box printed) and whose text is a short
reading with links to the resources they name, and every tool's full schemas as a resource."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from mcp_server.errors import RgtError
from mcp_server.settings import OUTPUT_CAP_BYTES
from mcp_server.tools._bounded import bound_structured, bounded_schema, budget, wire_size
from mcp_server.tools._common import MAX_ERROR_CHARS
from mcp_server.tools._lean import lean_input, lean_output
from mcp_server.tools._summary import cut_note, summarize, uris
from mcp_server.tools.protocol import coded, no_such_tool

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

MAX_LINKS = 8
NOTE_ROOM = 2000  # bytes a tool's own text leaves for the line saying its structured result was cut
# Per tool, fields a reading of its result can do without (they stay in the structured result).
SUMMARY_DROP: dict[str, frozenset[str]] = {
    "audit_box": frozenset({"mounts", "profile"}),
    "tail_logs": frozenset({"path", "next_offset"}),
    "launch_detached": frozenset({"log_path", "tmux_session"}),  # the log is <run_dir>/log
    "verify_artifacts": frozenset({"manifest", "bytes_transferred"}),
}
SCHEMAS = "schemas://tools/{name}"


def first_paragraph(text: str | None) -> str:
    return (text or "").strip().split("\n\n", 1)[0].strip()


def lean_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """One tool of tools/list (wire form) as published: lean schemas, the description's first
    paragraph; everything else (name, title, annotations) as it was."""
    lean = {**tool, "description": first_paragraph(tool.get("description")),
            "inputSchema": lean_input(tool.get("inputSchema") or {"type": "object"})}
    if tool.get("outputSchema") is not None:
        lean["outputSchema"] = lean_output(tool["outputSchema"])
    return lean


def _link(uri: str) -> dict[str, Any]:
    return {"type": "resource_link", "uri": uri, "name": uri.split("://", 1)[1]}


def local_files(data: dict[str, Any]) -> list[str]:
    """The local files a finished verification names, as file:// URIs: its record
    (PULL_VERIFIED.json) and the folder of pulled copies, so a client can open what was just
    verified. The folder, not each file: a link per file would cost more than the rest of the result."""
    if not data.get("done") or not isinstance(data.get("verified_path"), str):
        return []
    paths = [data["verified_path"], data.get("dest")]
    return [Path(p).as_uri() for p in paths if isinstance(p, str) and os.path.isabs(p)]


def capped_text(text: str, max_bytes: int = OUTPUT_CAP_BYTES) -> str:
    """`text` within `max_bytes` (UTF-8), with a note of how much was cut."""
    raw = text.encode()
    if len(raw) <= max_bytes:
        return text
    kept = raw[:max_bytes - 100].decode(errors="ignore")
    return f"{kept}\n… {len(raw) - len(kept.encode())} more bytes cut"


def _is_json_copy(block: Any) -> bool:
    """The first content block is the SDK's JSON copy of the structured result (not a tool's own text)."""
    return (isinstance(block, dict) and block.get("type") == "text"
            and str(block.get("text", "")).lstrip().startswith("{"))


def too_large(result: dict[str, Any], tool: str, limit: int) -> dict[str, Any]:
    """The error a result gets that no cut brings within its budget (nothing the model could use)."""
    text = coded(RgtError(f"the result is over {limit} bytes even with its lists and strings cut short",
                          next_step="ask for less: a narrower filter, a smaller limit or window, fewer hosts"))
    body = {k: v for k, v in result.items() if k != "structuredContent"}
    return {**body, "content": [{"type": "text", "text": f"Error executing tool {tool}: {text}"}], "isError": True}


def bounded_call(result: dict[str, Any], tool: str, limit: int,
                 valid: Callable[[dict[str, Any]], bool] | None) -> dict[str, Any]:
    """A tools/call result (wire form) whose structured content fits `limit` (see _bounded; with
    `valid`, the tool's output schema, when it does not fit yet), with its text saying the same:
    a JSON copy of what was kept, or a tool's own text with a line saying what was cut."""
    data = result.get("structuredContent")
    if result.get("isError") or not isinstance(data, dict):
        return result
    kept = data if valid is None else bound_structured(data, limit, valid)
    if kept is None:
        return too_large(result, tool, limit)
    content = list(result.get("content") or [])
    first = content[0] if content else None
    if isinstance(first, dict) and _is_json_copy(first):
        if kept is not data or len(str(first.get("text", "")).encode()) > limit:
            content[0] = {**first, "text": json.dumps(kept, ensure_ascii=False, separators=(",", ":"))}
    elif kept is not data and isinstance(first, dict) and first.get("type") == "text":
        note = cut_note(kept) or "truncated: lists or strings cut to keep the result small"
        own = capped_text(str(first.get("text", "")), OUTPUT_CAP_BYTES - NOTE_ROOM)
        content[0] = {**first, "text": f"{own}\n{note}"}
    return {**result, "structuredContent": kept, "content": content}


def lean_result(result: dict[str, Any], tool: str = "") -> dict[str, Any]:
    """A tools/call result (wire form) whose text is the summary of its structured content instead
    of a JSON copy, with a link per resource it names. A tool that wrote its own text (plots,
    inspect) keeps it; errors are left alone."""
    data = result.get("structuredContent")
    if result.get("isError") or not isinstance(data, dict):
        return result
    content = list(result.get("content") or [])
    first = content[0] if content else None
    if isinstance(first, dict) and _is_json_copy(first):
        content[0] = {**first, "text": summarize(data, SUMMARY_DROP.get(tool, frozenset()))}
    elif isinstance(first, dict) and first.get("type") == "text":
        content[0] = {**first, "text": capped_text(str(first.get("text", "")))}
    content.extend(_link(u) for u in uris(data)[:MAX_LINKS] + local_files(data))
    return {**result, "content": content}


_VALIDATION = re.compile(r"^Error executing tool (?P<tool>\w+): \d+ validation errors? for \w+\n(?P<body>.*)", re.S)
# What to do when a tool's one required argument is missing (it comes from another tool).
MISSING_HINTS = {("teardown", "token"): "call plan_teardown first: it returns the plan and the token teardown needs"}


_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _shown_path(path: str) -> str:
    """pydantic's field path with every segment that is not a plain name or index shown as <key>:
    a map key is the caller's input, and an error never quotes input back."""
    return ".".join(seg if _PLAIN_SEGMENT.fullmatch(seg) else "<key>" for seg in path.split("."))


def coded_validation(result: dict[str, Any]) -> dict[str, Any]:
    """An argument the SDK refused before the tool ran (pydantic's own message) as our coded
    BAD_INPUT error: each field with what is wrong, never the value given, and the next step."""
    content = list(result.get("content") or [])
    first = content[0] if content else None
    m = _VALIDATION.match(str(first.get("text", ""))) if isinstance(first, dict) else None
    if not result.get("isError") or m is None or not isinstance(first, dict):
        return result
    tool, problems, field = m["tool"], [], ""
    for line in m["body"].splitlines():  # "field" then "  message [type=...]" then "    For further ..."
        if not line.startswith(" "):
            field = _shown_path(line.strip())
        elif not line.startswith("    ") and field:
            problems.append(f"{field}: {line.strip().split(' [type=')[0]}")
    problems = problems[:5]
    hint = next((MISSING_HINTS[(tool, p.split(":")[0])] for p in problems if (tool, p.split(":")[0]) in MISSING_HINTS),
                f"see the tool's arguments (schemas://tools/{tool})")
    text = f"Error executing tool {tool}: [BAD_INPUT] the arguments do not fit {tool}: {'; '.join(problems)}. " \
           f"Next: {hint}"
    return {**result, "content": [{**first, "text": text[:MAX_ERROR_CHARS]}, *content[1:]]}


def _middleware(server: MCPServer, json_text: bool) -> Any:
    published: dict[str, dict[str, Any]] = {}
    validators: dict[str, Draft202012Validator | None] = {}

    async def valid_for(tool: str) -> Callable[[dict[str, Any]], bool]:
        """Whether a cut result still fits the tool's full output schema (read once, when first needed)."""
        if not validators:
            from jsonschema import Draft202012Validator  # ~50 ms of imports a start does not need

            for t in await server.list_tools():
                schema = bounded_schema(t.output_schema)
                validators[t.name] = Draft202012Validator(schema) if schema else None
        found = validators.get(tool)
        return (lambda _: True) if found is None else found.is_valid

    async def lean_surface(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if ctx.method == "tools/list" and isinstance(result.get("tools"), list):
            tools = [published.setdefault(str(t.get("name")), lean_tool(t)) for t in result["tools"]]
            return {**result, "tools": tools}
        if ctx.method == "tools/call":
            params = ctx.params or {}
            tool = str(params.get("name", ""))
            result = coded_validation(result)
            data = result.get("structuredContent")
            if isinstance(data, dict) and not result.get("isError"):
                args = params.get("arguments")
                limit = budget(args if isinstance(args, dict) else None)
                result = bounded_call(result, tool, limit, await valid_for(tool) if wire_size(data) > limit else None)
            return result if json_text else lean_result(result, tool)
        return result

    return lean_surface


def register(server: MCPServer) -> None:
    server.middleware.append(_middleware(server, os.environ.get("RGT_RESULT_TEXT", "summary") == "json"))

    @server.resource(SCHEMAS, name="tool-schemas", title="A tool's full input and output JSON Schemas",
                     mime_type="application/json",
                     description="the complete schemas and description of one tool (tools/list publishes lean ones)")
    async def tool_schemas(name: str) -> str:
        tools = await server.list_tools()
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:  # not found (-32602), as runs:// answers an unknown run
            raise ResourceNotFoundError(coded(no_such_tool(name, [t.name for t in tools],
                                                           "read schemas://tools/<name> with one of these")))
        return json.dumps({"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema,
                           "outputSchema": bounded_schema(tool.output_schema)}, indent=1)
