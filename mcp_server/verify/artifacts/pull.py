"""The resumable pull: each manifest file streams into <dest>/.rgt-pull/partial/<path>,
hashed while it is received; a finished file whose size and SHA-256 match the manifest is
moved into place. A partial file resumes where it stopped; a verified file is never sent
again (its size and mtime are recorded). Stops cleanly at the call's deadline.

A packed pull moves the small files as one deterministic tar built and hashed on the box
(tar_box.py), received the same way (resumable, hashed while received), then unpacked member
by member, each checked against the manifest before it is moved into place (tar_local.py).
Its progress is kept in <dest>/.rgt-pull/packed.json, so a later call resumes the transfer
rather than packing again."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import queue
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import BinaryIO, Literal

from mcp_server.hosts.base import Host
from mcp_server.verify.artifacts.manifest import ManifestFile
from mcp_server.verify.artifacts.roster import RosterFinding
from mcp_server.verify.artifacts.state import PulledFile, PullState, save_state, stamped, state_dir, untouched
from mcp_server.verify.artifacts.tar_box import PackDone, PackerChoice, clean_pack, poll_pack, start_pack
from mcp_server.verify.artifacts.tar_local import (
    PackedTransfer,
    Received,
    drop_packed,
    forget_packed,
    load_packed,
    local_tar,
    members,
    prune_tars,
    save_packed,
)

CHUNK = 1024 * 1024
# Larger files are pulled on their own even in a packed pull: per-file overhead no longer
# matters for them, and packing them would double their footprint on the box's disk.
PACK_MAX_FILE = 16 * 1024 * 1024
Progress = Callable[[int, int, str], Awaitable[None]]
Outcome = Literal["next", "done", "stopped", "failed", "lost"]
log = logging.getLogger(__name__)


def _hash_prefix(path: Path, h: hashlib._Hash) -> int:
    """Hash a partial file already on disk (a resumed transfer's earlier bytes)."""
    n = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    global REHASHED_BYTES
    REHASHED_BYTES += n
    return n


# The running hash of each partial file this process left, keyed by path and checked against the
# file's size, mtime and inode: a budgeted pull resumed by the next call continues the hash where
# it stopped instead of re-reading every byte already received (which made a pull's cost grow with
# the square of its size). After a restart, or if the file changed, the prefix is hashed again.
PARTIAL_HASHES: OrderedDict[str, tuple[tuple[int, int, int], hashlib._Hash]] = OrderedDict()
PARTIAL_HASHES_MAX = 64
REHASHED_BYTES = 0  # bytes hashed again from disk: what a resume that lost its hash costs


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


async def _resume_hash(partial: Path, h: hashlib._Hash) -> hashlib._Hash:
    kept = PARTIAL_HASHES.pop(str(partial), None)
    if kept is not None and kept[0] == _stamp(partial):
        return kept[1].copy()
    await asyncio.to_thread(_hash_prefix, partial, h)
    return h


def _keep_hash(partial: Path, h: hashlib._Hash) -> None:
    with contextlib.suppress(OSError):
        PARTIAL_HASHES[str(partial)] = (_stamp(partial), h.copy())
    while len(PARTIAL_HASHES) > PARTIAL_HASHES_MAX:
        PARTIAL_HASHES.popitem(last=False)


def local_ok(dest: Path, mf: ManifestFile, rec: PulledFile | None) -> bool:
    """A file verified earlier is skipped when its recorded hash matches and it is untouched."""
    if rec is None or rec.status != "done" or rec.sha256 != mf.sha256 or rec.mtime is None:
        return False
    p = dest / mf.path
    try:
        st = p.stat()
    except FileNotFoundError:
        return False
    return st.st_size == mf.bytes and untouched(rec, st)


STATE_SAVE_INTERVAL_S = 1.0


class Puller:
    def __init__(self, host: Host, abs_root: str, dest: Path, state: PullState, deadline: float,
                 progress: Progress | None) -> None:
        self.host, self.abs_root, self.dest, self.state = host, abs_root, dest, state
        self.deadline, self.progress = deadline, progress
        self.transferred = 0
        self.saved_at = time.monotonic()
        self.findings: list[RosterFinding] = []
        self.packer: PackerChoice = "auto"  # GNU tar when the box has it, else Python; tests pin one

    async def run(self, files: list[ManifestFile], packed: bool = False) -> bool:
        """Pull what is missing; True when every file is done (verified or failed). `packed`:
        the small files travel as one tar packed on the box, the rest one by one."""
        if packed and not await self._packed(files):
            return False
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
        finished, size, digest = await self._stream(f"{self.abs_root}/{mf.path}", partial, mf.bytes,
                                                    done_bytes, total, mf.path)
        if not finished:
            return False
        self._finish(mf, partial, size, digest)
        return True

    async def _stream(self, remote: str, partial: Path, size: int, done_bytes: int, total: int,
                      label: str) -> tuple[bool, int, str]:
        """Receive `remote` into `partial` (resuming what is there), hashing while it arrives:
        (finished, bytes held, sha256 of them); not finished when the deadline stopped it."""
        partial.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        offset = partial.stat().st_size if partial.exists() else 0
        if offset > size:
            partial.unlink()
            offset = 0
        if offset:
            h = await _resume_hash(partial, h)
        with partial.open("ab") as out:
            # A writer thread hashes and writes while the event loop keeps receiving.
            q: queue.Queue[bytes | None] = queue.Queue(maxsize=16)
            writer = asyncio.ensure_future(asyncio.to_thread(_drain, q, out, h))
            pos, stopped = offset, False
            try:
                async for chunk in self.host.read_stream(remote, offset, CHUNK):
                    chunk = chunk[: max(0, size - pos)]
                    while q.full():
                        await asyncio.sleep(0.001)
                    q.put_nowait(chunk)
                    pos += len(chunk)
                    self.transferred += len(chunk)
                    if self.progress:
                        await self.progress(done_bytes + pos, total, label)
                    if pos >= size:
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
            _keep_hash(partial, h)
        return not stopped, pos, h.hexdigest()

    def _finish(self, mf: ManifestFile, partial: Path, size: int, digest: str) -> None:
        self._settle(mf, partial, size, digest)
        # The state file lists every file: writing it after each of 20,000 small files is quadratic.
        # At most a second of settled files is pulled again after a crash; the caller saves at the end.
        if time.monotonic() - self.saved_at >= STATE_SAVE_INTERVAL_S:
            save_state(self.dest, self.state)
            self.saved_at = time.monotonic()

    def _settle(self, mf: ManifestFile, partial: Path, size: int, digest: str) -> None:
        """Move a received file into place when it matches the manifest; else name it and drop it."""
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
            self.state.files[mf.path] = stamped(PulledFile(status="done", sha256=digest, size=size), final.stat())

    # The packed pull: pack on the box -> pull the tar -> unpack and verify each member. Each
    # step advances the transfer's phase ("next") or says why it cannot: the deadline stopped it,
    # packing failed (the per-file loop in run() then takes the files), or the pack was lost.

    async def _packed(self, files: list[ManifestFile]) -> bool:
        """False when the deadline stopped it; True when run() may go on with the per-file loop."""
        small = [mf for mf in files if mf.bytes <= PACK_MAX_FILE and self._status(mf) != "done"]
        if len(small) < 2:
            return True
        pt = load_packed(self.dest)
        if pt is not None and not pt.covers(small):
            await self._drop(pt)
            pt = None
        for _ in range(2):  # a pack lost on the box (or locally) is built again, once per call
            pt = pt or await self._start_pack(small)
            if pt is None:
                return True
            outcome = await self._advance(pt, small)
            if outcome == "stopped":
                return False
            if outcome != "lost":
                return True
            pt = None
        return True

    async def _advance(self, pt: PackedTransfer, small: list[ManifestFile]) -> Outcome:
        outcome: Outcome = "next"
        while outcome == "next":
            if pt.phase == "packing":
                outcome = await self._await_pack(pt)
            elif pt.phase == "pulling":
                outcome = await self._pull_tar(pt)
            else:
                outcome = await self._unpack(pt, small)
        return outcome

    async def _start_pack(self, small: list[ManifestFile]) -> PackedTransfer | None:
        job = secrets.token_hex(6)
        names = sorted(mf.path for mf in small)
        started = await start_pack(self.host, self.abs_root, job, names, self.packer)
        if started is None:
            self._note("the box has no packer (GNU tar 1.28+ or python3) or no writable directory for the tar: "
                       "pulled file by file")
            return None
        pt = PackedTransfer(job=job, phase="packing", files={mf.path: mf.sha256 for mf in small},
                            box_dir=started.box_dir, packer=started.packer)
        save_packed(self.dest, pt)
        return pt

    async def _await_pack(self, pt: PackedTransfer) -> Outcome:
        pause = 0.05
        while not isinstance(got := await poll_pack(self.host, pt.box_dir), PackDone):
            if got != "packing":
                await self._drop(pt, keep_tar=True)
                return "lost"
            if time.monotonic() > self.deadline:
                return "stopped"
            await asyncio.sleep(pause)
            pause = min(0.25, pause * 2)
        if not got.usable:
            self._note(f"packing failed on the box (exit {got.rc}: {got.err[-300:]}): pulled file by file")
            await self._drop(pt)
            return "failed"
        pt.phase, pt.tar_sha256, pt.tar_bytes, pt.pack_err = "pulling", got.sha256, got.size, got.err[-2000:]
        prune_tars(self.dest, keep=local_tar(self.dest, got.sha256))
        save_packed(self.dest, pt)
        return "next"

    async def _pull_tar(self, pt: PackedTransfer) -> Outcome:
        if pt.tar_sha256 is None or pt.tar_bytes is None:
            raise RuntimeError("a packed transfer in phase pulling has no tar digest")
        remote = f"{pt.box_dir}/pack.tar"
        found = await self.host.stat(remote)
        if found is None or found.size != pt.tar_bytes:
            await self._drop(pt, keep_tar=True)
            return "lost"
        local = local_tar(self.dest, pt.tar_sha256)
        finished, _, digest = await self._stream(remote, local, pt.tar_bytes, 0, pt.tar_bytes,
                                                 f"pack of {len(pt.files)} files")
        if not finished:
            return "stopped"
        if digest != pt.tar_sha256:
            self._note(f"the pack received differs from the one hashed on the box (sha256 {digest}, expected "
                       f"{pt.tar_sha256}): packing again")
            await self._drop(pt)
            return "lost"
        await clean_pack(self.host, pt.box_dir)
        pt.phase = "unpacking"
        save_packed(self.dest, pt)
        return "next"

    async def _unpack(self, pt: PackedTransfer, small: list[ManifestFile]) -> Outcome:
        tar = local_tar(self.dest, pt.tar_sha256 or "")
        if not tar.exists():
            await self._drop(pt)
            return "lost"
        wanted = {mf.path: mf for mf in small}
        complete = await asyncio.to_thread(self._unpack_members, tar, pt, wanted)
        # The files must be durable before the state says they are in place.
        await asyncio.to_thread(os.sync)
        save_state(self.dest, self.state)
        if not complete:
            return "stopped"
        drop_packed(self.dest)
        return "done"

    def _unpack_members(self, tar: Path, pt: PackedTransfer, wanted: dict[str, ManifestFile]) -> bool:
        """Settle every wanted member (runs in a thread); False when the deadline stopped it
        (at least one member is settled per call, so a short budget still makes progress)."""
        staging = state_dir(self.dest) / "partial"
        got: set[str] = set()
        with closing(members(tar, set(pt.files), wanted, staging)) as events:
            for event in events:
                if isinstance(event, Received):
                    self._settle(event.mf, event.staged, event.size, event.sha256)
                    got.add(event.mf.path)
                else:
                    self.findings.append(RosterFinding(path=event.name, kind=event.kind, message=event.why))
                    if event.name in wanted and event.name not in got:
                        self._fail(wanted[event.name])
                        got.add(event.name)
                if got and time.monotonic() > self.deadline:
                    return False
        why = f": the packer on the box reported {pt.pack_err[-300:].strip()!r}" if pt.pack_err.strip() else ""
        for path in sorted(set(wanted) - got):
            self.findings.append(RosterFinding(
                path=path, kind="missing", message=f"absent from the pack built on the box{why}: it was deleted or "
                                                   "became unreadable after it was hashed"))
            self._fail(wanted[path])
        return True

    def _fail(self, mf: ManifestFile) -> None:
        self.state.files[mf.path] = PulledFile(status="failed", round=self.state.round, sha256="", size=0)

    def _note(self, message: str) -> None:
        log.warning("%s", message)
        self.findings.append(RosterFinding(path="(pack)", kind="pack", blocking=False, message=message))

    async def _drop(self, pt: PackedTransfer, keep_tar: bool = False) -> None:
        """Forget a packed transfer and its job on the box; `keep_tar` keeps the tar received so far
        (a re-pack of the same files gives the same bytes, so it resumes)."""
        await clean_pack(self.host, pt.box_dir)
        if keep_tar:
            forget_packed(self.dest)
        else:
            drop_packed(self.dest)


def _drain(q: queue.Queue[bytes | None], out: BinaryIO, h: hashlib._Hash) -> None:
    while (chunk := q.get()) is not None:
        out.write(chunk)
        h.update(chunk)
