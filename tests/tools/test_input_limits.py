"""Security (denial of service, issue 20): every string a tool accepts has a length limit in its
full schema, and every list and map a count limit, so a new argument without one fails here. A
value past its limit is refused as BAD_INPUT naming the field, in a short reply that never quotes
the value, before the tool runs; the server keeps serving. Through a real MCP client, this machine
only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcp_server.limits import HOST_MAX, ID_MAX, PATH_MAX, PATTERN_MAX, VALUE_MAX

MAX_REPLY = 4000
# Arguments that make each tool's call valid, so that the over-long one is the only problem.
BASE: dict[str, dict[str, Any]] = {
    "verify_artifacts": {"host": "gpu1", "root": "/tmp", "roster": ["a"]},
    "audit_box": {"host": "gpu1"},
    "push_code": {"host": "gpu1", "source": "/nonexistent"},
    "prune_code": {"host": "gpu1", "project": "p"},
    "fetch_data": {"host": "gpu1", "dest": "x", "url": "https://example.invalid/x"},
    "inspect_run": {"host": "gpu1", "run_id": "r"},
    "cancel_run": {"host": "gpu1", "run_id": "r"},
    "wait_for_run": {"host": "gpu1", "run_id": "r"},
    "plot_run": {"host": "gpu1", "run_id": "r"},
    "prepare_box": {"host": "gpu1"},
    "run_probe": {"inputs": {"probe": "metric_sanity", "metric": "acc", "value": 0.5}},
    "reap_vram": {"host": "gpu1"},
    "reconcile_evidence": {"evidence": "/nonexistent/EVIDENCE.json", "documents": ["a.md"]},
    "launch_detached": {"host": "gpu1", "command": "true"},
    "preflight": {"host": "gpu1", "command": "true"},
    "tail_logs": {"host": "gpu1", "run_id": "r"},
    "list_runs": {"host": "gpu1"},
    "aggregate_results": {"host": "gpu1", "cells": "sweep/*", "name": "n"},
    "plan_teardown": {"host": "gpu1", "action": "none"},
    "teardown": {"host": "gpu1", "action": "none", "token": "t"},
    "search_references": {"query": "disk full"},
    "capsule": {"action": "seal", "project": "/nonexistent/project", "path": "/nonexistent/PULL_VERIFIED.json"},
}


def canary(length: int) -> str:
    return ("canary-" + "x" * length)[:length]


# Strings inside argument objects, one per kind the generic matrix (top-level arguments) misses.
NESTED: list[tuple[str, dict[str, Any], str, int]] = [
    ("run_probe", {"inputs": {"probe": "trajectory", "run": {"file": {"path": canary(PATH_MAX + 1)}}}},
     "inputs.trajectory.run.file.path", PATH_MAX),
    ("run_probe", {"inputs": {"probe": "trajectory",
                              "run": {"file": {"path": "/r.csv", "host": canary(HOST_MAX + 1)}}}},
     "inputs.trajectory.run.file.host", HOST_MAX),
    ("run_probe", {"inputs": {"probe": "leakage", "splits": {"train": {"ids": [canary(VALUE_MAX + 1)]},
                                                             "test": {"ids": ["b"]}}}},
     "inputs.leakage.splits.train.ids.0", VALUE_MAX),
    ("verify_artifacts", {"host": "gpu1", "root": "/tmp",
                          "cells": {"glob": canary(PATTERN_MAX + 1), "expect": 1, "files": ["a"]}},
     "cells.glob", PATTERN_MAX),
    ("audit_box", {"host": "gpu1", "expect_gpu": {"name": canary(ID_MAX + 1)}}, "expect_gpu.name", ID_MAX),
    ("launch_detached", {"host": "gpu1", "command": "true",
                         "kubernetes": {"node_selector": {"k": canary(VALUE_MAX + 1)}}},
     "kubernetes.node_selector.k", VALUE_MAX),
]


def _plain(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property's schema without pydantic's `anyOf [X, null]` and with a local $ref resolved."""
    rest = [v for v in node.get("anyOf", []) if v.get("type") != "null"]
    if len(rest) == 1:
        node = rest[0]
    ref = node.get("$ref")
    return defs[ref.rsplit("/", 1)[1]] if isinstance(ref, str) else node


