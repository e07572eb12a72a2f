"""The shipped JSON Schemas (draft 2020-12, package data) and validation errors that name
the JSON path and say what was expected there."""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

SCHEMAS = ("evidence", "results", "provenance", "figure")
_MAX_ERRORS = 20


@dataclass(frozen=True)
class SchemaError:
    json_path: str
    message: str
    expected: str


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """One shipped schema, read through importlib.resources (works from a wheel)."""
    res = importlib.resources.files("mcp_server.deliver").joinpath("schemas", f"{name}.schema.json")
    data: dict[str, Any] = json.loads(res.read_text(encoding="utf-8"))
    return data


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A validator for one shipped schema, its local $refs inlined (the schema is checked
    as written; inlining only saves a reference lookup per node on large files)."""
    s = schema(name)
    Draft202012Validator.check_schema(s)
    return Draft202012Validator(_inline(s, s.get("$defs", {})))


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 16:
            target = _inline(defs[ref.rsplit("/", 1)[1]], defs, depth + 1)
            rest = {k: _inline(v, defs, depth) for k, v in node.items() if k != "$ref"}
            return {**target, **rest} if rest else target
        return {k: _inline(v, defs, depth) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs, depth) for v in node]
    return node


def check(name: str, data: Any) -> list[SchemaError]:
    """Every violation (at most 20), in document order, each with path and expectation."""
    found = sorted(validator(name).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [_describe(e) for e in found[:_MAX_ERRORS]]


def _describe(error: ValidationError) -> SchemaError:
    while error.validator in ("anyOf", "oneOf") and error.context:
        # The branch the author meant is the one with the fewest errors, then the one that got
        # furthest; a bare type mismatch at the same place (e.g. "not null") says least.
        branches: dict[Any, list[ValidationError]] = {}
        for e in error.context:
            branches.setdefault(e.relative_schema_path[0] if e.relative_schema_path else None, []).append(e)
        meant = min(branches.values(), key=lambda es: (len(es), -max(len(e.absolute_path) for e in es)))
        options = [e for e in meant
                   if not (e.validator == "type" and len(e.absolute_path) == len(error.absolute_path))]
        deepest = best_match(options or meant, key=lambda e: len(e.absolute_path))
        if deepest is None:
            break
        error = deepest
    return SchemaError(error.json_path, error.message, _expected(error))


def _expected(error: ValidationError) -> str:
    v, value = error.validator, error.validator_value
    if v == "type":
        return "type " + (" or ".join(value) if isinstance(value, list) else str(value))
    if v == "required" and isinstance(value, list):
        missing = [k for k in value if isinstance(error.instance, dict) and k not in error.instance]
        return "property " + ", ".join(repr(k) for k in missing or value)
    if v == "enum" and isinstance(value, list):
        return "one of " + ", ".join(json.dumps(x) for x in value)
    if v == "const":
        return "exactly " + json.dumps(value)
    if v == "pattern":
        return f"a string matching {value}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        sign = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[str(v)]
        return f"a number {sign} {value}"
    if v in ("minItems", "minLength", "minProperties"):
        unit = {"minItems": "item(s)", "minLength": "character(s)", "minProperties": "key(s)"}[str(v)]
        return f"at least {value} {unit}"
    if v == "not":
        return "not " + json.dumps(value)[:80]
    return f"{v}: {json.dumps(value)[:80]}"


def load_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (not JSON, and never a comparable value)."""
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not valid JSON (write a number or null)")
    return json.loads(text, parse_constant=refuse)
