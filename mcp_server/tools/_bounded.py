"""Keeping a tool's structured result within a byte budget, whatever the box printed.

A result built from what a box listed (processes, files, rows) grows with the box: a hostile or
broken box can make it megabytes while its text reading stays short. `bound_result` returns the
result itself when its JSON fits; otherwise a copy whose lists are cut to their first N items and
whose strings to M characters, N and M shrinking step by step until it fits. A model that mixes
in `Bounded` says what was cut: `truncated` and, for each cut list, its full length in `totals`.
Strings are never cut below `MIN_CHARS`, so a token or a next step stays whole."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, Field

MIN_CHARS = 200
# (items per list, characters per string), tried in order until the result fits
STEPS = ((50, 2000), (20, 500), (8, MIN_CHARS), (3, MIN_CHARS), (1, MIN_CHARS), (0, MIN_CHARS))
ELLIPSIS = "…"

M = TypeVar("M", bound=BaseModel)


class Bounded(BaseModel):
    """Fields a bounded result carries (mix into the tool's output model)."""

    truncated: bool = Field(default=False, description="lists or strings were cut to keep the result small")
    totals: dict[str, int] = Field(default_factory=dict,
                                   description="full length of each cut list, by its path (a.b, or a.0.b in a list)")


def json_size(result: BaseModel) -> int:
    """Bytes of the result's JSON, as it goes on the wire."""
    return len(result.model_dump_json(by_alias=True).encode())


def cut(value: Any, items: int, chars: int, totals: dict[str, int], path: str = "") -> tuple[Any, bool]:
    """`value` (JSON data) with every list cut to `items` and every string to `chars`; each cut
    list's path and full length go into `totals`. Returns the cut value and whether anything was cut."""
    if isinstance(value, str):
        return (value[:chars] + ELLIPSIS, True) if len(value) > chars else (value, False)
    if isinstance(value, list):
        was_cut = len(value) > items
        if was_cut:
            totals[path or "."] = len(value)
        out = []
        for i, v in enumerate(value[:items]):
            v, c = cut(v, items, chars, totals, f"{path}.{i}" if path else str(i))
            out.append(v)
            was_cut = was_cut or c
        return out, was_cut
    if isinstance(value, dict):
        found, was_cut = {}, False
        for k, v in value.items():
            found[k], c = cut(v, items, chars, totals, f"{path}.{k}" if path else str(k))
            was_cut = was_cut or c
        return found, was_cut
    return value, False


def bound_result(result: M, max_bytes: int) -> M:
    """`result` when its JSON is at most `max_bytes`; else a copy of the same model cut to fit
    (see the module's note). Where even the last step does not fit, that last, smallest copy."""
    if json_size(result) <= max_bytes:
        return result
    data = result.model_dump(mode="json", by_alias=True)
    fields = type(result).model_fields
    smallest = result
    for items, chars in STEPS:
        totals: dict[str, int] = {}
        body = {k: v for k, v in data.items() if k not in ("truncated", "totals")}
        body, was_cut = cut(body, items, chars, totals)
        if "truncated" in fields:
            body["truncated"] = was_cut or bool(data.get("truncated"))
        if "totals" in fields:
            body["totals"] = {**(data.get("totals") or {}), **totals}
        smallest = type(result).model_validate(body)
        if json_size(smallest) <= max_bytes:
            break
    return smallest
