"""Keeping a tool's structured result within a byte budget, whatever the box printed.

A result built from what a box listed (processes, files, rows, a log line) grows with the box: a
hostile or broken box can make it megabytes while its text reading stays short. Every tools/call
result passes `bound_structured` (surface.py): the result itself when its JSON fits the call's
budget; otherwise a copy whose lists (and maps) are cut to their first N items and whose strings
to M characters, N and M shrinking step by step until it fits, with `truncated: true` and, in
`totals`, the full length of each cut list, map or string by its path. Strings are never cut below
`MIN_CHARS`, so a token or a next step stays whole. Every tool's full output schema names those
two fields (`bounded_schema`), and a cut copy is used only when it still validates against it.
`bound_result` does the same on a model, for a tool that keeps a smaller budget of its own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from mcp_server.run.jobs.logs import MAX_WINDOW
from mcp_server.settings import OUTPUT_CAP_BYTES

MIN_CHARS = 200
# (items per list, characters per string), tried in order until the result fits
STEPS = ((50, 2000), (20, 500), (8, MIN_CHARS), (3, MIN_CHARS), (1, MIN_CHARS), (0, MIN_CHARS))
ELLIPSIS = "…"
# A structured result's budget: as much as the runs://{host}/{run_id}/log resource serves of a log,
# four default text windows. A call that names its own text window gets room for that window.
RESULT_MAX_BYTES = 4 * OUTPUT_CAP_BYTES
# An object with more keys than any output model has fields is a map (by file, by key): cut like a list.
MAX_FIELDS = 64
BOUND_FIELDS = ("truncated", "totals")
TRUNCATED_SAYS = "lists or strings were cut to keep the result small"
TOTALS_SAY = "full length of each cut list, map or string, by its path (a.b, or a.0.b in a list)"
BOUND_PROPERTIES: dict[str, Any] = {
    "truncated": {"type": "boolean", "description": TRUNCATED_SAYS},
    "totals": {"type": "object", "additionalProperties": {"type": "integer"}, "description": TOTALS_SAY},
}

M = TypeVar("M", bound=BaseModel)


class Bounded(BaseModel):
    """Fields a bounded result carries (mix into the tool's output model)."""

    truncated: bool = Field(default=False, description=TRUNCATED_SAYS)
    totals: dict[str, int] = Field(default_factory=dict, description=TOTALS_SAY)


def json_size(result: BaseModel) -> int:
    """Bytes of the result's JSON, as it goes on the wire."""
    return len(result.model_dump_json(by_alias=True).encode())


def wire_size(data: Any) -> int:
    """Bytes of JSON data as it goes on the wire (compact, UTF-8)."""
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


def budget(arguments: Mapping[str, Any] | None) -> int:
    """The most bytes a call's structured result may take: RESULT_MAX_BYTES, or, for a call that
    names a text window (tail_logs' max_bytes), that window with every character escaped (two
    bytes in JSON) and a default window for the rest."""
    window = (arguments or {}).get("max_bytes")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return max(RESULT_MAX_BYTES, 2 * min(window, MAX_WINDOW) + OUTPUT_CAP_BYTES)
    return RESULT_MAX_BYTES


def _at(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def cut(value: Any, items: int, chars: int, totals: dict[str, int], path: str = "") -> tuple[Any, bool]:
    """`value` (JSON data) with every list and map cut to `items` entries and every string (and
    map key) to `chars` characters; the full length of each cut one goes into `totals` by its
    path. Returns the cut value and whether anything was cut."""
    if isinstance(value, str):
        if len(value) <= chars:
            return value, False
        totals[path or "."] = len(value)
        return value[:chars] + ELLIPSIS, True
    if isinstance(value, list):
        was_cut = len(value) > items
        if was_cut:
            totals[path or "."] = len(value)
        out = []
        for i, v in enumerate(value[:items]):
            v, c = cut(v, items, chars, totals, _at(path, i))
            out.append(v)
            was_cut = was_cut or c
        return out, was_cut
    if isinstance(value, dict):
        entries = list(value.items())
        was_cut = len(entries) > MAX_FIELDS and len(entries) > items
        if was_cut:
            totals[path or "."] = len(entries)
            entries = entries[:items]
        found: dict[str, Any] = {}
        for k, v in entries:
            key = k if len(k) <= chars else k[:chars] + ELLIPSIS
            was_cut = was_cut or key != k
            if key not in found:  # two keys alike once cut: the first stays
                found[key], c = cut(v, items, chars, totals, _at(path, key))
                was_cut = was_cut or c
        return found, was_cut
    return value, False


def shrunk(data: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """`data` cut ever smaller (STEPS), each copy with `truncated` and `totals` saying what was cut
    (added to what an earlier cut said)."""
    body = {k: v for k, v in data.items() if k not in BOUND_FIELDS}
    before = data.get("totals")
    before = {k: v for k, v in before.items() if isinstance(v, int)} if isinstance(before, dict) else {}
    for items, chars in STEPS:
        totals: dict[str, int] = {}
        out, was_cut = cut(body, items, chars, totals)
        yield {**out, "truncated": was_cut or bool(data.get("truncated")), "totals": {**before, **totals}}


def bound_result(result: M, max_bytes: int) -> M:
    """`result` when its JSON is at most `max_bytes`; else a copy of the same model cut to fit
    (see the module's note). Where even the last step does not fit, that last, smallest copy."""
    if json_size(result) <= max_bytes:
        return result
    smallest = result
    for body in shrunk(result.model_dump(mode="json", by_alias=True)):
        smallest = type(result).model_validate(body)
        if json_size(smallest) <= max_bytes:
            break
    return smallest


def bound_structured(data: dict[str, Any], max_bytes: int,
                     valid: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """`data` (a structured result) when it fits `max_bytes`; else the largest cut copy that fits
    and that `valid` (the tool's output schema) accepts; None when no copy does."""
    if wire_size(data) <= max_bytes:
        return data
    return next((body for body in shrunk(data) if wire_size(body) <= max_bytes and valid(body)), None)


def bounded_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool's full output schema with `truncated` and `totals` (what a cut result carries)
    among its properties, where the model does not already have them."""
    if schema is None:
        return None
    props = dict(schema.get("properties") or {})
    return {**schema, "properties": {**props, **{k: v for k, v in BOUND_PROPERTIES.items() if k not in props}}}
