"""Array files: safetensors, npy, npz, HDF5 and parquet.

Structure with the standard library: safetensors header JSON and tensor offsets against the file
size; npy magic, header and data size = shape x itemsize; npz as a zip of such members with valid
CRCs; HDF5 signature and superblock, whose end-of-file address must fit the file; parquet's PAR1
magic at both ends and its footer length. Then the loaders when installed: numpy (NaN/Inf scan,
np.load without pickle), h5py (open and walk), pyarrow (read the table)."""

from __future__ import annotations

import ast
import importlib
import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from mcp_server.verify.artifacts.checks_base import (
    CheckInput,
    Defect,
    Outcome,
    check_expected,
    describe_keys,
    has_non_finite,
    open_zip,
    zip_intact,
)

# safetensors dtype -> (bytes per element, float layout for the NaN scan or None)
_ST_DTYPES: dict[str, tuple[int, str | None]] = {
    "F64": (8, "f64"), "F32": (4, "f32"), "F16": (2, "f16"), "BF16": (2, "bf16"), "C64": (8, "c64"),
    "I64": (8, None), "I32": (4, None), "I16": (2, None), "I8": (1, None), "U8": (1, None), "BOOL": (1, None),
    "U16": (2, None), "U32": (4, None), "U64": (8, None), "F8_E4M3": (1, None), "F8_E5M2": (1, None),
}
_ST_MAX_HEADER = 100 * 2**20


def looks_like_safetensors(first: bytes, size: int) -> bool:
    if len(first) < 9:
        return False
    (n,) = struct.unpack("<Q", first[:8])
    return 2 <= n <= size - 8 and first[8:9] == b"{"


def check_safetensors(inp: CheckInput) -> Outcome:
    with inp.path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise Defect("load_error", f"{inp.size} bytes: too short for the 8-byte safetensors header length")
        (n,) = struct.unpack("<Q", raw)
        if n > inp.size - 8 or n > _ST_MAX_HEADER:
            raise Defect("load_error", f"header length {n} exceeds the file ({inp.size} bytes): cut short or garbage")
        header = json.loads(f.read(n))
    if not isinstance(header, dict):
        raise Defect("load_error", "the safetensors header is not a JSON object")
    data_len = inp.size - 8 - n
    tensors = {k: _st_entry(k, t, data_len) for k, t in header.items() if k != "__metadata__"}
    spans = sorted((start, end, key) for key, (start, end, _) in tensors.items())
    for (_, a1, ka), (b0, _, kb) in zip(spans, spans[1:], strict=False):
        if b0 < a1:
            raise Defect("load_error", f"tensors {ka} and {kb} overlap")
    if spans and spans[-1][1] != data_len:
        raise Defect("load_error", f"data section is {data_len} bytes but tensors end at {spans[-1][1]}: "
                                   "cut short or padded")
    if not spans:
        raise Defect("empty", "no tensors")
    scan = ""
    if inp.full and inp.loaders.numpy:
        bad = _st_non_finite(inp.path, 8 + n, tensors)
        if bad:
            raise Defect("non_finite", f"non-finite values (NaN/Inf) in {bad[:5]}")
        scan = ", floats all finite"
    names = list(tensors)
    expected = check_expected(names, inp.expect_keys, describe_keys(names, "a tensor map"))
    return Outcome(detail=f"{len(spans)} tensors, offsets consistent{scan}{expected}", kind="safetensors")


def _st_entry(key: str, t: Any, data_len: int) -> tuple[int, int, str | None]:
    """(start, end, float layout) of one header entry, each field checked against the data section."""
    if not (isinstance(t, dict) and isinstance(t.get("dtype"), str) and isinstance(t.get("shape"), list)
            and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2
            and all(isinstance(v, int) and v >= 0 for v in [*t["shape"], *t["data_offsets"]])):
        raise Defect("load_error", f"tensor {key}: header entry is not {{dtype, shape, data_offsets}}")
    start, end = t["data_offsets"]
    if not start <= end <= data_len:
        raise Defect("load_error", f"tensor {key}: offsets [{start}, {end}] outside the {data_len}-byte data section")
    width, code = _ST_DTYPES.get(t["dtype"], (None, None))
    numel = 1
    for d in t["shape"]:
        numel *= d
    if width is not None and end - start != numel * width:
        raise Defect("load_error", f"tensor {key}: {end - start} bytes for shape {t['shape']} {t['dtype']} "
                                   f"(needs {numel * width})")
    return start, end, code


def _st_non_finite(path: Path, base: int, tensors: dict[str, tuple[int, int, str | None]]) -> list[str]:
    bad = []
    with path.open("rb") as f:
        for key, (start, end, code) in tensors.items():
            if code is not None:
                f.seek(base + start)
                if has_non_finite(f.read, end - start, code):
                    bad.append(key)
    return bad


