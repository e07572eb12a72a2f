"""The local half of a packed pull: what the transfer has reached (kept beside the pull state in
<dest>/.rgt-pull/packed.json), and reading the received tar safely.

Nothing in the tar is trusted: a member is written only when its name is one the pull asked
for (a manifest path), it is a regular file, and it appears once; it is written under the
staging directory by that manifest path, never by the tar's own idea of where it goes, and
hashed on the way. Links, directories, devices, absolute names, `..` and names nobody asked
for are refused and named."""

from __future__ import annotations

import hashlib
import logging
import tarfile
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server import portable
from mcp_server.verify.artifacts.manifest import ManifestFile
from mcp_server.verify.artifacts.state import dump_json, state_dir, write_json_atomic

log = logging.getLogger(__name__)
CHUNK = 1024 * 1024


class PackedTransfer(BaseModel):
    """One packed transfer, from packing on the box to the last member moved into place."""

    model_config = ConfigDict(extra="forbid")

    job: str
    phase: Literal["packing", "pulling", "unpacking"]
    files: dict[str, str] = Field(description="each packed path -> the manifest sha256 it was packed for")
    box_dir: str = Field(description="the packer's job directory on the box")
    packer: str = Field(description="gnu (GNU tar) or python (tarfile on the box)")
    tar_sha256: str | None = Field(default=None, description="the tar's digest, computed once on the box")
    tar_bytes: int | None = None
    pack_err: str = Field(default="", description="the tail of the packer's errors (files it could not pack)")

    def covers(self, files: list[ManifestFile]) -> bool:
        """Every file still to pull was packed, for the same manifest digest."""
        return all(self.files.get(mf.path) == mf.sha256 for mf in files)


def _sidecar(dest: Path) -> Path:
    return state_dir(dest) / "packed.json"


def local_tar(dest: Path, sha256: str) -> Path:
    """Where the tar is received; named by its digest, so a re-pack that gives the same bytes
    (the pack is deterministic) resumes the same partial file."""
    return state_dir(dest) / f"pack-{sha256[:32]}.tar"


def load_packed(dest: Path) -> PackedTransfer | None:
    f = _sidecar(dest)
    if not f.exists():
        return None
    try:
        return PackedTransfer.model_validate_json(f.read_bytes())
    except ValidationError as exc:
        log.warning("packed transfer state %s is unreadable (%s): packing again", f, exc.errors()[0]["msg"])
        return None


def save_packed(dest: Path, transfer: PackedTransfer) -> None:
    write_json_atomic(_sidecar(dest), dump_json(transfer))


def forget_packed(dest: Path) -> None:
    """Forget the packed transfer (a tar received so far stays, for a re-pack to resume)."""
    _sidecar(dest).unlink(missing_ok=True)


def prune_tars(dest: Path, keep: Path | None = None) -> None:
    """Delete received tars, all but `keep`."""
    for tar in state_dir(dest).glob("pack-*.tar"):
        if tar != keep:
            tar.unlink(missing_ok=True)


def drop_packed(dest: Path) -> None:
    """Forget the packed transfer and delete every tar received."""
    forget_packed(dest)
    prune_tars(dest)


@dataclass(frozen=True)
class Received:
    """A member written to its staging file, with the size and digest of what was written."""

    mf: ManifestFile
    staged: Path
    size: int
    sha256: str


@dataclass(frozen=True)
class Refused:
    """A member (or the tar itself) that was not unpacked, and why."""

    name: str
    kind: str
    why: str


def safe_name(name: str) -> bool:
    """A relative path that stays inside the destination and names a file this machine can hold
    (on Windows `\\`, drives, `:` and device names count too: portable.local_name_problem)."""
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or any(ord(c) < 32 for c in name):
        return False
    w = PureWindowsPath(name)
    return portable.current().posix or not (w.anchor or ".." in w.parts or portable.local_name_problem(name))


def _refusal(m: tarfile.TarInfo, packed: set[str], seen: set[str]) -> Refused | None:
    if not safe_name(m.name):
        return Refused(m.name, "unsafe_name", "the pack holds an absolute path or '..': not unpacked")
    if m.name not in packed:
        return Refused(m.name, "extra", "the pack holds a file the pull did not ask for: not unpacked")
    if m.name in seen:
        return Refused(m.name, "extra", "the pack holds this name twice: the second copy was not unpacked")
    if not m.isreg():
        what = "symlink" if m.issym() else "hard link" if m.islnk() else "directory" if m.isdir() else "special file"
        return Refused(m.name, "changed", f"packed as a {what}, not a regular file: it changed on the box after it "
                                          "was hashed; not unpacked")
    return None


def members(tar_path: Path, packed: set[str], wanted: dict[str, ManifestFile],
            staging: Path) -> Generator[Received | Refused, None, None]:
    """Each member the pull still wants, written under `staging` at its manifest path and
    hashed; a refusal for everything else worth naming (members already in place are skipped).
    An unreadable tar ends with one refusal named `(pack)`."""
    seen: set[str] = set()
    try:
        with tarfile.open(tar_path, "r:") as tar:
            for m in tar:
                refused = _refusal(m, packed, seen)
                seen.add(m.name)
                if refused is not None:
                    yield refused
                elif m.name in wanted:
                    yield _write(tar, m, wanted[m.name], staging / m.name)
    except tarfile.TarError as exc:  # a local write error (disk full) is not the pack's fault: it propagates
        yield Refused("(pack)", "load_error", f"the received pack could not be read past this point: {exc}")


def _write(tar: tarfile.TarFile, m: tarfile.TarInfo, mf: ManifestFile, staged: Path) -> Received:
    src = tar.extractfile(m)
    if src is None:
        raise tarfile.ReadError(f"member {m.name} has no data")
    staged.parent.mkdir(parents=True, exist_ok=True)
    h, n = hashlib.sha256(), 0
    with src, staged.open("wb") as out:
        while chunk := src.read(CHUNK):
            out.write(chunk)
            h.update(chunk)
            n += len(chunk)
    return Received(mf, staged, n, h.hexdigest())
