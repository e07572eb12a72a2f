"""Input sources shared by the probes: a number series, a matrix, a config. Each is given
inline (small data) or as a file on a box, never both; loaders return plain Python/NumPy
data and raise InputError naming the file, the column and what was expected."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from mcp_server import lazy
from mcp_server.errors import InputError
from mcp_server.limits import IdStr, ValueStr
from mcp_server.verify.probes.parse import column, detect, parse_config, parse_npy, parse_rows, to_float
from mcp_server.verify.probes.refs import FileRef, InputReader

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy.module("numpy")  # loaded by the first probe that computes, not at server start

MAX_INLINE = 100_000


class _OneOf(BaseModel):
    """Inline values xor a file."""

    model_config = ConfigDict(extra="forbid")
    file: FileRef | None = Field(default=None, description="read the data from this file on a box")

    def _inline(self) -> Any:
        raise NotImplementedError

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self._inline() is None) == (self.file is None):
            raise ValueError("give exactly one of the inline values or `file`")
        return self


class Series(_OneOf):
    """A list of numbers: inline, or one column of a CSV/TSV/JSONL/JSON table, or a 1-D .npy."""

    values: list[float | None] | None = Field(
        default=None, max_length=MAX_INLINE,
        description="inline numbers; null marks a value that was logged as NaN/inf")
    column: IdStr | None = Field(default=None, description="table column (or JSONL field) holding the numbers")

    def _inline(self) -> Any:
        return self.values


class KeyedSeries(Series):
    """A series whose rows carry a key (step for curves, item id for per-item scores)."""

    keys: list[ValueStr | int | float] | None = Field(default=None, max_length=MAX_INLINE,
                                           description="inline keys aligned with `values`")
    key_column: IdStr | None = Field(default=None, description="table column holding the key")


async def load_series(src: Series, reader: InputReader, what: str) -> tuple[list[float | None], list[Any] | None]:
    """(values, keys): NaN for non-finite entries, None for cells that were not logged."""
    keys = getattr(src, "keys", None)
    if src.values is not None:
        vals: list[float | None] = [float("nan") if v is None else float(v) for v in src.values]
        if keys is not None and len(keys) != len(vals):
            raise InputError(f"{what}: `keys` and `values` differ in length",
                             observed=f"{len(keys)} vs {len(vals)}")
        return vals, keys
    assert src.file is not None
    data = await reader.read(src.file)
    path = src.file.path
    if detect(src.file.format, path) == "npy":
        arr = parse_npy(data, path)
        if arr.ndim != 1 or arr.dtype.kind not in "biuf":
            raise InputError(f"{what}: a .npy series must be a 1-D numeric array", path=path,
                             observed=f"shape {arr.shape}, dtype {arr.dtype}")
        return [float(v) for v in arr], None
    rows = parse_rows(data, src.file.format, path)
    if not src.column:
        raise InputError(f"{what}: name the `column` holding the numbers", path=path,
                         expected=sorted({k for r in rows[:50] for k in r})[:40])
    try:
        cells = [to_float(c) for c in column(rows, src.column, path)]
    except InputError as exc:
        exc.path = path
        exc.message = f"{what}: column {src.column!r}: {exc.message}"
        raise
    key_col = getattr(src, "key_column", None)
    found_keys = column(rows, key_col, path) if key_col else None
    return cells, found_keys


class Matrix(_OneOf):
    """A [rows, features] matrix: inline rows, a 2-D .npy, or a numeric CSV/TSV table."""

    rows: list[Annotated[list[float], Field(max_length=MAX_INLINE)]] | None = Field(default=None, max_length=MAX_INLINE,
                                           description="inline rows of equal length")

    def _inline(self) -> Any:
        return self.rows


async def load_matrix(src: Matrix, reader: InputReader, what: str) -> np.ndarray:
    """A 2-D float array (a 3-D+ array is flattened per row: [B, ...] -> [B, D])."""
    if src.rows is not None:
        lengths = {len(r) for r in src.rows}
        if len(lengths) > 1:
            raise InputError(f"{what}: rows have different lengths", observed=sorted(lengths)[:10])
        arr = np.asarray(src.rows, dtype=float)
    else:
        assert src.file is not None
        data, path = await reader.read(src.file), src.file.path
        if detect(src.file.format, path) == "npy":
            arr = parse_npy(data, path)
            if arr.dtype.kind not in "biuf":
                raise InputError(f"{what}: array is not numeric", path=path, observed=str(arr.dtype))
            arr = arr.astype(float)
        else:
            table = parse_rows(data, src.file.format, path)
            arr = np.asarray([[to_float(c) for c in r.values()] for r in table], dtype=float)
    if arr.ndim < 2 or arr.size == 0:
        raise InputError(f"{what}: need a non-empty [rows, features] matrix", observed=f"shape {arr.shape}")
    return arr.reshape(arr.shape[0], -1)


class ConfigSource(_OneOf):
    """A resolved config: inline mapping, or a YAML/JSON/TOML file."""

    inline: dict[ValueStr, JsonValue] | None = Field(default=None, max_length=MAX_INLINE,
                                                     description="the resolved config itself")

    def _inline(self) -> Any:
        return self.inline


async def load_config(src: ConfigSource, reader: InputReader) -> dict[str, Any]:
    if src.inline is not None:
        return dict(src.inline)
    assert src.file is not None
    return parse_config(await reader.read(src.file), src.file.format, src.file.path)
