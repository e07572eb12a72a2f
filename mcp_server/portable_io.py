"""File-descriptor work that POSIX and Windows spell differently, for this machine's files only
(pulls, pushes, the state folder). Linux and macOS keep their native calls; the fallbacks run where
a call is missing, chosen by what `os` has, not by the OS's name:
- `os.pwrite`/`os.pread` (not on Windows): seek and write/read under one lock, so the pull's
  writer and hasher threads never move each other's offset;
- `os.fdatasync` (not on macOS or Windows): `os.fsync`, which also flushes metadata;
- `os.sync` (not on Windows): nothing to call; each pulled file was closed, and Windows writes it
  back on its own (a power cut just after a pull may cost its last files, which the next call's
  size and time checks then pull again);
- `O_NOFOLLOW` (not on Windows): a symlink is refused by lstat just before the open;
- `O_BINARY` (Windows only): without it a descriptor turns each LF written into CRLF."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

O_BINARY: int = getattr(os, "O_BINARY", 0)
_SEEK_LOCK = threading.Lock()


def pwrite_seek(fd: int, data: bytes | memoryview, offset: int) -> int:
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.write(fd, data)


def pread_seek(fd: int, size: int, offset: int) -> bytes:
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


def pwrite(fd: int, data: bytes | memoryview, offset: int) -> int:
    """Write at `offset` without moving a position another thread relies on; bytes written."""
    native = getattr(os, "pwrite", None)
    return native(fd, data, offset) if native is not None else pwrite_seek(fd, data, offset)


def pread(fd: int, size: int, offset: int) -> bytes:
    native = getattr(os, "pread", None)
    return native(fd, size, offset) if native is not None else pread_seek(fd, size, offset)


def datasync(fd: int) -> None:
    """The file's bytes on disk before a plan says they are (fsync where fdatasync is missing)."""
    getattr(os, "fdatasync", os.fsync)(fd)


def sync_all() -> None:
    native = getattr(os, "sync", None)
    if native is not None:
        native()


def open_read_no_follow(path: str | Path, no_follow: int | None = None) -> int:
    """A read-only binary descriptor of `path`, refusing a symlink in its last part (ELOOP, as
    O_NOFOLLOW does). `no_follow` overrides this machine's O_NOFOLLOW (0: none, the lstat check)."""
    flag = getattr(os, "O_NOFOLLOW", 0) if no_follow is None else no_follow
    if not flag and stat.S_ISLNK(os.lstat(path).st_mode):
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    return os.open(path, os.O_RDONLY | O_BINARY | flag)


def own_session() -> dict[str, Any]:
    """subprocess keywords that start a child in a session of its own (POSIX), so its whole group can
    be killed on a timeout; nothing on Windows, which has no sessions."""
    return {"start_new_session": True} if os.name == "posix" else {}


def kill_session(pid: int, kill: Callable[[], None]) -> None:
    """Kill the session `own_session` started (its group on POSIX); elsewhere just the child (`kill`)."""
    killpg = getattr(os, "killpg", None)
    if killpg is None:
        kill()
    else:
        killpg(pid, 9)  # SIGKILL; signal.SIGKILL itself is missing on Windows
