"""What every content check shares: its input, its outcome, the Defect it raises, which optional
loaders it may use, the non-finite scan over raw little-endian floats, and the expect_keys rule."""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import pickle
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MAX_TEXT_CHECK = 256 * 1024 * 1024
# Above this a checkpoint gets its structure checked (zip directory, pickle, sizes), not a CRC pass,
# a NaN scan or a load: one call must stay inside its time budget. Its bytes are proven by sha256.
FULL_CHECK_MAX = 2 * 1024**3
_CHUNK = 16 * 1024 * 1024
ZIP_MAGIC = b"PK\x03\x04"


class Defect(Exception):
    """A file that is not what its type promises; `finding` is the verdict's finding kind."""

    def __init__(self, finding: str, detail: str, kind: str | None = None) -> None:
        super().__init__(detail)
        self.finding, self.detail, self.kind = finding, detail, kind


@dataclass(frozen=True)
class Loaders:
    """The optional libraries a check may load a file with."""

    torch: bool = False
    numpy: bool = False
    pyarrow: bool = False
    h5py: bool = False

    @staticmethod
    @functools.cache
    def installed() -> Loaders:
        def has(module: str) -> bool:
            return importlib.util.find_spec(module) is not None

        return Loaders(torch=has("torch"), numpy=has("numpy"), pyarrow=has("pyarrow"), h5py=has("h5py"))

    @staticmethod
    def none() -> Loaders:
        return Loaders()


@dataclass(frozen=True)
class CheckInput:
    path: Path
    rel: str
    size: int
    allow_pickle: bool
    expect_keys: list[str]
    loaders: Loaders
    hand_made: bool = False  # written by hand: a last CSV row without a newline is not a cut row

    @property
    def full(self) -> bool:
        """Small enough for a CRC pass, a NaN scan and a load within the call budget."""
        return self.size <= FULL_CHECK_MAX


@dataclass
class Outcome:
    detail: str
    kind: str | None = None
    inspected: bool = True
    scalars: dict[str, float] | None = field(default=None)


# Exceptions a damaged input raises from the parsers we use: damage, not a bug in the check.
_DAMAGE = (ValueError, EOFError, OSError, zipfile.BadZipFile, struct.error, pickle.UnpicklingError, csv.Error,
           json.JSONDecodeError, zlib.error, OverflowError, MemoryError, RecursionError)


def load_error(exc: Exception) -> tuple[str, str]:
    """(finding, detail) for an exception a check raised."""
    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, _DAMAGE):
        return "load_error", f"{type(exc).__name__}: {text}"
    return "check_error", (f"the check itself raised {type(exc).__name__}: {text} (counted as a failure; "
                           "the file may be fine: report this to the server's maintainers)")


# Raw float layouts: (numpy unsigned view, exponent mask). A value is NaN or +-Inf exactly when
# every exponent bit is set, so one mask test covers fp16, bf16, fp32 and fp64 (and complex parts).
FLOAT_BITS: dict[str, tuple[str, int]] = {
    "f16": ("<u2", 0x7C00), "bf16": ("<u2", 0x7F80), "f32": ("<u4", 0x7F800000),
    "f64": ("<u8", 0x7FF0000000000000), "c64": ("<u4", 0x7F800000), "c128": ("<u8", 0x7FF0000000000000),
}


def has_non_finite(read: Callable[[int], bytes], nbytes: int, code: str) -> bool:
    """Whether `nbytes` of raw little-endian floats of type `code`, read in chunks, hold a NaN or Inf."""
    import numpy as np

    view, mask = FLOAT_BITS[code]
    width, bits_set = np.dtype(view).itemsize, np.array(mask, dtype=view)
    left, carry = nbytes, b""
    while left > 0:
        chunk = read(min(_CHUNK, left))
        if not chunk:
            raise Defect("load_error", f"data ends {left} bytes before its header says")
        left -= len(chunk)
        buf = carry + chunk
        usable = len(buf) - len(buf) % width
        carry = buf[usable:]  # a short read can split an element
        values = np.frombuffer(buf, dtype=view, count=usable // width)
        if ((values & bits_set) == bits_set).any():
            return True
    return False


def missing_keys(keys: Iterable[str] | None, expect: list[str]) -> list[str]:
    """Expected keys found neither as a top-level key nor as the dotted prefix of one
    (`model` matches `model.encoder.weight` in a bare state_dict)."""
    have = set(keys or ())
    return [k for k in expect
            if k not in have and not any(h.startswith(k if k.endswith(".") else f"{k}.") for h in have)]


def check_expected(keys: Iterable[str] | None, expect: list[str], holds: str) -> str:
    """The detail fragment for a checkpoint whose keys pass expect_keys; a Defect if they do not."""
    if not expect:
        return ""
    missing = missing_keys(keys, expect)
    if missing:
        raise Defect("missing_key", f"expected key(s) {missing} absent: {holds}")
    return f"; expected keys {expect} present"


def describe_keys(keys: list[str] | None, what: str) -> str:
    if keys is None:
        return f"its top-level object is {what}, not a dict"
    shown = ", ".join(repr(k) for k in keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    return f"its top-level keys are {shown or 'none'}"


def head(path: Path, n: int = 16) -> bytes:
    with path.open("rb") as f:
        return f.read(n)


@contextmanager
def open_zip(path: Path, what: str) -> Iterator[zipfile.ZipFile]:
    """The open archive, or a Defect saying why it cannot be read (a missing central directory
    first). Whatever zipfile raises on a member it cannot read back becomes a Defect too."""
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        cut = (": it starts like a zip, so it was cut short (a save that did not finish?)"
               if head(path, 4) == ZIP_MAGIC else "")
        raise Defect("load_error", f"{what} without a readable zip central directory ({exc}){cut}") from exc
    except _ZIP_DAMAGE as exc:
        raise Defect("load_error", f"{what} whose zip directory is damaged ({_named(exc)})") from exc
    with z:
        try:
            yield z
        except _ZIP_DAMAGE as exc:
            raise Defect("load_error", f"{what}: a zip member cannot be read back ({_named(exc)})") from exc


# zipfile's words for damage besides BadZipFile: an unknown version or method, "encrypted", short data.
_ZIP_DAMAGE = (NotImplementedError, RuntimeError, EOFError, zlib.error, zipfile.BadZipFile)


def _named(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:160]}"


def zip_intact(z: zipfile.ZipFile, size: int, full: bool) -> str:
    """Every member's CRC (or, above FULL_CHECK_MAX, every member inside the file); how, as text."""
    infos = z.infolist()
    if not full:
        for i in infos:
            if i.header_offset + i.compress_size > size:
                raise Defect("load_error", f"zip member {i.filename} runs past the end of the file")
        return f"zip directory ok ({len(infos)} members; CRCs not checked above {FULL_CHECK_MAX >> 30} GiB)"
    bad = z.testzip()
    if bad is not None:
        raise Defect("load_error", f"zip member {bad} fails its CRC check: its bytes are damaged")
    return f"zip directory and {len(infos)} member CRCs ok"