def over_long(name: str, prop: dict[str, Any], defs: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
    """(field as the error names it, the argument with an over-long value, the limit) for a
    top-level argument that is a string, a list of strings or a map to strings."""
    node = _plain(prop, defs)
    items, values = node.get("items") or {}, node.get("additionalProperties")
    if node.get("type") == "string" and "maxLength" in node:
        return [(name, {name: canary(node["maxLength"] + 1)}, node["maxLength"])]
    if node.get("type") == "array" and items.get("type") == "string" and "maxLength" in items:
        return [(f"{name}.0", {name: [canary(items["maxLength"] + 1)]}, items["maxLength"])]
    if isinstance(values, dict) and values.get("type") == "string" and "maxLength" in values:
        return [(f"{name}.K", {name: {"K": canary(values["maxLength"] + 1)}}, values["maxLength"])]
    return []


def _bounded_pattern(pattern: str) -> bool:
    """A pattern anchored at both ends whose every repetition has an upper bound."""
    body = re.sub(r"\[[^\]]*\]", "", re.sub(r"\\.", "", pattern))
    return pattern.startswith("^") and pattern.endswith("$") and not re.search(r"[*+]|\{\d*,\}", body)


def unbounded(node: Any, defs: dict[str, Any], where: str, seen: tuple[str, ...] = ()) -> list[str]:
    """Every string without a length limit, list without an item limit and map without an entry
    or key limit under `node`, by field path."""
    if isinstance(node, list):
        return [w for n in node for w in unbounded(n, defs, where, seen)]
    if not isinstance(node, dict):
        return []
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[1]
        return [] if name in seen else unbounded(defs[name], defs, where, (*seen, name))
    found = []
    kind = node.get("type")
    if kind == "string" and not ("maxLength" in node or "enum" in node or "const" in node
                                 or _bounded_pattern(str(node.get("pattern", "")))):
        found.append(where)
    if kind == "array" and "maxItems" not in node:
        found.append(f"{where} (no maxItems)")
    if isinstance(node.get("additionalProperties"), dict):
        keys = node.get("propertyNames") or {}
        if "maxProperties" not in node:
            found.append(f"{where} (no maxProperties)")
        if "maxLength" not in keys and not _bounded_pattern(str(keys.get("pattern", ""))):
            found.append(f"{where} (keys without maxLength)")
        found += unbounded(node["additionalProperties"], defs, f"{where}.<value>", seen)
    for key in ("anyOf", "oneOf", "allOf"):
        found += unbounded(node.get(key, []), defs, where, seen)
    for name, sub in (node.get("properties") or {}).items():
        found += unbounded(sub, defs, f"{where}.{name}", seen)
    if "items" in node:
        found += unbounded(node["items"], defs, f"{where}[]", seen)
    return found


async def _full_schemas(c: Any) -> dict[str, dict[str, Any]]:
    names = [t.name for t in (await c.list_tools()).tools]
    pages = {n: await c.read_resource(f"schemas://tools/{n}") for n in names}
    return {n: json.loads(page.contents[0].text)["inputSchema"] for n, page in pages.items()}


async def test_security_every_string_list_and_map_argument_of_every_tool_has_a_limit(client: Any) -> None:
    async with client.session() as c:
        schemas = await _full_schemas(c)
    assert set(schemas) == set(BASE), "every tool is in this test's table"
    missing = [w for name, schema in schemas.items() for w in unbounded(schema, schema.get("$defs", {}), name)]
    assert missing == []


def _assert_refused(name: str, field: str, limit: int, result: Any) -> None:
    text = "\n".join(getattr(x, "text", "") for x in result.content)
    assert result.is_error, (name, field)
    assert f"[BAD_INPUT] the arguments do not fit {name}" in text, (name, field, text[:300])
    assert f"{field}: String should have at most {limit} characters" in text, (name, field, text[:300])
    assert len(text) < MAX_REPLY, (name, field, len(text))
    assert "canary" not in text and "x" * 32 not in text, (name, field, "the value is echoed")


async def test_security_an_over_long_argument_is_refused_naming_the_field_and_the_server_keeps_serving(
        local_box: Path, client: Any) -> None:
    async with client.session() as c:
        schemas = await _full_schemas(c)
        covered = set()
        for name, schema in schemas.items():
            cases = [case for field, prop in schema.get("properties", {}).items()
                     for case in over_long(field, prop, schema.get("$defs", {}))]
            cases += [(field, args, limit) for tool, args, field, limit in NESTED if tool == name]
            for field, value, limit in cases:
                _assert_refused(name, field, limit, await c.call_tool(name, {**BASE[name], **value}))
                covered.add(name)
            alive = await c.call_tool("list_runs", {"host": "gpu1"})
            assert not alive.is_error, (name, alive)
        assert covered == set(BASE), "every tool has a limited string refused"


async def test_security_an_over_long_map_key_is_refused_without_quoting_it(local_box: Path, client: Any) -> None:
    result = await client.call_tool("launch_detached", {"host": "gpu1", "command": "true",
                                                        "env": {canary(ID_MAX + 1): "1"}})
    text = "\n".join(getattr(x, "text", "") for x in result.content)
    assert result.is_error and "[BAD_INPUT]" in text and "env" in text
    assert "canary" not in text
