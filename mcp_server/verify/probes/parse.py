"""Parsers for probe input files: configs (YAML/JSON/TOML), tables (CSV/TSV/JSONL/JSON),
NumPy arrays (.npy, never pickled objects) and plain id lists. Each failure is an InputError
naming the file and what was expected."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import tomllib
from typing import TYPE_CHECKING, Any

import yaml

from mcp_server import lazy
from mcp_server.errors import InputError

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy.module("numpy")  # loaded by the first probe that computes, not at server start

MAX_ROWS = 2_000_000
_EXT = {
    ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml", ".csv": "csv",
    ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".npy": "npy", ".txt": "lines",
    ".lst": "lines", ".list": "lines",
}


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader that reads `1e-3` as a float, as YAML 1.2 and every trainer do
    (PyYAML's YAML 1.1 rules would make it the string '1e-3' and a config diff would lie)."""


_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)$|^[-+]?[0-9][0-9_]*\.[0-9_]*$"
               r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def detect(fmt: str, path: str) -> str:
    """The format to parse with: the given one, else from the file extension."""
    if fmt != "auto":
        return fmt
    lower = path.lower()
    for ext, found in _EXT.items():
        if lower.endswith(ext):
            return found
    raise InputError("cannot tell the file format from its extension", path=path,
                     expected=sorted(set(_EXT)), next_step="set `format` on the file reference")


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError("file is not UTF-8 text", path=path, observed=str(exc)) from exc


def parse_config(data: bytes, fmt: str, path: str) -> dict[str, Any]:
    """A resolved config as a nested mapping."""
    kind = detect(fmt, path)
    text = _text(data, path)
    try:
        if kind == "yaml":
            found = yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader subclass: no object tags
        elif kind == "json":
            found = json.loads(text)
        elif kind == "toml":
            found = tomllib.loads(text)
        else:
            raise InputError("a config must be YAML, JSON or TOML", path=path, observed=kind)
    except (yaml.YAMLError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"config does not parse as {kind}", path=path, observed=str(exc)[:300]) from exc
    if not isinstance(found, dict):
        raise InputError("config must be a mapping at its top level", path=path,
                         observed=type(found).__name__)
    return found


def parse_rows(data: bytes, fmt: str, path: str) -> list[dict[str, Any]]:
    """A table as a list of row mappings (CSV/TSV header row, JSONL objects, JSON list)."""
    kind = detect(fmt, path)
    text = _text(data, path)
    if kind in ("csv", "tsv"):
        reader = csv.DictReader(io.StringIO(text), delimiter="," if kind == "csv" else "\t")
        rows: list[dict[str, Any]] = []
        for row in reader:
            rows.append(dict(row))
            if len(rows) > MAX_ROWS:
                raise InputError(f"table has more than {MAX_ROWS} rows", path=path)
        if reader.fieldnames is None:
            raise InputError("table is empty (no header row)", path=path)
        return rows
    if kind == "jsonl":
        return _jsonl(text, path)
    if kind == "json":
        found = _json(text, path)
        if isinstance(found, dict) and "files" in found:
            return _manifest_rows(found["files"], path)
        if isinstance(found, dict) and found and all(isinstance(v, list) for v in found.values()):
            lengths = {len(v) for v in found.values()}
            if len(lengths) != 1:
                raise InputError("columnar JSON has columns of different lengths", path=path,
                                 observed=sorted(lengths))
            keys = list(found)
            return [dict(zip(keys, vals, strict=True)) for vals in zip(*found.values(), strict=True)]
        if isinstance(found, list) and all(isinstance(r, dict) for r in found):
            return found
        raise InputError("JSON table must be a list of objects or an object of equal-length lists",
                         path=path, observed=type(found).__name__)
    raise InputError("a table must be CSV, TSV, JSONL or JSON", path=path, observed=kind)


def _manifest_rows(files: Any, path: str) -> list[dict[str, Any]]:
    """A file manifest's entries as rows: a list of {path, sha256, ...} or a path -> record map."""
    if isinstance(files, list) and all(isinstance(r, dict) for r in files):
        return files
    if isinstance(files, dict) and all(isinstance(r, dict) for r in files.values()):
        return [{"path": k, **v} for k, v in files.items()]
    raise InputError("manifest `files` must be a list of objects or a path -> record object", path=path)


def _json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("file is not valid JSON", path=path, observed=str(exc)) from exc


def _jsonl(text: str, path: str) -> list[dict[str, Any]]:
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {i} is not valid JSON", path=path, observed=str(exc)) from exc
        if not isinstance(row, dict):
            raise InputError(f"line {i} is not a JSON object", path=path)
        rows.append(row)
        if len(rows) > MAX_ROWS:
            raise InputError(f"table has more than {MAX_ROWS} rows", path=path)
    return rows


def parse_npy(data: bytes, path: str) -> np.ndarray:
    """A .npy array; object arrays (pickles) are refused."""
    try:
        arr: np.ndarray = np.load(io.BytesIO(data), allow_pickle=False)
        return arr
    except ValueError as exc:
        raise InputError("not a plain .npy array (object arrays need pickle, which is refused)",
                         path=path, observed=str(exc)[:200]) from exc
    except OSError as exc:
        raise InputError("file is not a .npy array", path=path, observed=str(exc)[:200]) from exc


def parse_lines(data: bytes, path: str) -> list[str]:
    """One entry per line; blank lines and # comments skipped."""
    return [ln.strip() for ln in _text(data, path).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def column(rows: list[dict[str, Any]], name: str, path: str) -> list[Any]:
    """One column's cells (None where a row lacks it); the column must exist somewhere."""
    if not any(name in r for r in rows):
        seen = sorted({k for r in rows[:100] for k in r})
        raise InputError(f"column {name!r} not found", path=path, expected=seen[:40])
    return [r.get(name) for r in rows]


def to_float(cell: Any) -> float | None:
    """A table cell as a number: '' or null -> None (not logged); 'nan' -> NaN (logged, not finite)."""
    if cell is None or isinstance(cell, bool):
        return None
    if isinstance(cell, int | float):
        return float(cell)
    text = str(cell).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError("table cell is not a number", observed=text[:60]) from None


def finite_count(values: list[float | None]) -> int:
    return sum(1 for v in values if v is not None and math.isfinite(v))
