"""What a client reads on every session and after every call, kept small: the tool list with
lean schemas and each description's first paragraph, results whose text is a short reading with
links to the resources they name, and every tool's full schemas as a resource."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from mcp_server.tools._common import MAX_ERROR_CHARS
from mcp_server.tools._lean import lean_input, lean_output
from mcp_server.tools._summary import summarize, uris
from mcp_server.tools.protocol import coded, no_such_tool

MAX_LINKS = 8
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


def lean_result(result: dict[str, Any], tool: str = "") -> dict[str, Any]:
    """A tools/call result (wire form) whose text is the summary of its structured content instead
    of a JSON copy, with a link per resource it names. A tool that wrote its own text (plots,
    inspect) keeps it; errors are left alone."""
    data = result.get("structuredContent")
    if result.get("isError") or not isinstance(data, dict):
        return result
    content = list(result.get("content") or [])
    first = content[0] if content else None
    if isinstance(first, dict) and first.get("type") == "text" and str(first.get("text", "")).lstrip().startswith("{"):
        content[0] = {**first, "text": summarize(data, SUMMARY_DROP.get(tool, frozenset()))}
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


def _middleware(json_text: bool) -> Any:
    published: dict[str, dict[str, Any]] = {}

    async def lean_surface(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if ctx.method == "tools/list" and isinstance(result.get("tools"), list):
            tools = [published.setdefault(str(t.get("name")), lean_tool(t)) for t in result["tools"]]
            return {**result, "tools": tools}
        if ctx.method == "tools/call":
            result = coded_validation(result)
            return result if json_text else lean_result(result, str((ctx.params or {}).get("name", "")))
        return result

    return lean_surface


def register(server: MCPServer) -> None:
    server.middleware.append(_middleware(os.environ.get("RGT_RESULT_TEXT", "summary") == "json"))

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
                           "outputSchema": tool.output_schema}, indent=1)
