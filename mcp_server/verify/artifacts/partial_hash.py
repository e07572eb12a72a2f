"""The running hash of each partial file a pull left, so a budgeted pull resumed by the next call
continues its hash where it stopped instead of re-reading every byte already received (which made
a pull's cost grow with the square of its size). After a restart, or if the file changed, the
prefix is hashed again, and counted in REHASHED_BYTES."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from pathlib import Path

from mcp_server.verify.artifacts.receive import COUNTS
from mcp_server.verify.artifacts.spans import CHUNK


def hash_prefix(path: Path, h: hashlib._Hash, upto: int) -> None:
    """Hash a partial file's first `upto` bytes, already on disk (a resumed transfer's earlier bytes)."""
    n = 0
    with path.open("rb") as f:
        while n < upto and (chunk := f.read(min(CHUNK, upto - n))):
            h.update(chunk)
            n += len(chunk)
    if n != upto:
        raise OSError(f"the partial file {path} holds {n} bytes, fewer than its record says ({upto})")
    global REHASHED_BYTES
    REHASHED_BYTES += n
    COUNTS.add(hashed=n)


# The running hash of each partial file this process left, keyed by path and checked against the
# file's size, mtime and inode and the bytes it covers: a budgeted pull resumed by the next call
# continues the hash where it stopped instead of re-reading every byte already received (which
# made a pull's cost grow with the square of its size). After a restart, or if the file changed,
# the prefix is hashed again.
PARTIAL_HASHES: OrderedDict[str, tuple[tuple[int, int, int], int, hashlib._Hash]] = OrderedDict()
PARTIAL_HASHES_MAX = 64
REHASHED_BYTES = 0  # bytes hashed again from disk: what a resume that lost its hash costs


def stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


async def resume_hash(partial: Path, upto: int) -> hashlib._Hash:
    """The running hash of the partial's first `upto` bytes."""
    kept = PARTIAL_HASHES.pop(str(partial), None)
    if kept is not None and kept[0] == stamp(partial) and kept[1] == upto:
        return kept[2].copy()
    h = hashlib.sha256()
    if upto:
        await asyncio.to_thread(hash_prefix, partial, h, upto)
    return h


def keep_hash(partial: Path, covered: int, h: hashlib._Hash) -> None:
    with contextlib.suppress(OSError):
        PARTIAL_HASHES[str(partial)] = (stamp(partial), covered, h.copy())
    while len(PARTIAL_HASHES) > PARTIAL_HASHES_MAX:
        PARTIAL_HASHES.popitem(last=False)
