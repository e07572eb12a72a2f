"""The resumable pull: each manifest file streams into <dest>/.rgt-pull/partial/<path>,
hashed while it is received; a finished file whose size and SHA-256 match the manifest is
moved into place. A partial file resumes where it stopped; a verified file is never sent
again (its size and mtime are recorded). Stops cleanly at the call's deadline.

Small files go a few at once (each costs round trips more than bytes). Over a far link (a
command round trip of FAR_S or more) a large file goes in pieces over several streams,
resumed piece by piece (spans.py, receive.py); over a near one, one stream is as fast.

A packed pull moves the small files as one deterministic tar built and hashed on the box
(tar_box.py), received the same way (resumable, hashed while received), then unpacked member
by member, each checked against the manifest before it is moved into place (tar_local.py).
Its progress is kept in <dest>/.rgt-pull/packed.json, so a later call resumes the transfer
rather than packing again."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Literal

from mcp_server import portable_io
from mcp_server.hosts.base import Host
from mcp_server.verify.artifacts.manifest import ManifestFile
from mcp_server.verify.artifacts.partial_hash import keep_hash, resume_hash
from mcp_server.verify.artifacts.receive import Got, Meter, Receiver, together
from mcp_server.verify.artifacts.receive import Progress as Progress  # the verifier takes it from here
from mcp_server.verify.artifacts.roster import RosterFinding
from mcp_server.verify.artifacts.spans import (
    PIECE,
    STREAMS,
    batches,
    drop_plan,
    open_plan,
    plan_file,
    save_plan,
)
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

# Larger files are pulled on their own even in a packed pull: per-file overhead no longer
# matters for them, and packing them would double their footprint on the box's disk.
PACK_MAX_FILE = 16 * 1024 * 1024
Outcome = Literal["next", "done", "stopped", "failed", "lost"]
log = logging.getLogger(__name__)


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
# A command round trip this long marks a far link. One SSH stream carries at most its channel
# window (1-2 MiB) per round trip: past ~25 ms that is below what a fast link carries, so a large
# file goes in pieces over several streams. Nearer, one stream is as fast and costs less CPU.
FAR_S = 0.025


class Puller:
    def __init__(self, host: Host, abs_root: str, dest: Path, state: PullState, deadline: float,
                 progress: Progress | None) -> None:
        self.host, self.abs_root, self.dest, self.state = host, abs_root, dest, state
        self.deadline, self.progress = deadline, progress
        self.transferred = 0
        self.meter = Meter(0, 0, progress)
        self.far: bool | None = None  # None: not measured yet this call
        self.saved_at = time.monotonic()
        self.findings: list[RosterFinding] = []
        self.packer: PackerChoice = "auto"  # GNU tar when the box has it, else Python; tests pin one

    async def run(self, files: list[ManifestFile], packed: bool = False) -> bool:
        """Pull what is missing; True when every file is done (verified or failed). `packed`:
        the small files travel as one tar packed on the box, the rest one by one. Files go in
        manifest order: a run of files too small to cut in pieces a few at once, a larger file
        alone over several streams."""
        if packed and not await self._packed(files):
            return False
        todo = [mf for mf in files if self._status(mf) != "done"]
        done = sum(f.bytes for f in files) - sum(f.bytes for f in todo)
        self.meter = Meter(done, sum(f.bytes for f in files), self.progress)
        for batch in batches(todo):
            if time.monotonic() > self.deadline:
                return False
            pending = iter(batch)
            if not all(await together([self._each(pending) for _ in range(min(STREAMS, len(batch)))])):
                return False
        return True

    async def _each(self, pending: Iterator[ManifestFile]) -> bool:
        """Pull files from the shared `pending` until none is left; False when the deadline stopped it."""
        for mf in pending:
            if time.monotonic() > self.deadline or not await self._one(mf):
                return False
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

    async def _one(self, mf: ManifestFile) -> bool:
        partial = state_dir(self.dest) / "partial" / mf.path
        got = await self._stream(f"{self.abs_root}/{mf.path}", partial, mf.bytes, mf.sha256, self.meter, mf.path)
        if not got.finished:
            return False
        self.meter.done += mf.bytes - got.held  # a short file counts as done in the progress
        self._finish(mf, partial, got.size, got.digest)
        return True

    async def _stream(self, remote: str, partial: Path, size: int, sha256: str, meter: Meter, label: str) -> Got:
        """Receive `remote` into `partial` (resuming what is there), hashing it in order as it arrives,
        in pieces over several streams when it is large; not finished when the deadline stopped it."""
        partial.parent.mkdir(parents=True, exist_ok=True)
        where = plan_file(self.dest, partial)
        split = size >= 2 * PIECE and (where.exists() or await self._far(remote))
        plan = await asyncio.to_thread(open_plan, where, partial, size, sha256, split)
        h = await resume_hash(partial, plan.frontier())
        meter.done += plan.held()

        async def on_bytes(n: int) -> None:
            self.transferred += n
            await meter.add(n, label)

        fd = os.open(partial, os.O_RDWR | os.O_CREAT | portable_io.O_BINARY, 0o666)
        save = (lambda p: save_plan(where, p)) if plan.split() else None
        receiver = Receiver(self.host, remote, fd, plan, h, lambda: time.monotonic() > self.deadline, on_bytes, save)
        try:
            got = await receiver.run()
        except BaseException:
            if receiver.settled:  # a lost connection: the hash of what arrived is still good for the next call
                keep_hash(partial, receiver.disk.hashed, h)
            raise
        if got.finished:
            drop_plan(where)  # what follows moves the partial into place or deletes it
        else:
            keep_hash(partial, got.size, h)
        return got

    async def _far(self, remote: str) -> bool:
        """The link is far: one stream cannot fill it (measured once a call, the better of two
        command round trips, so a first command that opens a channel does not count)."""
        if self.far is None:
            rtt = float("inf")
            for _ in range(2):
                started = time.monotonic()
                await self.host.stat(remote)
                rtt = min(rtt, time.monotonic() - started)
            self.far = rtt >= FAR_S
            log.debug("pull from %s: command round trip %.1f ms, far=%s", self.host.name, rtt * 1e3, self.far)
        return self.far

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
        got = await self._stream(remote, local, pt.tar_bytes, pt.tar_sha256, Meter(0, pt.tar_bytes, self.progress),
                                 f"pack of {len(pt.files)} files")
        if not got.finished:
            return "stopped"
        if got.size != pt.tar_bytes or got.digest != pt.tar_sha256:
            self._note(f"the pack received differs from the one hashed on the box (sha256 {got.digest}, expected "
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
        await asyncio.to_thread(portable_io.sync_all)
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


