"""Bounded file reads and listings through any Host (local or SSH)."""

from __future__ import annotations

import posixpath

from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import join, path_word, quote

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
BATCH = 400  # paths per remote command (argv stays far below ARG_MAX)


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


async def realpaths(host: Host, paths: list[str]) -> dict[str, str]:
    """Symlinks resolved on the box (`realpath -m`: missing tails are kept as written)."""
    out: dict[str, str] = {}
    todo = sorted(set(paths))
    for i in range(0, len(todo), BATCH):
        chunk = todo[i:i + BATCH]
        cmd = join(["realpath", "-m", "--"]) + " " + " ".join(path_word(p) for p in chunk)
        res = await host.run(cmd)
        lines = res.text.splitlines()
        if res.ok and len(lines) == len(chunk):
            out.update(zip(chunk, lines, strict=True))
        else:
            out.update({p: p for p in chunk})
    return out


async def digests(host: Host, paths: list[str], timeout: float = 25.0) -> dict[str, str | None]:
    """sha256 of each absolute path, hashed on the box; None for a file that is absent."""
    out: dict[str, str | None] = dict.fromkeys(paths)
    todo = sorted(set(paths))
    for i in range(0, len(todo), BATCH):
        chunk = todo[i:i + BATCH]
        res = await host.run(join(["sha256sum", "--", *chunk]), timeout=timeout)
        for line in res.text.splitlines():
            digest, _, name = line.partition("  ")
            if digest.startswith("\\"):
                digest = digest[1:]
                name = name.replace("\\n", "\n").replace("\\\\", "\\")
            if name in out and len(digest) == 64:
                out[name] = "sha256:" + digest
    return out


async def write_file(host: Host, path: str, data: bytes) -> None:
    """Write a file on the host atomically (temp file in the same folder, then rename)."""
    folder = posixpath.dirname(path) or "/"
    tmp = path + ".rgt-tmp"
    cmd = " ".join([join(["mkdir", "-p", "--"]), path_word(folder), "&&", "cat", ">", path_word(tmp), "&&",
                    join(["mv", "-f", "--"]), path_word(tmp), path_word(path)])
    res = await host.run(cmd, stdin=data)
    res.check(f"writing {path}", next_step="pass a render_dir the server can write on that host")
