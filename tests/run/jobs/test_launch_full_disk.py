"""A launch onto a durable root that is really full (a tmpfs filled to the last byte) with the
disk gates set to 0: the run's files cannot be written, so nothing may start, nothing may be left
half-written, and nothing may ever read `running` (issue 20, item 7). Locally and over the sshd."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import error_text, structured
from tests.support.tmpfs import mounted_tmpfs

NO_GATES = {"min_free_gib": 0, "min_free_inodes": 0, "probe_s": 0.5}


@pytest.fixture(params=["local", "ssh"])
def full_root(request: pytest.FixtureRequest, env, tmp_path: Path) -> Iterator[Path]:
    for root in mounted_tmpfs(tmp_path / "full", "size=4m"):
        for sub in ("runs", "names", "locks"):
            (root / ".rgt" / sub).mkdir(parents=True)
        filled = subprocess.run(["dd", "if=/dev/zero", f"of={root}/filler", "bs=64k"], capture_output=True, text=True)
        assert "No space left" in filled.stderr, filled.stderr
        destination = "local"
        if request.param == "ssh":
            request.getfixturevalue("box")
            destination = "testbox"
        env.write_inventory({"gpu1": {"destination": destination, "durable_root": str(root)}})
        yield root


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".rgt" / "runs").iterdir())


async def test_a_launch_onto_a_full_disk_fails_and_leaves_nothing(full_root, client) -> None:
    marker = full_root.parent / "ran"
    res = await client.call_tool("launch_detached", {"host": "gpu1", "command": f"touch {marker}; sleep 30",
                                                     **NO_GATES})
    text = error_text(res)
    assert "could not be written" in text and "nothing was started" in text and "free space" in text, text
    assert leftovers(full_root) == []
    assert not marker.exists()
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    assert "running" not in str(listed), listed


async def test_a_queue_onto_a_full_disk_fails_and_leaves_no_cell_queued(full_root, client) -> None:
    res = await client.call_tool("launch_detached", {"host": "gpu1", "commands": ["true", "true", "true"],
                                                     "max_concurrent": 1, **NO_GATES})
    assert "could not be written" in error_text(res)
    assert leftovers(full_root) == []
