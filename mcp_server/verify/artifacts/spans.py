"""How a partial file's bytes are held while it is pulled, and in how many pieces.

A file of at least two pieces travels over several streams at once: one SSH channel's window
caps a stream at about window / round-trip time, so on a far link one stream cannot fill it.
The file is cut into pieces; a few streams take them in file order, each piece written at its
offset in the partial file. What each piece holds is kept in a plan beside the partial
(<dest>/.rgt-pull/ranges/<key>.json), saved before the first byte is written and afterwards
only once the bytes it counts are on disk, so a later call resumes every piece where it stopped
and never receives a held byte again. A partial without a plan was pulled in one stream: its
bytes run from the start without a gap."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.verify.artifacts.manifest import ManifestFile
from mcp_server.verify.artifacts.state import dump_json, state_dir, write_json_atomic

log = logging.getLogger(__name__)

CHUNK = 1024 * 1024
# A piece is small enough that the hash, which must take the file in order, is never far behind
# the streams (it waits on at most the pieces in flight), and large enough that opening a channel
# per piece (a few round trips) costs little even on a far link.
PIECE = 32 * 1024 * 1024
# Streams one file (or one batch of small files) holds at once. SshHost gives file streams all but
# its quick reserve of channels (6 of 8 by default; sshd's MaxSessions is 10) and queues the rest.
STREAMS = 4


class Span(BaseModel):
    """One piece of the file: [start, end), of which `held` bytes from its start are on disk."""

    start: int
    end: int
    held: int = 0

    @property
    def at(self) -> int:
        return self.start + self.held

    @property
    def done(self) -> bool:
        return self.at >= self.end


class SpanPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int = Field(description="the file's size in the manifest")
    sha256: str = Field(description="the manifest digest the bytes are pulled for")
    inode: int | None = Field(default=None, description="the partial file's inode (a replaced one is not resumed)")
    spans: list[Span]

    def frontier(self) -> int:
        """Bytes held from the file's start without a gap: what its running hash covers."""
        return next((s.at for s in self.spans if not s.done), self.size)

    def held(self) -> int:
        return sum(s.held for s in self.spans)

    def split(self) -> bool:
        return len(self.spans) > 1


def cut(size: int, prefix: int) -> list[Span]:
    """Pieces for the bytes after a contiguous `prefix` already held (the first piece keeps it);
    one piece when fewer than two remain (the last piece takes a short remainder)."""
    starts = list(range(prefix, size, PIECE))
    if len(starts) > 1 and size - starts[-1] < PIECE:
        starts.pop()
    if len(starts) < 2:
        return [Span(start=0, end=size, held=prefix)]
    ends = [*starts[1:], size]
    spans = [Span(start=s, end=e) for s, e in zip(starts, ends, strict=True)]
    spans[0] = Span(start=0, end=ends[0], held=prefix)
    return spans


def plan_file(dest: Path, partial: Path) -> Path:
    """Where the plan for `partial` is kept: named by a digest of its path (a manifest path can be
    any name, so a name beside the partial could collide with another file's)."""
    key = hashlib.sha256(partial.relative_to(state_dir(dest)).as_posix().encode()).hexdigest()[:32]
    return state_dir(dest) / "ranges" / f"{key}.json"


def save_plan(where: Path, plan: SpanPlan) -> None:
    write_json_atomic(where, dump_json(plan))


def open_plan(where: Path, partial: Path, size: int, sha256: str, split: bool) -> SpanPlan:
    """The plan to go on with: the saved one while it still describes this partial and this file;
    else a new one from the partial's contiguous prefix, in pieces when `split` (saved, with the
    partial created, before any byte is written)."""
    saved = _load(where)
    if saved is not None and _describes(saved, partial, size, sha256):
        return saved
    if saved is not None:
        log.info("the saved piece plan no longer matches %s: pulling it again from its start", partial)
        partial.unlink(missing_ok=True)
        where.unlink(missing_ok=True)
    prefix = partial.stat().st_size if partial.exists() else 0
    if prefix > size:
        partial.unlink()
        prefix = 0
    whole = [Span(start=0, end=size, held=prefix)]
    plan = SpanPlan(size=size, sha256=sha256, spans=cut(size, prefix) if split else whole)
    if plan.split():
        partial.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT, 0o666)
        try:
            plan.inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        save_plan(where, plan)
    return plan


def drop_plan(where: Path) -> None:
    where.unlink(missing_ok=True)


def _load(where: Path) -> SpanPlan | None:
    if not where.exists():
        return None
    try:
        return SpanPlan.model_validate_json(where.read_bytes())
    except ValidationError:
        log.warning("piece plan %s is unreadable: pulling its file again from its start", where)
        return None


def _describes(plan: SpanPlan, partial: Path, size: int, sha256: str) -> bool:
    """The plan is for this file, its partial is the file it was made for, the pieces tile the
    file, and every byte the plan counts lies inside the partial."""
    try:
        st = partial.stat()
    except FileNotFoundError:
        return False
    tiled = (bool(plan.spans) and plan.spans[0].start == 0 and plan.spans[-1].end == size
             and all(a.end == b.start for a, b in zip(plan.spans, plan.spans[1:], strict=False))
             and all(0 <= s.held <= s.end - s.start for s in plan.spans))
    return (tiled and plan.size == size and plan.sha256 == sha256 and plan.inode == st.st_ino
            and st.st_size >= max(s.at for s in plan.spans if s.held or s is plan.spans[0]))


def batches(files: list[ManifestFile]) -> Iterator[list[ManifestFile]]:
    """Consecutive files too small to cut in pieces, together; each larger file on its own."""
    batch: list[ManifestFile] = []
    for mf in files:
        if mf.bytes < 2 * PIECE:
            batch.append(mf)
            continue
        if batch:
            yield batch
        batch = []
        yield [mf]
    if batch:
        yield batch
