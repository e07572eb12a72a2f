"""PyTorch checkpoints: .pt .pth .ckpt, and .bin when it looks like one.

Structure, with the standard library alone:
- zip format (torch >= 1.6): the central directory is there (a half-written file has none), every
  member's CRC holds, a `<name>/data.pkl` member parses inertly, each storage it names has a
  `data/<key>` member of the size its element type and count need, and every tensor fits its storage;
- legacy format: torch's magic-number pickle, the protocol version, the system info, the object
  pickle, the storage key list, then each storage's element count and bytes, ending at end of file.
Then a weights-only torch.load when torch is installed; without torch, float storages are scanned
for NaN/Inf bit patterns and `expect_keys` is read from the inert pickle."""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, cast

from mcp_server.verify.artifacts import checks_arrays
from mcp_server.verify.artifacts.checks_base import (
    ZIP_MAGIC,
    CheckInput,
    Defect,
    Outcome,
    check_expected,
    describe_keys,
    has_non_finite,
    head,
    open_zip,
    zip_intact,
)
from mcp_server.verify.artifacts.checks_pickle import (
    Bounded,
    Inert,
    StorageRef,
    TensorRef,
    inert_load,
    top_keys,
    type_label,
)

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
# The first pickle of a legacy file: protocol 2, LONG1 of 10 bytes holding LEGACY_MAGIC, STOP.
_LEGACY_HEAD = b"\x80\x02\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little") + b"."
# torch storage class -> (bytes per element, float layout for the NaN scan or None).
_STORAGES: dict[str, tuple[int, str | None]] = {
    "FloatStorage": (4, "f32"), "DoubleStorage": (8, "f64"), "HalfStorage": (2, "f16"),
    "BFloat16Storage": (2, "bf16"), "ComplexFloatStorage": (8, "c64"), "ComplexDoubleStorage": (16, "c128"),
    "LongStorage": (8, None), "IntStorage": (4, None), "ShortStorage": (2, None), "CharStorage": (1, None),
    "ByteStorage": (1, None), "BoolStorage": (1, None), "UntypedStorage": (1, None), "UInt16Storage": (2, None),
    "UInt32Storage": (4, None), "UInt64Storage": (8, None), "QInt8Storage": (1, None), "QUInt8Storage": (1, None),
    "QInt32Storage": (4, None), "Float8_e4m3fnStorage": (1, None), "Float8_e5m2Storage": (1, None),
}


@dataclass
class Structure:
    how: str
    inert: Inert
    non_finite: list[str] = field(default_factory=list)  # storage keys
    scanned: bool = False


def check_torch(inp: CheckInput) -> Outcome:
    first = head(inp.path)
    if first.startswith(ZIP_MAGIC):
        found = _zip_structure(inp)
    elif first[:1] == b"\x80":
        found = _legacy_structure(inp)
    else:
        raise Defect("load_error", "neither a zip-format nor a legacy PyTorch checkpoint "
                                   f"(it starts {first[:8].hex(' ')}): garbage, or another format with this name")
    unsafe = found.inert.unsafe_globals()
    if unsafe and not inp.allow_pickle:  # refused before any loader sees it, with torch or without
        raise Defect("unsafe_pickle", f"{found.how}; needs unsafe pickle to load: it names {unsafe[:3]}, outside "
                                      "torch's weights-only set; not loaded; pass allow_pickle=true only for a file "
                                      "you trust")
    if inp.loaders.torch and inp.full:
        from mcp_server.verify.artifacts.checks_torch_load import torch_load

        return torch_load(inp, found.how)
    return _judge_inert(inp, found)


def check_bin(inp: CheckInput) -> Outcome:
    """A .bin is a checkpoint only when it looks like one: a zip, torch's legacy magic, or a
    safetensors header. Anything else is an opaque blob (listed as not inspected)."""
    first = head(inp.path)
    try:
        if first.startswith((ZIP_MAGIC, _LEGACY_HEAD)):
            return _with_kind(check_torch(inp), "torch")
        if checks_arrays.looks_like_safetensors(first, inp.size):
            return _with_kind(checks_arrays.check_safetensors(inp), "safetensors")
    except Defect as d:
        d.kind = d.kind or ("safetensors" if checks_arrays.looks_like_safetensors(first, inp.size) else "torch")
        raise
    return Outcome(detail="not inspected: not a zip, torch pickle or safetensors file, so an opaque blob "
                          "(bytes and sha256 only)", inspected=False)


def _with_kind(out: Outcome, kind: str) -> Outcome:
    out.kind = out.kind or kind
    return out


def _judge_inert(inp: CheckInput, found: Structure) -> Outcome:
    tensors = dict(named_tensors(found.inert.obj))
    if found.non_finite:
        bad = [name for name, t in tensors.items() if t.storage.key in found.non_finite] or found.non_finite
        raise Defect("non_finite", f"{found.how}; non-finite values (NaN/Inf) in {bad[:5]}")
    if not found.inert.tensors and not found.inert.other_tensors:
        raise Defect("empty", f"{found.how}; no tensors inside")
    empty = [name for name, t in tensors.items() if 0 in t.shape]
    if empty:
        raise Defect("empty", f"{found.how}; empty tensors {empty[:5]}")
    keys = top_keys(found.inert.obj)
    expected = check_expected(keys, inp.expect_keys, describe_keys(keys, type_label(found.inert.obj)))
    if not inp.full:
        not_done = "not scanned or loaded within the call budget (bytes proven by sha256)"
    elif found.scanned:
        not_done = "floats scanned: all finite; not loaded (torch not installed)"
    else:
        not_done = "not loaded and not scanned for NaN (torch and numpy not installed)"
    count = len(found.inert.tensors) + found.inert.other_tensors
    return Outcome(detail=f"{found.how}; {count} tensors; {not_done}{expected}", kind="torch")


