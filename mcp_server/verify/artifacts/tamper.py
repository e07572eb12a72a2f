"""Local tamper: when a new round starts, every file an earlier round verified into the local copy
is held against what was verified (size; sha256 when its mtime moved). Each one missing or changed
is named in the findings before anything is pulled again; nothing is re-pulled silently."""

from __future__ import annotations

import hashlib
from pathlib import Path

from mcp_server.verify.artifacts.roster import RosterFinding
from mcp_server.verify.artifacts.state import PulledFile, stamped, untouched

CHUNK = 1024 * 1024


def local_changes(dest: Path, files: dict[str, PulledFile]) -> list[RosterFinding]:
    """A finding per verified file that is missing or differs; those are marked stale (pulled again)."""
    out = []
    for rel, rec in sorted(files.items()):
        if rec.status != "done":
            continue
        why = _difference(dest / rel, rec)
        if why is None:
            continue
        rec.status = "stale"
        out.append(RosterFinding(
            path=rel, kind="local_changed", blocking=False, expected=f"{rec.size} bytes, sha256 {rec.sha256}",
            message=f"local copy changed since verification: {rel} ({why}); pulled again from the box if still in "
                    "the roster"))
    return out


def _difference(path: Path, rec: PulledFile) -> str | None:
    """What differs from the verified file, or None (a touched but identical file gets its new stamps)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "missing"
    if not path.is_file():
        return "no longer a regular file"
    if st.st_size != rec.size:
        return f"size differs: {st.st_size} bytes, verified {rec.size}"
    if untouched(rec, st):
        return None
    if _sha256(path) != rec.sha256:
        return "sha256 differs"
    stamped(rec, st)
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()
