"""The roster: which files under the result root must exist, matched against what the box
has. Missing entries and refused paths are findings, never silently skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pydantic import BaseModel, Field

from mcp_server import portable
from mcp_server.errors import InputError
from mcp_server.globs import MatchBudget, glob_regex

# Our own bookkeeping next to the data; never part of a roster match or an "extra".
OWN_FILES = re.compile(r"^(?:PULL_MANIFEST(?:\.\d+)?\.json|PULL_VERIFIED\.json|ACCEPTED\.json)$|(?:^|/)\.rgt-")


class RosterFinding(BaseModel):
    path: str
    kind: str = Field(description="e.g. missing, extra, changed, local_changed, hash_mismatch, empty, load_error, "
                                  "non_finite, missing_key, unsafe_pickle, check_error, incomplete_cell, missing_cells")
    message: str
    expected: str | None = None
    actual: str | None = None
    blocking: bool = Field(default=True, description="false for findings that are reported only (extras)")


@dataclass(frozen=True)
class RemoteEntry:
    kind: str  # f = regular file, l = symlink
    size: int
    mtime: float
    path: str  # relative to the root, posix
    target: str = ""


def check_pattern(p: str) -> str:
    """A roster entry: a relative path or glob, never absolute, never climbing out."""
    if not p or p.startswith(("/", "~")) or "\\" in p or any(ord(c) < 32 for c in p):
        raise InputError("roster entries are paths relative to the root", observed=p,
                         expected="e.g. 'best.pth', 'seed*/metrics.json', '**/*.safetensors'")
    if ".." in PurePosixPath(p).parts:
        raise InputError("roster entry climbs out of the root with '..'", observed=p)
    return p


def is_glob(p: str) -> bool:
    return any(c in p for c in "*?[")


@dataclass
class Resolution:
    files: list[RemoteEntry] = field(default_factory=list)
    findings: list[RosterFinding] = field(default_factory=list)


def resolve(roster: list[str], entries: list[RemoteEntry], budget: MatchBudget | None = None) -> Resolution:
    """Match the roster against the box's listing: files to manifest plus findings. With a
    `budget`, stops (a coded error naming the glob) once the call's time is up."""
    for p in roster:
        check_pattern(p)
    res = Resolution()
    candidates = [e for e in entries if not OWN_FILES.search(e.path)]
    chosen: dict[str, RemoteEntry] = {}
    for p in roster:
        hits = _hits(p, candidates, budget)
        if not hits:
            what = "glob matched no file" if is_glob(p) else "expected file is missing on the box"
            res.findings.append(RosterFinding(path=p, kind="missing", message=what))
        for e in hits:
            chosen.setdefault(e.path, e)
    for e in chosen.values():
        if e.kind == "l":
            res.findings.append(symlink_finding(e.path, e.target))
        elif any(ord(c) < 32 for c in e.path):
            res.findings.append(RosterFinding(path=repr(e.path), kind="unsafe_name",
                                              message="control character in name"))
        elif (why := portable.local_name_problem(e.path)) is not None:
            res.findings.append(RosterFinding(path=e.path, kind="unsafe_name",
                                              message=f"not pulled: its name {why} (rename it on the box)"))
        else:
            res.files.append(e)
    twins = _case_twins(res.files)
    res.findings += twins
    dropped = {t.path for t in twins}
    res.files = [e for e in res.files if e.path not in dropped]
    for e in candidates:
        if e.path not in chosen:
            res.findings.append(RosterFinding(path=e.path, kind="extra", blocking=False,
                                        message="on the box under the root but not in the roster (not pulled)"))
    res.files.sort(key=lambda e: e.path)
    return res


def _case_twins(files: list[RemoteEntry]) -> list[RosterFinding]:
    """Where this machine's file system folds case (Windows, macOS), two box files whose names
    differ only in case would land on one local file: the second (and any further) is a finding
    and is not pulled, so nothing is overwritten."""
    if not portable.current().folds_case:
        return []
    seen: dict[str, str] = {}
    out = []
    for e in sorted(files, key=lambda f: f.path):
        first = seen.setdefault(e.path.casefold(), e.path)
        if first != e.path:
            out.append(RosterFinding(path=e.path, kind="unsafe_name", expected=f"a name unlike {first} but in case",
                                     message=f"{portable.current().label} would store it and {first} as one file: "
                                             "rename one of them on the box, or pull to a case-sensitive folder"))
    return out


def symlink_finding(path: str, target: str) -> RosterFinding:
    """The finding for a symlink at `path` (relative to the root) pointing at `target`: refused,
    never followed (aggregate_results refuses one the same way)."""
    return RosterFinding(path=path, kind="symlink", actual=target,
                         message="symlink refused (a manifest holds regular files only)"
                         + ("; it points outside the root" if _escapes(path, target) else ""))


def _hits(pattern: str, candidates: list[RemoteEntry], budget: MatchBudget | None) -> list[RemoteEntry]:
    rx, hits = glob_regex(pattern), []
    for n, e in enumerate(candidates):
        if budget is not None:
            budget.check(pattern, n, len(candidates))
        if rx.match(e.path):
            hits.append(e)
    return hits


def _escapes(path: str, target: str) -> bool:
    if target.startswith("/"):
        return True
    parts: list[str] = []
    for part in (*PurePosixPath(path).parent.parts, *PurePosixPath(target).parts):
        if part == "..":
            if not parts:
                return True
            parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    return False


def parse_listing(data: bytes) -> list[RemoteEntry]:
    """`find -printf '%y\\0%s\\0%T@\\0%P\\0%l\\0'` output -> entries: five NUL-terminated fields
    each, so no character in a name (a TAB, a newline) can move a field; a name with a control
    character is listed as it is and refused by the roster (unsafe_name)."""
    fields = data.split(b"\0")
    out = []
    for i in range(0, len(fields) - 4, 5):
        kind, size, mtime, path, target = (f.decode("utf-8", "surrogateescape") for f in fields[i:i + 5])
        if kind not in ("f", "l") or not size.isdigit():
            break  # the stream is cut or not ours: never guess the fields after it
        out.append(RemoteEntry(kind=kind, size=int(size), mtime=float(mtime or 0), path=path, target=target))
    return out
