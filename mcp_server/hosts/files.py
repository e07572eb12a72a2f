"""Bounded file reads and listings through any Host (local or SSH)."""

from __future__ import annotations

from ..errors import InputError, NotFoundError
from .base import Host
from .commands import path_word, quote

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


async def read_bytes(host: Host, path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """A whole file, refusing (before transferring) anything larger than `max_bytes`."""
    st = await host.stat(path)
    if st is None:
        raise NotFoundError("file not found (or not a regular file)", host=host.name, path=path)
    if st.size > max_bytes:
        raise InputError(
            f"file is {st.size} bytes, over the {max_bytes}-byte limit for this input",
            host=host.name, path=path,
            next_step="pass a smaller file (a per-item export, not the raw log or checkpoint)",
        )
    chunks = [c async for c in host.read_stream(path)]
    return b"".join(chunks)[:max_bytes]


async def list_files(host: Host, root: str, pattern: str = "*", max_files: int = 10000) -> list[str]:
    """Regular files under `root` whose name matches the shell glob `pattern` (find -name)."""
    if "/" in pattern or any(ord(c) < 32 for c in pattern):
        raise InputError("file name pattern must not contain '/' or control characters", observed=pattern)
    res = await host.run(
        f"find {path_word(root)} -type f -name {quote(pattern)} 2>/dev/null | head -n {int(max_files) + 1}"
    )
    files = [line for line in res.text.splitlines() if line]
    if len(files) > max_files:
        raise InputError(f"more than {max_files} files under the root", host=host.name, path=root,
                         next_step="narrow the root or the pattern")
    return sorted(files)
