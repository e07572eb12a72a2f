"""The server's own state on this machine (RGT_HOME): the ledger with its teardown records,
pinned host keys, pulls. Other local users must not read or change it, so the directory is
kept 0700 and its secret-bearing files 0600; a looser mode found at start is tightened and
logged, never silently left. On Windows modes are not applied (chmod there sets only the
read-only flag): the folder is private by the ACL %LOCALAPPDATA% gives its owner (portable.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from mcp_server import portable
from mcp_server.portable_io import O_BINARY

log = logging.getLogger(__name__)
DIR_MODE = 0o700
FILE_MODE = 0o600


def _tighten(path: Path, mode: int) -> None:
    if not portable.modes_enforced():
        return
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
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_BINARY, FILE_MODE))


def http_token(home: Path, given: str | None) -> tuple[str, bool]:
    """The bearer token HTTP clients must send: `given` (RGT_HTTP_TOKEN) when set, else the one in
    `home`/http-token (0600), created with 256 random bits on first use. Returns (token, created)."""
    if given:
        return given, False
    secure_state(home, [])
    path = home / "http-token"
    _tighten(path, FILE_MODE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_BINARY, FILE_MODE)
    except FileExistsError:
        token = path.read_text(encoding="utf-8").strip()
        if len(token) < 32:
            raise ValueError(f"{path} holds no usable token (under 32 characters): delete it to get a new one") \
                from None
        return token, False
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, True