_NPY_MAGIC = b"\x93NUMPY"
_DESCR = re.compile(r"^[<>|=]?([?bBhHiIlLqQefdgFDGbiufcmMSUV])(\d*)(\[\w+\])?$")
_KIND_SIZE = {"?": 1, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "l": 8, "L": 8, "q": 8, "Q": 8,
              "e": 2, "f": 4, "d": 8, "g": 16, "F": 8, "D": 16, "G": 32}


def npy_header(read: Callable[[int], bytes], what: str) -> tuple[int, Any, tuple[int, ...]]:
    """(header bytes, descr, shape) of an npy stream."""
    if read(6) != _NPY_MAGIC:
        raise Defect("load_error", f"{what}: no npy magic (\\x93NUMPY): garbage or another format")
    version = read(2)
    if len(version) < 2 or version[0] not in (1, 2, 3):
        raise Defect("load_error", f"{what}: unknown npy format version {version.hex()}")
    width = 2 if version[0] == 1 else 4
    raw = read(width)
    if len(raw) < width:
        raise Defect("load_error", f"{what}: cut short inside the npy header")
    hlen = int.from_bytes(raw, "little")
    text = read(hlen)
    if hlen > 2**20 or len(text) < hlen:
        raise Defect("load_error", f"{what}: npy header of {hlen} bytes is cut short or absurd")
    try:
        meta = ast.literal_eval(text.decode("utf-8" if version[0] == 3 else "latin1"))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise Defect("load_error", f"{what}: the npy header is not a Python literal ({type(exc).__name__})") from exc
    if not (isinstance(meta, dict) and {"descr", "fortran_order", "shape"} <= meta.keys()
            and isinstance(meta["shape"], tuple) and all(isinstance(d, int) and d >= 0 for d in meta["shape"])):
        raise Defect("load_error", f"{what}: the npy header is not {{descr, fortran_order, shape}}")
    return 8 + width + hlen, meta["descr"], meta["shape"]


def _itemsize(descr: Any, numpy: bool) -> int | None:
    """Bytes per element, or None for object arrays (their data is a pickle) and layouts not known here."""
    if isinstance(descr, str) and "O" not in descr:
        m = _DESCR.match(descr)
        if m:
            kind, digits = m.group(1), m.group(2)
            size = int(digits) if digits else _KIND_SIZE.get(kind, 0)
            return size * 4 if kind == "U" else size
    if numpy:
        import numpy as np

        try:
            dtype = np.lib.format.descr_to_dtype(descr)
        except (TypeError, ValueError) as exc:
            raise Defect("load_error", f"npy header names no dtype numpy knows ({str(descr)[:60]})") from exc
        return None if dtype.hasobject else int(dtype.itemsize)
    return None


def _npy_consistent(read: Callable[[int], bytes], nbytes: int, what: str, inp: CheckInput) -> str:
    hlen, descr, shape = npy_header(read, what)
    numel = 1
    for d in shape:
        numel *= d
    item = _itemsize(descr, inp.loaders.numpy)
    if item is None:
        if "O" in str(descr) and not inp.allow_pickle:
            raise Defect("unsafe_pickle", f"{what}: an object array (its data is a pickle): not loaded; pass "
                                          "allow_pickle=true only for a file you trust")
        return f"{list(shape)} {descr} (data size not checkable)"
    if hlen + numel * item != nbytes:
        raise Defect("load_error", f"{what}: shape {list(shape)} {descr} needs {numel * item} data bytes, "
                                   f"the file holds {nbytes - hlen}" + (": cut short" if nbytes < hlen + numel * item
                                                                        else ""))
    return f"{list(shape)} {descr}"


def check_npy(inp: CheckInput) -> Outcome:
    with inp.path.open("rb") as f:
        shape = _npy_consistent(f.read, inp.size, "npy", inp)
    return Outcome(detail=f"header and size consistent: {shape}{_numpy_scan(inp)}", kind="numpy")


def check_npz(inp: CheckInput) -> Outcome:
    with open_zip(inp.path, "an npz file") as z:
        how = zip_intact(z, inp.size, inp.full)
        members = [i for i in z.infolist() if not i.is_dir()]
        if not members:
            raise Defect("empty", "an npz archive with no arrays")
        shapes = []
        for i in members:
            if i.filename.endswith(".npy"):
                with z.open(i) as f:
                    shapes.append(f"{i.filename[:-4]}{_npy_consistent(f.read, i.file_size, i.filename, inp)}")
    return Outcome(detail=f"{how}; {', '.join(shapes[:8])}{_numpy_scan(inp)}", kind="numpy")


