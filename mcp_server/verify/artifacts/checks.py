"""Structural checks by file type on a pulled file: does it parse / load, and is it sane?

safetensors: header JSON parses, offsets consistent with the file size and dtypes.
PyTorch: zip structure with CRCs; torch.load(weights_only=True) when torch is installed
(no unsafe pickle fallback unless the call opts in); non-finite or empty tensors flagged.
json, jsonl, csv, npy/npz (no pickle), parquet when pyarrow is present."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

VERIFIER_VERSION = "rgt-verify/1"
_ST_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
              "BOOL": 1, "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}
_TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
MAX_TEXT_CHECK = 256 * 1024 * 1024
# Above this a checkpoint gets its zip directory checked, not a CRC pass or a load: one call
# must stay inside its time budget. Its bytes are still proven by size + SHA-256.
FULL_CHECK_MAX = 2 * 1024**3


class FileVerdict(BaseModel):
    path: str
    kind: str
    ok: bool
    detail: str
    finding: str | None = None  # load_error | unsafe_pickle | non_finite | empty | unchecked


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_file(path: Path, rel: str, allow_pickle: bool = False) -> FileVerdict:
    name = rel.lower()
    try:
        if name.endswith(".safetensors"):
            return _safetensors(path, rel)
        if name.endswith(_TORCH_SUFFIXES):
            return _torch(path, rel, allow_pickle)
        if name.endswith(".json"):
            json.loads(_text(path))
            return FileVerdict(path=rel, kind="json", ok=True, detail="parses")
        if name.endswith(".jsonl"):
            n = sum(1 for line in _text(path).splitlines() if line.strip() and json.loads(line) is not None)
            return FileVerdict(path=rel, kind="jsonl", ok=True, detail=f"{n} records parse")
        if name.endswith(".csv"):
            return _csv(path, rel)
        if name.endswith((".npy", ".npz")):
            return _numpy(path, rel)
        if name.endswith(".parquet"):
            return _parquet(path, rel)
    except (ValueError, OSError, zipfile.BadZipFile, KeyError, struct.error, UnicodeDecodeError) as exc:
        return FileVerdict(path=rel, kind=Path(rel).suffix.lstrip(".") or "file", ok=False,
                           detail=f"{type(exc).__name__}: {str(exc)[:300]}", finding="load_error")
    return FileVerdict(path=rel, kind="file", ok=True,
                       detail="bytes and sha256 only (no structural check for this type)")


def _text(path: Path) -> str:
    if path.stat().st_size > MAX_TEXT_CHECK:
        raise ValueError("too large to parse here (bytes and sha256 still verified)")
    return path.read_text(encoding="utf-8")


def _csv(path: Path, rel: str) -> FileVerdict:
    rows = list(csv.reader(io.StringIO(_text(path))))
    if not rows:
        return FileVerdict(path=rel, kind="csv", ok=False, detail="empty", finding="empty")
    widths = {len(r) for r in rows if r}
    if len(widths) > 1:
        return FileVerdict(path=rel, kind="csv", ok=False, detail=f"ragged rows: column counts {sorted(widths)}",
                           finding="load_error")
    return FileVerdict(path=rel, kind="csv", ok=True, detail=f"{len(rows)} rows x {widths.pop()} columns")


def _safetensors(path: Path, rel: str) -> FileVerdict:
    size = path.stat().st_size
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > size - 8 or n > 100 * 2**20:
            raise ValueError(f"header length {n} exceeds the file ({size} bytes)")
        header = json.loads(f.read(n))
    data_len = size - 8 - n
    spans = []
    for key, t in header.items():
        if key == "__metadata__":
            continue
        start, end = t["data_offsets"]
        width = _ST_DTYPES.get(t["dtype"])
        numel = 1
        for d in t["shape"]:
            numel *= d
        if width is None:
            raise ValueError(f"tensor {key}: unknown dtype {t['dtype']}")
        if not 0 <= start <= end <= data_len:
            raise ValueError(f"tensor {key}: offsets [{start}, {end}] outside the {data_len}-byte data section")
        if end - start != numel * width:
            raise ValueError(f"tensor {key}: {end - start} bytes for shape {t['shape']} {t['dtype']} "
                             f"(needs {numel * width})")
        spans.append((start, end, key))
    spans.sort()
    for (_, a1, ka), (b0, _, kb) in zip(spans, spans[1:], strict=False):
        if b0 < a1:
            raise ValueError(f"tensors {ka} and {kb} overlap")
    if spans and spans[-1][1] != data_len:
        raise ValueError(f"data section is {data_len} bytes but tensors end at {spans[-1][1]}")
    bad = _safetensors_non_finite(path, 8 + n, header)
    if bad:
        return FileVerdict(path=rel, kind="safetensors", ok=False, detail=f"non-finite values in {bad[:5]}",
                           finding="non_finite")
    if not spans:
        return FileVerdict(path=rel, kind="safetensors", ok=False, detail="no tensors", finding="empty")
    return FileVerdict(path=rel, kind="safetensors", ok=True, detail=f"{len(spans)} tensors, offsets consistent")


def _safetensors_non_finite(path: Path, base: int, header: dict[str, Any]) -> list[str]:
    import numpy as np

    kinds = {"F64": np.float64, "F32": np.float32, "F16": np.float16}
    bad = []
    with path.open("rb") as f:
        for key, t in header.items():
            if key == "__metadata__" or t["dtype"] not in kinds:
                continue
            start, end = t["data_offsets"]
            f.seek(base + start)
            arr = np.frombuffer(f.read(end - start), dtype=kinds[t["dtype"]])
            if arr.size and not np.isfinite(arr).all():
                bad.append(key)
    return bad


def _torch(path: Path, rel: str, allow_pickle: bool) -> FileVerdict:
    if path.stat().st_size > FULL_CHECK_MAX and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            n = len(z.infolist())
        return FileVerdict(path=rel, kind="torch", ok=True,
                           detail=f"large checkpoint: zip directory ok ({n} members); not CRC-checked or loaded "
                                  "within the call budget (bytes proven by sha256)")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            broken = z.testzip()
            if broken is not None:
                return FileVerdict(path=rel, kind="torch", ok=False, detail=f"zip member {broken} fails its CRC",
                                   finding="load_error")
    else:
        with path.open("rb") as f:
            if f.read(1) != b"\x80":  # not a pickle stream either: some other binary (e.g. a .bin blob)
                return FileVerdict(path=rel, kind="file", ok=True,
                                   detail="not a PyTorch checkpoint: bytes and sha256 only")
        if not has("torch"):
            return FileVerdict(path=rel, kind="torch", ok=False, finding="unchecked",
                               detail="legacy (non-zip) checkpoint and torch is not installed: not loaded")
    if not has("torch"):
        return FileVerdict(path=rel, kind="torch", ok=True,
                           detail="zip structure and CRCs ok (torch not installed: not loaded)")
    return _torch_load(path, rel, allow_pickle)


def _torch_load(path: Path, rel: str, allow_pickle: bool) -> FileVerdict:
    import pickle

    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
        how = "weights_only load"
    except pickle.UnpicklingError as exc:
        if "Unsupported global" not in str(exc):
            # A stream the weights-only unpickler cannot parse at all is damage, not unsafety.
            return FileVerdict(path=rel, kind="torch", ok=False, finding="load_error",
                               detail=f"torch.load failed: {_weights_error(exc)}")
        if not allow_pickle:
            return FileVerdict(path=rel, kind="torch", ok=False, finding="unsafe_pickle",
                               detail="needs unsafe pickle to load (weights_only=True refused it): not loaded; "
                               f"pass allow_pickle=true only for a file you trust ({_weights_error(exc)})")
        obj = torch.load(path, map_location="cpu", weights_only=False)
        how = "UNSAFE pickle load (allow_pickle=true)"
    except (RuntimeError, EOFError, ValueError) as exc:
        return FileVerdict(path=rel, kind="torch", ok=False, detail=f"torch.load failed: {str(exc)[:300]}",
                           finding="load_error")
    tensors = list(_tensors(obj))
    if not tensors:
        return FileVerdict(path=rel, kind="torch", ok=False, detail=f"{how}: no tensors inside", finding="empty")
    empty = [k for k, t in tensors if t.numel() == 0]
    bad = [k for k, t in tensors if t.is_floating_point() and t.numel() and not torch.isfinite(t).all()]
    if bad:
        return FileVerdict(path=rel, kind="torch", ok=False, finding="non_finite",
                           detail=f"{how}: non-finite values in {bad[:5]}")
    if empty:
        return FileVerdict(path=rel, kind="torch", ok=False, finding="empty",
                           detail=f"{how}: empty tensors {empty[:5]}")
    return FileVerdict(path=rel, kind="torch", ok=True, detail=f"{how}: {len(tensors)} tensors, all finite")


def _weights_error(exc: Exception) -> str:
    """The one informative line of torch's long weights-only error."""
    text = str(exc)
    i = text.find("WeightsUnpickler error:")
    core = text[i + len("WeightsUnpickler error:"):] if i >= 0 else text
    return " ".join(core.split())[:200]


