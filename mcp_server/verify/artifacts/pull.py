"""The resumable pull: each manifest file streams into <dest>/.rgt-pull/partial/<path>,
hashed while it is received; a finished file whose size and SHA-256 match the manifest is
moved into place. A partial file resumes where it stopped; a verified file is never sent
again (its size and mtime are recorded). Stops cleanly at the call's deadline."""

from __future__ import annotations

import asyncio
import hashlib
import os
import queue
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import BinaryIO, Literal

from mcp_server.hosts.base import Host
from mcp_server.verify.artifacts.manifest import ManifestFile
from mcp_server.verify.artifacts.roster import RosterFinding
from mcp_server.verify.artifacts.state import PulledFile, PullState, save_state, state_dir

CHUNK = 1024 * 1024
Progress = Callable[[int, int, str], Awaitable[None]]


def _hash_prefix(path: Path, h: hashlib._Hash) -> int:
    """Hash a partial file already on disk (a resumed transfer's earlier bytes)."""
    n = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    return n


def local_ok(dest: Path, mf: ManifestFile, rec: PulledFile | None) -> bool:
    """A file verified earlier is skipped when its recorded hash matches and it is untouched."""
    if rec is None or rec.status != "done" or rec.sha256 != mf.sha256 or rec.mtime is None:
        return False
    p = dest / mf.path
    try:
        st = p.stat()
    except FileNotFoundError:
        return False
    return st.st_size == mf.bytes and abs(st.st_mtime - rec.mtime) < 1e-6


class Puller:
    def __init__(self, host: Host, abs_root: str, dest: Path, state: PullState, deadline: float,
                 progress: Progress | None) -> None:
        self.host, self.abs_root, self.dest, self.state = host, abs_root, dest, state
        self.deadline, self.progress = deadline, progress
        self.transferred = 0
        self.findings: list[RosterFinding] = []

    async def run(self, files: list[ManifestFile]) -> bool:
        """Pull what is missing; True when every file is done (verified or failed)."""
        total = sum(f.bytes for f in files)
        done_bytes = sum(f.bytes for f in files if self._status(f) == "done")
        for mf in files:
            if self._status(mf) == "done":
                continue
            if time.monotonic() > self.deadline:
                return False
            finished = await self._one(mf, done_bytes, total)
            if not finished:
                return False
            done_bytes += mf.bytes
        return True

    def _status(self, mf: ManifestFile) -> str:
        rec = self.state.files.get(mf.path)
        if rec is None:
            return "pending"
        if rec.status == "done" and local_ok(self.dest, mf, rec):
            return "done"
        if rec.status == "done" and rec.sha256 == mf.sha256 and (self.dest / mf.path).exists():
            self.findings.append(RosterFinding(
                path=mf.path, kind="changed", blocking=False, expected=f"{mf.bytes} bytes, as verified",
                actual=f"{(self.dest / mf.path).stat().st_size} bytes",
                message="the local copy no longer matched what was verified (truncated or edited): pulled again"))
            rec.status = "stale"
        if rec.status == "failed" and rec.round == self.state.round:
            return "done"
        return "pending"

    async def _one(self, mf: ManifestFile, done_bytes: int, total: int) -> bool:
        partial = state_dir(self.dest) / "partial" / mf.path
        partial.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        offset = partial.stat().st_size if partial.exists() else 0
        if offset > mf.bytes:
            partial.unlink()
            offset = 0
        if offset:
            await asyncio.to_thread(_hash_prefix, partial, h)
        with partial.open("ab") as out:
            # A writer thread hashes and writes while the event loop keeps receiving.
            q: queue.Queue[bytes | None] = queue.Queue(maxsize=16)
            writer = asyncio.ensure_future(asyncio.to_thread(_drain, q, out, h))
            pos, stopped = offset, False
            try:
                async for chunk in self.host.read_stream(f"{self.abs_root}/{mf.path}", offset, CHUNK):
                    chunk = chunk[: max(0, mf.bytes - pos)]
                    while q.full():
                        await asyncio.sleep(0.001)
                    q.put_nowait(chunk)
                    pos += len(chunk)
                    self.transferred += len(chunk)
                    if self.progress:
                        await self.progress(done_bytes + pos, total, mf.path)
                    if pos >= mf.bytes:
                        break
                    if time.monotonic() > self.deadline:
                        stopped = True
                        break
            finally:
                q.put(None)
                await writer
                out.flush()
                os.fsync(out.fileno())
        if stopped:
            return False
        self._finish(mf, partial, pos, h.hexdigest())
        return True

    def _finish(self, mf: ManifestFile, partial: Path, size: int, digest: str) -> None:
        if size != mf.bytes or digest != mf.sha256:
            kind: Literal["size_mismatch", "hash_mismatch"] = "size_mismatch" if size != mf.bytes else "hash_mismatch"
            self.findings.append(RosterFinding(
                path=mf.path, kind=kind, expected=f"{mf.bytes} bytes, sha256 {mf.sha256}",
                actual=f"{size} bytes, sha256 {digest}",
                message="the pulled bytes differ from the manifest built on the box: the file changed after "
                        "the manifest (or the transfer corrupted it)"))
            partial.unlink(missing_ok=True)
            self.state.files[mf.path] = PulledFile(status="failed", round=self.state.round, kind=kind,
                                                   sha256=digest, size=size)
        else:
            final = self.dest / mf.path
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(partial, final)
            self.state.files[mf.path] = PulledFile(status="done", sha256=digest, size=size,
                                                   mtime=final.stat().st_mtime)
        save_state(self.dest, self.state)


def _drain(q: queue.Queue[bytes | None], out: BinaryIO, h: hashlib._Hash) -> None:
    while (chunk := q.get()) is not None:
        out.write(chunk)
        h.update(chunk)
