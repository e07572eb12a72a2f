"""The tool list as clients read it on every session: compact JSON Schemas.

pydantic's schemas are complete but heavy (a title on every field, `anyOf [X, null]` for every
optional, constraints and nested models in `$defs`), and a client sends the whole `tools/list`
to its model each turn. What is published is a lean schema that accepts everything the full one
does (the server validates every call against the full model and names what is wrong), and the
full schemas stay one read away as the `schemas://tools/{name}` resource."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

# Constraints the server enforces itself (pydantic) and reports by field name; a client needs none
# of them to build a call.
_DROPPED = {"title", "pattern", "maxLength", "minLength", "maxItems", "minItems", "maximum", "minimum",
            "exclusiveMaximum", "exclusiveMinimum", "additionalProperties", "discriminator", "examples",
            "uniqueItems", "format", "propertyNames", "maxProperties", "minProperties", "x-def", "x-rgt-path"}


# Arguments many tools share, explained once in the server's instructions (server.py) instead of in
# every tool's schema: the same words twenty times cost each session a kilobyte.
SHARED_ARGUMENTS = {"host": "local, inventory name, ssh alias, user@host"}
SHARED_DEFAULTS = {"host": "local"}

_DEF = "x-def"  # where _deref notes which definition a node came from (never published)
# An object argument with more fields than this is published without them (its description
# names them; the full schema has them).
MAX_NESTED_FIELDS = 8


def _deref(node: Any, defs: Schema, seen: tuple[str, ...] = ()) -> Any:
    """`node` with every local `$ref` replaced by its definition (a recursive one becomes `{}`)."""
    if isinstance(node, list):
        return [_deref(n, defs, seen) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            return {}
        merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}, _DEF: name}
        return _deref(merged, defs, (*seen, name))
    return {k: _deref(v, defs, seen) for k, v in node.items() if k != "$defs"}


def _unnull(node: Schema) -> Schema:
    """`anyOf [X, null]` (pydantic's optional) -> X; a null default says nothing."""
    variants = node.get("anyOf")
    if isinstance(variants, list):
        rest = [v for v in variants if v != {"type": "null"}]
        if len(rest) == 1 and len(rest) < len(variants):
            node = {**rest[0], **{k: v for k, v in node.items() if k != "anyOf"}}  # the field's own words win
    if "default" in node and (node["default"] is None or node["default"] is False or node["default"] in ([], {})):
        # what omitting the field says anyway
        node = {k: v for k, v in node.items() if k != "default"}
    return node


def _tag(variants: list[Any]) -> str | None:
    """The property every variant of a union fixes to its own constant (a discriminator), if any."""
    if len(variants) < 2 or not all(isinstance(v, dict) and v.get("properties") for v in variants):
        return None
    common = set.intersection(*(set(v["properties"]) for v in variants))
    return next((k for k in sorted(common) if all("const" in v["properties"][k] for v in variants)), None)


def _fields(node: Schema, types: dict[str, str], skip: str = "", depth: int = 0) -> str:
    """An object's fields by name (`?` = optional); an object field as `name:Type` (or `name:[Type]`
    for a list of them) with each Type's own fields collected once in `types`:
    `run:Series, arms:[Arm]` and `Series{file?, values?}`."""
    required = set(node.get("required", []))
    out = []
    for name, sub in node.get("properties", {}).items():
        if name == skip:
            continue
        sub = _unnull(sub) if isinstance(sub, dict) else {}
        inner = sub.get("items") if sub.get("type") == "array" else sub
        shape = ""
        if depth == 0 and isinstance(inner, dict) and inner.get("properties"):
            kind = str(inner.get(_DEF, name))
            types.setdefault(kind, "{" + _fields(_unnull(inner), types, depth=1) + "}")
            shape = f":[{kind}]" if inner is not sub else f":{kind}"
        out.append(f"{name}{shape}{'' if name in required else '?'}")
    return ", ".join(out)


def _signatures(variants: list[Schema], tag: str) -> str:
    """Each variant once, as `<tag value>(field, optional?, ...)`, then the shapes they name."""
    types: dict[str, str] = {}
    calls = "; ".join(f"{v['properties'][tag]['const']}({_fields(v, types, skip=tag)})" for v in variants)
    shapes = "; ".join(f"{kind}{fields}" for kind, fields in types.items())
    return f"{calls}. Shapes: {shapes}" if shapes else calls


def _union(node: Schema, variants: list[Schema], tag: str) -> Schema:
    """A tagged union described once: the tag's values, and each variant's fields by name."""
    text = str(node.get("description", "")).rstrip(". ")
    return {"type": "object", "required": [tag],
            "properties": {tag: {"enum": [v["properties"][tag]["const"] for v in variants]}},
            "description": f"{text}. Fields by {tag}: {_signatures(variants, tag)}".lstrip(". ")}


def _shape(node: Any, depth: int) -> Any:
    """The lean form: types, enums, required, defaults; descriptions only on the top level and
    one level in; below that, an object is just an object."""
    if not isinstance(node, dict):
        return node
    node = _unnull(node)
    variants = node.get("oneOf") or node.get("anyOf")
    tag = _tag(variants) if isinstance(variants, list) else None
    if tag is not None and isinstance(variants, list):
        return _union(node, variants, tag)
    out: Schema = {}
    for key, value in node.items():
        if key in _DROPPED or (key == "description" and depth > 1):
            continue
        if key == "properties" and isinstance(value, dict):
            if depth >= 2 or (depth == 1 and len(value) > MAX_NESTED_FIELDS):
                continue  # a big options object: its description names the fields
            out[key] = {name: _shape(sub, depth + 1) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _shape(value, depth + (0 if key == "items" else 1))
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [_shape(v, depth) for v in value]
        elif key == "default" and len(repr(value)) > 40:
            continue
        else:
            out[key] = value
    if depth >= 2 and "required" in out and "properties" not in out:
        del out["required"]
    return out


def lean_input(schema: Schema) -> Schema:
    """A tool's input schema, lean (see the module's note)."""
    flat = _deref(schema, schema.get("$defs", {}))
    lean = _shape(flat, 0)
    lean["type"] = "object"
    for name, prop in lean.get("properties", {}).items():
        if name in SHARED_ARGUMENTS and isinstance(prop, dict) and prop.get("description") == SHARED_ARGUMENTS[name]:
            del prop["description"]
            if prop.get("default") == SHARED_DEFAULTS.get(name):
                del prop["default"]  # the instructions say it too
    return dict(lean)


def lean_output(schema: Schema | None) -> Schema | None:
    """A tool's output schema as published: "an object". It accepts every result the full schema
    does; the result's text names its fields, and schemas://tools/<name> has their types."""
    return None if schema is None else {"type": "object"}
