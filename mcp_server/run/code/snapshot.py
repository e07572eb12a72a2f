"""The local side of a code snapshot: which files belong to it (git's own view of the tree when
the directory is a git work tree, else the root .gitignore through pathspec, plus the call's
excludes, less what local_policy never sends and anything under a symlinked folder), their hashes,
the size caps, the content-derived id and the git provenance."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pathspec
from pydantic import BaseModel, Field

from mcp_server import portable, portable_io
from mcp_server.errors import InputError
from mcp_server.run.code.local_policy import (
    SCAN_BYTES,
    DeniedDir,
    SkippedFile,
    content_reason,
    denied_dir_of,
    name_reason,
)

# Credential files a push refuses to send even when git tracks them (the same list tail_logs never
# reads): a key on a rented box is a key given to whoever else can read that disk.
CREDENTIALS = [".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc",
               ".git-credentials", ".pgpass", ".aws/", ".ssh/", ".kube/config", ".docker/config.json",
               "*credentials*.json", "*service-account*.json"]
ALWAYS_EXCLUDED = [".git/", "__pycache__/", "*.pyc", ".venv/", ".rgt/", ".ipynb_checkpoints/", ".DS_Store"]
DIFF_CAP = 1024 * 1024  # the uncommitted diff kept with the snapshot
_GIT_TIMEOUT_S = 20


@dataclass(frozen=True)
class LocalFile:
    path: str  # relative, "/"-separated
    size: int
    sha256: str
    executable: bool
    secret: str | None = None  # what secret its first bytes hold (local_policy.content_reason)


class Provenance(BaseModel):
    git_commit: str | None = None
    git_branch: str | None = None
    git_dirty: bool | None = Field(default=None, description="uncommitted changes (tracked or untracked) were pushed")
    diff_bytes: int = Field(default=0, description="size of the uncommitted diff kept in .rgt/uncommitted.diff")
    diff_truncated: bool = False
    untracked: list[str] = Field(default_factory=list, description="untracked files pushed (first 50)")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=_GIT_TIMEOUT_S, check=False)


def is_git_tree(root: Path) -> bool:
    """The directory is in a git work tree (its root or a folder inside it): git lists its files
    relative to it, with every .gitignore above and below applied."""
    try:
        res = _git(root, "rev-parse", "--is-inside-work-tree")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and res.stdout.strip() == b"true"


def candidate_paths(root: Path) -> list[str]:
    """Files git would commit (tracked and untracked-but-not-ignored) in a git work tree, else
    every file the root .gitignore does not exclude."""
    if is_git_tree(root):
        res = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        if res.returncode != 0:
            raise InputError("git ls-files failed in the source directory", path=str(root),
                             observed=res.stderr.decode("utf-8", "replace")[-300:])
        return sorted({p for p in res.stdout.decode("utf-8", "surrogateescape").split("\0") if p})
    ignore = root / ".gitignore"
    spec = pathspec.GitIgnoreSpec.from_lines(ignore.read_text(encoding="utf-8").splitlines() if ignore.is_file()
                                             else [])
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = portable.box_relpath(Path(dirpath), root)
        rel_dir = rel_dir and rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not spec.match_file(rel_dir + d + "/"))
        out += [rel_dir + f for f in filenames if not spec.match_file(rel_dir + f)]
    return sorted(out)


@dataclass
class Selection:
    """The snapshot's files, the symlinks left out, and every other file left out with its reason."""

    keep: list[str]
    links: list[str]
    skipped: list[SkippedFile]


def linked_folder(root: Path, rel: str, seen: dict[str, bool]) -> str | None:
    """The first folder on `rel`'s way down from `root` that is a symlink (git still lists a tracked
    file under a folder since replaced by a link; reading it would read wherever the link leads)."""
    parts = rel.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if prefix not in seen:
            try:
                seen[prefix] = stat.S_ISLNK(os.lstat(os.path.join(root, prefix)).st_mode)
            except OSError:
                seen[prefix] = False
        if seen[prefix]:
            return prefix
    return None


def _left_out(root: Path, real_root: str, rel: str, denied: list[DeniedDir], seen: dict[str, bool]) -> str | None:
    """Why `rel` is never sent (a symlinked folder on its path, a denied folder, its name)."""
    folder = linked_folder(root, rel, seen)
    if folder is not None:
        return f"its folder {folder} is a symlink: never read through"
    label = denied_dir_of(real_root + rel, denied)
    if label is not None:
        return f"inside {label}: never sent"
    reason = name_reason(rel)
    return None if reason is None else f"{reason}: never sent"


