"""A real tmpfs of a chosen size for a test's length: how the tests make a disk (or an inode
table) that really fills up."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mounted_tmpfs(mnt: Path, options: str) -> Iterator[Path]:
    """A tmpfs at `mnt` with `options` (skips where mounting is not allowed)."""
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
