"""The server's own state on this machine (RGT_HOME): the ledger with its teardown records,
pinned host keys, pulls. Other local users must not read or change it, so the directory is
kept 0700 and its secret-bearing files 0600; a looser mode found at start is tightened and
logged, never silently left."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)
DIR_MODE = 0o700
FILE_MODE = 0o600


def _tighten(path: Path, mode: int) -> None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) & ~mode == 0:
        return
    os.chmod(path, mode)
    log.warning("state: %s was mode %03o, now %03o (it holds the ledger and pinned host keys)",
                path, stat.S_IMODE(st.st_mode), mode)


def secure_state(home: Path, files: Iterable[Path]) -> None:
    """Create `home` 0700 if missing; tighten it and each existing file in `files` (to 0600)."""
    home.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    _tighten(home, DIR_MODE)
    for f in files:
        _tighten(f, FILE_MODE)


def create_private(path: Path) -> None:
    """Create an empty file readable by its owner only, unless it exists."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