def _numpy_scan(inp: CheckInput) -> str:
    """The load half: np.load (no pickle unless allowed) and a NaN/Inf scan of float arrays."""
    if not (inp.loaders.numpy and inp.full):
        return "; not loaded" + ("" if inp.full else " within the call budget (bytes proven by sha256)")
    import numpy as np

    try:
        loaded = np.load(inp.path, allow_pickle=inp.allow_pickle)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                arrays = dict(loaded.items())
        else:
            arrays = {"array": loaded}
    except Exception as exc:  # the loader's own words for a file it rejects, whatever their type
        raise Defect("load_error", f"np.load refuses it ({type(exc).__name__}: {str(exc)[:200]})") from exc
    bad = [k for k, a in arrays.items() if a.dtype.kind in "fc" and a.size and not np.isfinite(a).all()]
    if bad:
        raise Defect("non_finite", f"non-finite values (NaN/Inf) in {bad[:5]}", kind="numpy")
    return f"; np.load: {len(arrays)} array(s), floats all finite"


_H5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def check_h5(inp: CheckInput) -> Outcome:
    """HDF5: the signature at 0 or a user-block offset (512, 1024, ...), a superblock of a known
    version whose end-of-file address fits the file (a cut file ends before it)."""
    with inp.path.open("rb") as f:
        base = _h5_signature_at(f, inp.size)
        f.seek(base)
        sb = f.read(96)
    version = sb[8] if len(sb) > 8 else -1
    if version not in (0, 1, 2, 3):
        raise Defect("load_error", f"HDF5 superblock version {version} is not one of 0-3")
    o_size = (sb[13] if version < 2 else sb[9]) if len(sb) > 13 else 0
    if o_size not in (2, 4, 8, 16):
        raise Defect("load_error", f"HDF5 superblock gives {o_size}-byte addresses: damaged")
    first = (24 if version == 0 else 28) if version < 2 else 12
    eof_at = first + 2 * o_size  # base address, then free-space (v0/1) or extension (v2/3) address
    if len(sb) < eof_at + o_size:
        raise Defect("load_error", "the file ends inside its HDF5 superblock: cut short")
    base_addr = int.from_bytes(sb[first:first + o_size], "little")
    eof = int.from_bytes(sb[eof_at:eof_at + o_size], "little")
    if base_addr + eof > inp.size:
        raise Defect("load_error", f"the HDF5 superblock says the file ends at byte {base_addr + eof}, it has "
                                   f"{inp.size}: cut short")
    return Outcome(detail=f"HDF5 signature and superblock v{version} ok, end-of-file address fits"
                          f"{_h5_walk(inp)}", kind="hdf5")


def _h5_signature_at(f: IO[bytes], size: int) -> int:
    at = 0
    while at + 8 <= size and at <= 2**30:
        f.seek(at)
        if f.read(8) == _H5_SIGNATURE:
            return at
        at = 512 if at == 0 else at * 2
    raise Defect("load_error", "no HDF5 signature at byte 0 or any user-block offset: garbage or another format")


def _h5_walk(inp: CheckInput) -> str:
    if not (inp.loaders.h5py and inp.full):
        return "; not opened (h5py not installed)" if inp.full else "; not opened within the call budget"
    h5py: Any = importlib.import_module("h5py")  # optional and untyped: typed here as Any
    datasets: list[str] = []
    try:
        with h5py.File(inp.path, "r") as h5:
            h5.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
    except Exception as exc:  # the loader's own words for a file it rejects, whatever their type
        raise Defect("load_error", f"h5py cannot open it ({type(exc).__name__}: {str(exc)[:200]})") from exc
    return f"; h5py opens it: {len(datasets)} datasets"


def check_parquet(inp: CheckInput) -> Outcome:
    with inp.path.open("rb") as f:
        start = f.read(4)
        f.seek(max(0, inp.size - 8))
        tail = f.read(8)
    if inp.size < 12 or start != b"PAR1" or tail[4:] != b"PAR1":
        raise Defect("load_error", "no PAR1 magic at both ends: cut short or not parquet")
    footer = int.from_bytes(tail[:4], "little")
    if footer > inp.size - 12:
        raise Defect("load_error", f"footer length {footer} exceeds the file: damaged")
    if not inp.loaders.pyarrow:
        return Outcome(detail="PAR1 magic and footer length ok; not read (pyarrow not installed)", kind="parquet")
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(inp.path).metadata
        pq.read_table(inp.path)
    except Exception as exc:  # the loader's own words for a file it rejects, whatever their type
        raise Defect("load_error", f"pyarrow cannot read it ({type(exc).__name__}: {str(exc)[:200]})") from exc
    return Outcome(detail=f"PAR1 footer ok; pyarrow reads {meta.num_rows} rows x {meta.num_columns} columns",
                   kind="parquet")
