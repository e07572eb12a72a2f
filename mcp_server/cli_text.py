"""What the console commands `tools NAME`, `resources` and `read URI` print, built from what the
server publishes (a tool's full schema, the resource lists): plain functions of plain data, so
the console entry only fetches and prints."""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Iterable
from typing import Any

Schema = dict[str, Any]
PROG = "remote-gpu-trainer-mcp"
TOOLS_HINT = f"{PROG} tools NAME shows a tool's arguments and an example call"
MAX_SHOWN_FIELDS = 8  # an object argument with more fields is shown as `object`; its description names them

# Values a required argument gets in an example call: what a real call would send.
PLACEHOLDERS: dict[str, Any] = {
    "action": "stop",
    "token": "<token from plan_teardown>",
    "run_id": "<run id from list_runs>",
    "source": "./my-project",
    "project": "my-project",
    "dest": "/root/autodl-tmp/data",
    "query": "CUDA out of memory",
    "evidence": "EVIDENCE.json",
    "documents": ["paper/main.tex"],
    "cells": "sweep/*",
    "name": "sweep1",
    "command": "python train.py",
    "host": "local",
    "inputs": {"probe": "mde", "sd": 0.5, "n": 3, "claimed_effect": 0.4},
}
_BY_TYPE: dict[str, Any] = {"integer": 1, "number": 1.0, "boolean": True, "object": {}}
# Optional arguments an example still shows: without them the call does nothing useful.
EXAMPLE_ALSO: dict[str, tuple[str, ...]] = {
    "launch_detached": ("command",),
    "tail_logs": ("run_id",),
    "wait_for_run": ("run_id",),
    "verify_artifacts": ("run_id",),
    "plot_run": ("run_id",),
    "capsule": ("project", "path"),
}


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _deref(node: Schema, defs: Schema) -> Schema:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**defs.get(ref.removeprefix("#/$defs/"), {}), **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def type_name(node: Schema, defs: Schema) -> str:
    """A JSON Schema as a short type: `string`, `list of string`, `stop|terminate`, `map of string`,
    `object{name, count}`; an optional's `null` is left out (optional says it)."""
    node = _deref(node, defs)
    if "enum" in node:
        return "|".join(str(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    variants = node.get("oneOf") or node.get("anyOf")
    if isinstance(variants, list):
        tag = (node.get("discriminator") or {}).get("propertyName")
        if tag:
            return f"object, by {tag}"
        return " or ".join(type_name(v, defs) for v in variants if v != {"type": "null"})
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {type_name(node.get('items') or {}, defs)}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {type_name(node['additionalProperties'], defs)}"
    fields = node.get("properties")
    if isinstance(fields, dict) and fields:
        return "object{" + ", ".join(fields) + "}" if len(fields) <= MAX_SHOWN_FIELDS else "object"
    return str(kind)


def _placeholder(name: str, node: Schema, defs: Schema) -> Any:
    node = _deref(node, defs)
    if name in PLACEHOLDERS and PLACEHOLDERS[name] in node.get("enum", [PLACEHOLDERS[name]]):
        return PLACEHOLDERS[name]  # unless the tool's own choices (an enum) do not hold it
    if node.get("enum"):
        return node["enum"][0]
    kind = node.get("type")
    if kind == "array":
        return [f"<{name}>"]
    return _BY_TYPE.get(str(kind), f"<{name}>")


def example_arguments(tool: str, schema: Schema) -> dict[str, Any]:
    """The required arguments of a tool (and any EXAMPLE_ALSO names), each with a realistic placeholder."""
    props: Schema = schema.get("properties") or {}
    defs: Schema = schema.get("$defs") or {}
    names = [*(schema.get("required") or []), *(n for n in EXAMPLE_ALSO.get(tool, ()) if n in props)]
    return {n: _placeholder(n, props.get(n) or {}, defs) for n in dict.fromkeys(names)}


def example_call(tool: str, schema: Schema) -> str:
    args = example_arguments(tool, schema)
    return f"{PROG} call {tool}" + (f" '{json.dumps(args)}'" if args else "")


def _argument_rows(schema: Schema) -> list[tuple[str, str, str, str]]:
    props: Schema = schema.get("properties") or {}
    defs: Schema = schema.get("$defs") or {}
    required = set(schema.get("required") or [])
    rows = []
    for name, node in props.items():
        need = "required"
        if name not in required:
            default = node.get("default")
            need = "optional" if default is None else f"optional, default {json.dumps(default)}"
        first = (str(node.get("description") or "").strip().splitlines() or [""])[0]
        rows.append((name, type_name(node, defs), need, first))
    return rows


def tool_help(tool: str, title: str | None, description: str, schema: Schema) -> str:
    """`tools NAME`: the description, each argument (name, type, required or optional with its
    default, what it is), and an example call."""
    lines = [f"{tool}" + (f" — {title}" if title else ""), "", inspect.cleandoc(description), "", "arguments:"]
    rows = _argument_rows(schema)
    if not rows:
        lines.append("  (none)")
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + f"  {row[3]}")
    lines += ["", "example:", f"  {example_call(tool, schema)}",
              f"  (the full schemas: {PROG} read schemas://tools/{tool})"]
    return "\n".join(lines)


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0] + "://" if "://" in uri else uri


def unknown_resource(schemes: Iterable[str]) -> str:
    """The error for a URI no resource answers to (the URI itself is not repeated)."""
    return (f"no resource has that URI. The schemes are {', '.join(sorted(set(schemes)))}; "
            f"`{PROG} resources` lists every resource and URI template")


Listed = Iterable[tuple[str, str | None]]  # (URI or URI template, title)


def resource_lines(resources: Listed, templates: Listed) -> list[str]:
    """`resources`: each resource, then each URI template, one a line with its title."""
    fixed = sorted(resources)
    shaped = sorted(templates)
    width = max((len(u) for u, _ in [*fixed, *shaped]), default=0)
    lines = [f"{u.ljust(width)}  {t or ''}".rstrip() for u, t in fixed]
    lines += ["", "templates (fill in the {braces}):"] + [f"{u.ljust(width)}  {t or ''}".rstrip() for u, t in shaped]
    lines += ["", f"read one: {PROG} read URI"]
    return lines


def shown_text(text: str, mime: str | None, pretty: bool) -> str:
    """A resource's text as printed: JSON indented for a person (when `pretty`), else as served."""
    if not pretty or not (mime or "").endswith("json"):
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
