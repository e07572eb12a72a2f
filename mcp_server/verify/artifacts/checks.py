"""Content checks by file type on a pulled file: is it whole, does it parse, is it sane?

Every checkpoint or array file (.pt .pth .ckpt .bin .safetensors .npy .npz .h5 .pkl) gets a
structural check that needs only the standard library (zip directory and CRCs, pickle stream,
headers and sizes), then a load check when the loader is installed (torch weights-only, numpy,
h5py). Text results are parsed strictly (json, jsonl, csv/tsv), parquet by footer and pyarrow.
A file of any other type is listed as not inspected: only its bytes and sha256 are proven.
No input crashes the checker: whatever a check raises becomes a failing verdict naming it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from mcp_server.globs import glob_regex
from mcp_server.verify.artifacts import checks_arrays, checks_pickle, checks_text, checks_torch
from mcp_server.verify.artifacts.checks_base import (
    FULL_CHECK_MAX,
    MAX_TEXT_CHECK,
    CheckInput,
    Defect,
    Loaders,
    Outcome,
    load_error,
)

__all__ = ["FULL_CHECK_MAX", "MAX_TEXT_CHECK", "VERIFIER_VERSION", "FileVerdict", "Loaders", "check_file"]

log = logging.getLogger(__name__)
VERIFIER_VERSION = "rgt-verify/2"


class FileVerdict(BaseModel):
    path: str
    kind: str
    ok: bool
    detail: str
    finding: str | None = None  # load_error | unsafe_pickle | non_finite | empty | missing_key | check_error
    inspected: bool = Field(default=True, description="false: type not inspected, only bytes and sha256 proven")
    scalars: dict[str, float] | None = Field(default=None, description="top-level numbers of a JSON object")


Checker = Callable[[CheckInput], Outcome]
# suffix -> (kind, checker). Kinds name the family a verdict speaks for.
_CHECKERS: dict[str, tuple[str, Checker]] = {
    ".pt": ("torch", checks_torch.check_torch), ".pth": ("torch", checks_torch.check_torch),
    ".ckpt": ("torch", checks_torch.check_torch), ".bin": ("bin", checks_torch.check_bin),
    ".safetensors": ("safetensors", checks_arrays.check_safetensors),
    ".npy": ("numpy", checks_arrays.check_npy), ".npz": ("numpy", checks_arrays.check_npz),
    ".h5": ("hdf5", checks_arrays.check_h5), ".hdf5": ("hdf5", checks_arrays.check_h5),
    ".pkl": ("pickle", checks_pickle.check_pickle), ".pickle": ("pickle", checks_pickle.check_pickle),
    ".json": ("json", checks_text.check_json), ".jsonl": ("jsonl", checks_text.check_jsonl),
    ".csv": ("csv", checks_text.check_csv), ".tsv": ("tsv", checks_text.check_csv),
    ".parquet": ("parquet", checks_arrays.check_parquet),
}


def check_file(path: Path, rel: str, allow_pickle: bool = False, expect_keys: list[str] | None = None, *,
               loaders: Loaders | None = None, hand_made: Sequence[str] = ()) -> FileVerdict:
    """The verdict on one pulled file. `expect_keys` applies to checkpoints (torch files and
    safetensors); `loaders` narrows which optional libraries may be used (tests pass
    Loaders.none() to prove the structural checks stand alone); a file `hand_made` matches (globs)
    was written by hand, so a last CSV row without a newline is no cut row."""
    suffix = Path(rel.lower()).suffix
    kind, checker = _CHECKERS.get(suffix, ("file", _not_inspected))
    try:
        size = path.stat().st_size
        if size == 0 and checker is not _not_inspected:
            raise Defect("empty", f"0 bytes: an empty {suffix} file (a save that never wrote, or was cut to nothing)")
        got = checker(CheckInput(path=path, rel=rel, size=size, allow_pickle=allow_pickle,
                                 expect_keys=list(expect_keys or []), loaders=loaders or Loaders.installed(),
                                 hand_made=any(glob_regex(p).match(rel) for p in hand_made)))
    except Defect as d:
        return FileVerdict(path=rel, kind=d.kind or kind, ok=False, detail=d.detail, finding=d.finding)
    except Exception as exc:
        return _crashed(rel, kind, exc)
    return FileVerdict(path=rel, kind=got.kind or kind, ok=True, detail=got.detail, inspected=got.inspected,
                       scalars=got.scalars)


def _crashed(rel: str, kind: str, exc: Exception) -> FileVerdict:
    """Anything a check did not expect: an input it cannot read, or a bug in the check. The file
    fails either way (the gate stays shut), the exception type is named, and it is logged."""
    finding, detail = load_error(exc)
    if finding == "check_error":
        log.warning("content check of %s raised %s", rel, type(exc).__name__, exc_info=exc)
    return FileVerdict(path=rel, kind=kind, ok=False, detail=detail, finding=finding)


def _not_inspected(inp: CheckInput) -> Outcome:
    return Outcome(detail="not inspected: no content check for this file type (bytes and sha256 only)",
                   inspected=False)