def _tensors(obj: object, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(name, tensor) for every tensor inside a loaded checkpoint (torch is untyped: Any)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix or "tensor", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{prefix}[{i}]")


def _numpy(path: Path, rel: str) -> FileVerdict:
    import numpy as np

    loaded = np.load(path, allow_pickle=False)
    arrays = dict(loaded.items()) if isinstance(loaded, np.lib.npyio.NpzFile) else {"array": loaded}
    bad = [k for k, a in arrays.items() if a.dtype.kind in "fc" and a.size and not np.isfinite(a).all()]
    if bad:
        return FileVerdict(path=rel, kind="numpy", ok=False, detail=f"non-finite values in {bad[:5]}",
                           finding="non_finite")
    return FileVerdict(path=rel, kind="numpy", ok=True,
                       detail=", ".join(f"{k}{list(a.shape)} {a.dtype}" for k, a in list(arrays.items())[:8]))


def _parquet(path: Path, rel: str) -> FileVerdict:
    if not has("pyarrow"):
        return FileVerdict(path=rel, kind="parquet", ok=True, detail="bytes and sha256 only (pyarrow not installed)")
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    pq.read_table(path)
    return FileVerdict(path=rel, kind="parquet", ok=True, detail=f"{meta.num_rows} rows x {meta.num_columns} columns")