def select(root: Path, exclude: list[str], denied: list[DeniedDir] | None = None) -> Selection:
    """The snapshot's files, the symlinks and the files never sent (each with its reason); a
    credential file by name refuses the whole push."""
    drop = pathspec.GitIgnoreSpec.from_lines([*ALWAYS_EXCLUDED, *exclude])
    secret = pathspec.GitIgnoreSpec.from_lines(CREDENTIALS)
    real_root, seen = root.resolve().as_posix().rstrip("/") + "/", dict[str, bool]()
    out, refused = Selection([], [], []), list[str]()
    for rel in candidate_paths(root):
        if drop.match_file(rel):
            continue
        if any(ord(c) < 32 for c in rel) or rel.startswith("/") or ".." in rel.split("/"):
            raise InputError("a file name the box cannot take safely (a control character or ..)",
                             observed=repr(rel)[:200], next_step="rename it, or exclude it")
        why = _left_out(root, real_root, rel, denied or [], seen)
        if why is not None:
            out.skipped.append(SkippedFile(path=rel, reason=why))
        elif secret.match_file(rel):
            refused.append(rel)
        else:
            try:
                mode = os.lstat(os.path.join(root, rel)).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                out.links.append(rel)
            elif stat.S_ISREG(mode):
                out.keep.append(rel)
    if refused:
        raise InputError("refused: the tree holds credential files: " + ", ".join(refused[:10]),
                         next_step="add them to .gitignore or exclude=[...]; pass secrets to runs with secret_env "
                         "(by name) instead of files")
    return out


def hash_files(root: Path, paths: list[str]) -> list[LocalFile]:
    """Each file's hash, and what secret its first SCAN_BYTES hold (read once for both). The
    last component is opened without following a link: one made since the listing fails here."""
    out = []
    for rel in paths:
        h = hashlib.sha256()
        fd = portable_io.open_read_no_follow(os.path.join(root, rel))
        with os.fdopen(fd, "rb") as f:
            head = f.read(SCAN_BYTES)
            h.update(head)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            st = os.fstat(f.fileno())
        out.append(LocalFile(rel, st.st_size, h.hexdigest(), bool(st.st_mode & 0o111), content_reason(head)))
    return out


def sizes(root: Path, paths: list[str]) -> list[LocalFile]:
    """Sizes only (no hash yet): enough to refuse an oversized tree before reading it."""
    out = []
    for rel in paths:
        st = (root / rel).stat()
        out.append(LocalFile(rel, st.st_size, "", bool(st.st_mode & 0o111)))
    return out


def check_caps(files: list[LocalFile], max_file_mb: float, max_total_mb: float) -> None:
    """Refuse, naming the largest offenders, a file or a tree over its cap (a forgotten data/ or
    checkpoint pushed as code)."""
    big = sorted((f for f in files if f.size > max_file_mb * 2**20), key=lambda f: -f.size)
    total = sum(f.size for f in files)
    if big or total > max_total_mb * 2**20:
        worst = big or sorted(files, key=lambda f: -f.size)[:5]
        names = ", ".join(f"{f.path} ({f.size / 2**20:.1f} MiB)" for f in worst[:5])
        what = (f"{len(big)} file(s) over max_file_mb={max_file_mb:g}" if big else
                f"the tree is {total / 2**20:.1f} MiB, over max_total_mb={max_total_mb:g}")
        raise InputError(f"refused: {what}; largest: {names}",
                         next_step="exclude them (exclude=['data/', '*.ckpt']) or add them to .gitignore; data "
                         "belongs on the box's data tier (fetch_data), not in code. Raise the cap only if they "
                         "really are code")


def manifest_text(files: list[LocalFile]) -> str:
    """sha256sum's format, sorted by path: what the box checks and what the id is made from."""
    return "".join(f"{f.sha256}  {f.path}\n" for f in sorted(files, key=lambda f: f.path))


def snapshot_id(files: list[LocalFile]) -> str:
    """Same tree (paths, contents, executable bits) -> same id."""
    h = hashlib.sha256(manifest_text(files).encode())
    h.update("".join(f.path + "\n" for f in sorted(files, key=lambda f: f.path) if f.executable).encode())
    return h.hexdigest()[:16]


def provenance(root: Path, pushed: list[str]) -> tuple[Provenance, bytes]:
    """The git facts of the pushed tree and its uncommitted diff (capped)."""
    if not is_git_tree(root):
        return Provenance(), b""
    head = _git(root, "rev-parse", "HEAD")
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    diff = _git(root, "diff", "HEAD", "--binary", "--relative")
    untracked = _git(root, "ls-files", "-z", "--others", "--exclude-standard").stdout.decode(
        "utf-8", "surrogateescape").split("\0")
    kept = set(pushed)
    extra = sorted(p for p in untracked if p in kept)
    body = diff.stdout if diff.returncode == 0 else b""
    prov = Provenance(
        git_commit=head.stdout.decode().strip() if head.returncode == 0 else None,
        git_branch=branch.stdout.decode().strip() if branch.returncode == 0 else None,
        git_dirty=bool(body) or bool(extra), diff_bytes=len(body), diff_truncated=len(body) > DIFF_CAP,
        untracked=extra[:50])
    return prov, body[:DIFF_CAP]
