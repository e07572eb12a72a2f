"""The pull state between calls: saved and loaded as one PullState; anything else on disk
(corrupt, an older version's dict) is never half-read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.manifest import build_manifest
from mcp_server.verify.artifacts.roster import RosterFinding
from mcp_server.verify.artifacts.state import (
    ListedFile,
    Listing,
    PulledFile,
    PulledManifest,
    PullState,
    load_state,
    save_state,
    state_dir,
)


def _state() -> PullState:
    manifest = build_manifest("gpu1", "/r", ["*.json"], "run-1", "python-hashlib", [("a.json", 2, "a" * 64)])
    return PullState(
        round=2, phase="checking", host="gpu1", root="/r", roster=["*.json"], run_id="run-1",
        files={"a.json": PulledFile(status="done", sha256="a" * 64, size=2, mtime=1.5)},
        checks={"a.json": FileVerdict(path="a.json", kind="json", ok=True, detail="parses")},
        findings=[RosterFinding(path="b.log", kind="extra", message="not in the roster", blocking=False)],
        listing=Listing(abs_root="/r", listed_at=10.25, hasher="python-hashlib", newest_mtime=9.0,
                        files={"a.json": ListedFile(size=2, mtime=9.0)}, job="abc"),
        manifest=PulledManifest(name="PULL_MANIFEST.json", sha256="m" * 64, content=manifest),
    )


def test_a_saved_state_loads_back_equal(tmp_path: Path) -> None:
    state = _state()
    save_state(tmp_path, state)
    assert load_state(tmp_path) == state
    assert json.loads((state_dir(tmp_path) / "state.json").read_text())["manifest"]["content"]["schema"]


def test_no_state_file_means_no_state(tmp_path: Path) -> None:
    assert load_state(tmp_path) is None


@pytest.mark.parametrize("text", [
    "{truncated",
    "[]",
    # The dict an older version wrote: listing as [size, mtime] pairs, no nesting.
    json.dumps({"round": 1, "phase": "pulling", "host": "gpu1", "root": "/r", "roster": ["a"], "run_id": None,
                "files": {}, "checks": {}, "findings": [], "abs_root": "/r", "listing": {"a": [2, 9.0]}}),
    json.dumps({"round": "2", "phase": "pulling"}),
], ids=["corrupt", "not-an-object", "older-version", "wrong-types"])
def test_an_unreadable_state_is_none_never_a_partial_state(tmp_path: Path, text: str) -> None:
    state_dir(tmp_path).mkdir()
    (state_dir(tmp_path) / "state.json").write_text(text)
    assert load_state(tmp_path) is None