def named_tensors(obj: object, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, TensorRef]]:
    if depth > 64:
        return
    if isinstance(obj, TensorRef):
        yield prefix or "tensor", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from named_tensors(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from named_tensors(v, f"{prefix}[{i}]", depth + 1)


def _scan_wanted(inp: CheckInput) -> bool:
    return inp.full and inp.loaders.numpy and not inp.loaders.torch


def _layout(ref: StorageRef) -> tuple[int | None, str | None]:
    width, code = _STORAGES.get(ref.type_name.rpartition(".")[2], (None, None))
    return width, code


def _zip_structure(inp: CheckInput) -> Structure:
    with open_zip(inp.path, "a zip-format checkpoint") as z:
        infos = z.infolist()
        pkl = next((i for i in infos if i.filename == "data.pkl" or
                    (i.filename.endswith("/data.pkl") and i.filename.count("/") == 1)), None)
        if pkl is None:
            raise Defect("load_error", f"a zip archive of {len(infos)} members with no data.pkl: not a PyTorch "
                                       "checkpoint")
        prefix = pkl.filename[: -len("data.pkl")]
        how = zip_intact(z, inp.size, inp.full)
        with z.open(pkl) as f:
            inert = _inert_part(f, "data.pkl")
        sizes = {i.filename: i.file_size for i in infos}
        found = Structure(how=f"{how}; data.pkl parses", inert=inert, scanned=_scan_wanted(inp))
        for key, ref in inert.storages.items():
            nbytes = sizes.get(f"{prefix}data/{key}")
            if nbytes is None:
                raise Defect("load_error", f"data.pkl names storage {key} but the archive has no data/{key}")
            _storage_size(ref, nbytes)
            code = _layout(ref)[1]
            if found.scanned and code:
                with z.open(f"{prefix}data/{key}") as data:
                    if has_non_finite(data.read, nbytes, code):
                        found.non_finite.append(key)
    _views_fit(inert)
    found.how += f", {len(inert.storages)} storages sized right"
    return found


def _storage_size(ref: StorageRef, nbytes: int) -> None:
    width = _layout(ref)[0]
    if width is not None and nbytes != ref.numel * width:
        raise Defect("load_error", f"storage {ref.key} ({ref.type_name}, {ref.numel} elements) needs "
                                   f"{ref.numel * width} bytes but holds {nbytes}")


def _views_fit(inert: Inert) -> None:
    for t in inert.tensors:
        if t.last_element() >= t.storage.numel:
            raise Defect("load_error", f"a tensor of shape {list(t.shape)} reads past the end of storage "
                                       f"{t.storage.key} ({t.storage.numel} elements)")


def _inert_part(f: IO[bytes], what: str) -> Inert:
    try:
        return inert_load(f, torch=True)
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise Defect("load_error", f"{what} does not parse ({type(exc).__name__}: {str(exc)[:160]}): "
                                   "cut short or damaged") from exc


def _legacy_structure(inp: CheckInput) -> Structure:
    with inp.path.open("rb") as raw:
        f = cast(IO[bytes], Bounded(raw, inp.size))
        if _inert_part(f, "the first pickle").obj != LEGACY_MAGIC:
            raise Defect("load_error", "a pickle, but not a PyTorch checkpoint (no torch magic number): "
                                       "torch.load cannot read it")
        version = _inert_part(f, "the protocol-version pickle").obj
        if version != LEGACY_PROTOCOL:
            raise Defect("load_error", f"legacy checkpoint of protocol {version!r}, not {LEGACY_PROTOCOL}")
        _inert_part(f, "the system-info pickle")
        inert = _inert_part(f, "the object pickle")
        keys = _inert_part(f, "the storage key list").obj
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise Defect("load_error", "the storage key list is not a list of names")
        found = Structure(how="legacy (non-zip) checkpoint: pickles parse", inert=inert, scanned=_scan_wanted(inp))
        if _walk_storages(f, keys, inp.size, found):
            found.how += f", {len(keys)} storages fill the file exactly"
    _views_fit(inert)
    return found


def _walk_storages(f: IO[bytes], keys: list[str], size: int, found: Structure) -> bool:
    """Each storage: an 8-byte element count, then its bytes; the last one ends the file.
    False when a storage of unknown element size stopped the walk."""
    for key in keys:
        ref = found.inert.storages.get(key)
        if ref is None:
            raise Defect("load_error", f"the storage key list names {key}, which no tensor uses")
        count = f.read(8)
        if len(count) < 8:
            raise Defect("load_error", f"file ends before storage {key}: cut short")
        (numel,) = struct.unpack("<q", count)
        width, code = _layout(ref)
        if numel != ref.numel:
            raise Defect("load_error", f"storage {key} records {numel} elements, its tensor record says {ref.numel}")
        if width is None:  # an element size we do not know: the rest cannot be walked, only loaded
            found.how += f" (storage type {ref.type_name} unknown here: sizes walked up to it)"
            return False
        start, nbytes = f.tell(), numel * width
        if start + nbytes > size:
            raise Defect("load_error", f"storage {key} needs {nbytes} bytes, the file has {size - start} left: "
                                       "cut short")
        if found.scanned and code and has_non_finite(f.read, nbytes, code):
            found.non_finite.append(key)
        f.seek(start + nbytes)
    if f.tell() != size:
        raise Defect("load_error", f"{size - f.tell()} bytes follow the last storage: not a file torch wrote whole")
    return True
