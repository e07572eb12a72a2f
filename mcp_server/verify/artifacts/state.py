"""The pull's state between calls: one `PullState`, kept in <dest>/.rgt-pull/state.json.

A state file that does not parse as the current model (corrupt, or written by an older
version) is never half-read: the verification starts a clean new round instead."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.paths.local import LocalScope, check_local
from mcp_server.verify.artifacts.cells import Cell
from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.identity import HostIdentity
from mcp_server.verify.artifacts.manifest import Manifest, ManifestFile
from mcp_server.verify.artifacts.roster import RosterFinding

log = logging.getLogger(__name__)

Phase = Literal["listing", "hashing", "pulling", "checking", "finalize", "verified"]


class ListedFile(BaseModel):
    """A roster file as the box listed it."""

    size: int
    mtime: float


class PulledFile(BaseModel):
    """What happened to one manifest file locally."""

    status: Literal["done", "failed", "stale"] = Field(
        description="done: verified in place; failed: its bytes differ from the manifest; stale: changed locally")
    sha256: str = Field(description="digest of the bytes received")
    size: int = Field(description="bytes received")
    mtime: float | None = Field(default=None, description="done: the local file's mtime when it was verified")
    ctime_ns: int | None = Field(default=None, description="done: its ctime (which utime cannot set back)")
    inode: int | None = Field(default=None, description="done: its inode (a replaced file has a new one)")
    round: int | None = Field(default=None, description="failed: the round it failed in")
    kind: Literal["size_mismatch", "hash_mismatch"] | None = None


def stamped(rec: PulledFile, st: os.stat_result) -> PulledFile:
    """`rec` with the local file's mtime, ctime and inode as they are now, after verification."""
    rec.mtime, rec.ctime_ns, rec.inode = st.st_mtime, st.st_ctime_ns, st.st_ino
    return rec


def untouched(rec: PulledFile, st: os.stat_result) -> bool:
    """The local file is the one verified: same size, mtime, ctime and inode. A rewrite with its
    mtime restored still moves the ctime, so it is caught; a record from before ctimes were kept
    counts as touched (the file is re-hashed, never trusted)."""
    return (st.st_size == rec.size and rec.mtime is not None and abs(st.st_mtime - rec.mtime) < 1e-6
            and rec.ctime_ns == st.st_ctime_ns and rec.inode == st.st_ino)


class Listing(BaseModel):
    """The root as the box listed it, and the hashing job started for its roster files."""

    abs_root: str = Field(description="the root's physical path on the box")
    listed_at: float | None = Field(description="the box's clock when it listed the root")
    hasher: str
    newest_mtime: float
    files: dict[str, ListedFile]
    job: str | None = Field(default=None, description="the on-box hashing job, once started")
    widened_by: str | None = Field(default=None, description="the inventory's verify_roots entry that alone "
                                   "allowed this root (not the durable or scratch root)")


class PulledManifest(BaseModel):
    """The manifest on the box (and a copy in the destination, named `name`)."""

    name: str
    path: str | None = Field(default=None, description="its absolute path on the box (none: a round begun by an "
                                                       "older version, which wrote `name` beside the data)")
    sha256: str
    content: Manifest


class PullState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    round: int
    phase: Phase
    host: str
    root: str
    roster: list[str]
    run_id: str | None
    files: dict[str, PulledFile] = Field(default_factory=dict)
    checks: dict[str, FileVerdict] = Field(default_factory=dict)
    findings: list[RosterFinding] = Field(default_factory=list)
    listing: Listing | None = None
    producer: HostIdentity | None = Field(default=None, description="the box, as it reported itself at the listing")
    verifier: HostIdentity | None = Field(default=None, description="this machine, at the listing")
    cells: list[Cell] | None = Field(default=None, description="the cells found at the listing, when expected")
    manifest: PulledManifest | None = None
    passed: bool | None = None
    verified_path: str | None = None

    def is_done(self, path: str) -> bool:
        rec = self.files.get(path)
        return rec is not None and rec.status == "done"

    def listed(self) -> Listing:
        if self.listing is None:
            raise RuntimeError(f"pull state in phase {self.phase} has no listing")
        return self.listing

    def manifest_files(self) -> list[ManifestFile]:
        return self.manifest.content.files if self.manifest is not None else []


def confined_dest(dest: str | None, default: Path, roots: Sequence[Path]) -> Path:
    """Where a pull or acceptance writes locally: `default` when no dest is given; else dest,
    relative to the first root. Either way through the path policy's local side: resolved (every
    symlink followed) inside one of `roots`, never on the deny list or in the server's state
    beyond them; an agent must not be able to write into ~/.ssh or over the user's files."""
    scope = LocalScope(tuple(roots), "the folders verify_artifacts writes into",
                       next_step="omit dest (the default is under RGT_HOME/pulls), give a path relative to it, or "
                                 "add the folder to RGT_PULL_ROOTS (separated by ':')")
    return check_local(default if dest is None else dest, "write", scope, what="dest", done="nothing was written",
                       base=roots[0])


def default_dest(base: Path, host: str, run_id: str | None, root: str) -> Path:
    """<base>/<host>/<run id, else the root as one name>: where a local copy or record goes by default."""
    tail = run_id or re.sub(r"[^A-Za-z0-9._-]+", "_", root.strip("/~")) or "root"
    return base / re.sub(r"[^A-Za-z0-9._-]+", "_", host) / tail


def state_dir(dest: Path) -> Path:
    return dest / ".rgt-pull"


def _state_file(dest: Path) -> Path:
    return state_dir(dest) / "state.json"


def write_json_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def dump_json(model: BaseModel) -> str:
    """Stable, readable JSON for the files we write (sorted keys, 2-space indent)."""
    return json.dumps(model.model_dump(mode="json", by_alias=True), indent=2, sort_keys=True)


def save_state(dest: Path, state: PullState) -> None:
    write_json_atomic(_state_file(dest), dump_json(state))


def load_state(dest: Path) -> PullState | None:
    """The saved state, or None when there is none or it is not a readable PullState."""
    f = _state_file(dest)
    if not f.exists():
        return None
    try:
        return PullState.model_validate_json(f.read_bytes())
    except ValidationError as exc:
        log.warning("pull state %s is unreadable (%s): starting a new round", f, exc.errors()[0]["msg"])
        return None
