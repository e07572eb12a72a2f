"""aggregate_results' security (issue 30): the source root is confined like verify_artifacts'
root, and a symlink (a cell, a file in a cell) is refused with verify_artifacts' finding, never
followed and never turned into a regular file at the destination. On LocalHost and over the test
sshd, through a real MCP client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import error_text, structured

SYMLINK_REFUSED = "symlink refused (a manifest holds regular files only); it points outside the root"


@pytest.fixture(params=["local", "ssh"])
def roots(request: pytest.FixtureRequest, env, tmp_path: Path) -> Path:
    """A box whose scratch root holds sweep/, the durable root beside it, and outside/ (in neither)."""
    (tmp_path / "scratch" / "sweep").mkdir(parents=True)
    (tmp_path / "durable").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not a result\n")
    (outside / "DONE").write_text("")
    destination = "local"
    if request.param == "ssh":
        request.getfixturevalue("box")
        destination = "testbox"
    env.write_inventory({"gpu1": {"destination": destination, "durable_root": str(tmp_path / "durable"),
                                  "scratch_root": str(tmp_path / "scratch")}})
    return tmp_path


def finished_cell(roots: Path, name: str) -> Path:
    c = roots / "scratch" / "sweep" / name
    c.mkdir()
    (c / "best.pth").write_bytes(b"w")
    (c / "DONE").write_text("")
    return c


async def aggregate(client, **args) -> dict:
    return structured(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "sweep/*",
                                                                   "name": "sweep-a", **args}))


async def test_security_a_symlinked_cell_pointing_outside_scratch_is_refused_and_not_copied(
        roots: Path, client) -> None:
    finished_cell(roots, "good")
    (roots / "scratch" / "sweep" / "evil").symlink_to(roots / "outside")
    res = await aggregate(client)
    by = {c["cell"]: c for c in res["cells"]}
    assert by["sweep/good"]["outcome"] == "copied"
    evil = by["sweep/evil"]
    assert evil["outcome"] == "failed" and evil["files"] == 0 and "symlink refused" in evil["detail"]
    (finding,) = evil["findings"]
    assert (finding["path"], finding["kind"], finding["message"]) == ("sweep/evil", "symlink", SYMLINK_REFUSED)
    assert not (roots / "durable" / "results" / "sweep-a" / "sweep" / "evil").exists()
    assert res["complete"] is False and res["failed"] == 1


async def test_security_a_symlinked_file_in_a_cell_is_refused_and_never_becomes_a_regular_file(
        roots: Path, client) -> None:
    c = finished_cell(roots, "a")
    finished_cell(roots, "b")
    (c / "leak.txt").symlink_to(roots / "outside" / "secret.txt")
    res = await aggregate(client)
    cell = next(c for c in res["cells"] if c["cell"] == "sweep/a")
    assert cell["outcome"] == "failed" and cell["files"] == 2  # best.pth and DONE, the regular files
    assert "1 symlink(s) refused" in cell["detail"]
    (finding,) = cell["findings"]
    assert (finding["path"], finding["kind"], finding["message"]) == ("sweep/a/leak.txt", "symlink",
                                                                     SYMLINK_REFUSED)
    copied = roots / "durable" / "results" / "sweep-a" / "sweep" / "a"
    assert (copied / "best.pth").read_bytes() == b"w"
    assert not (copied / "leak.txt").exists() and not (copied / "leak.txt").is_symlink()
    assert not (copied / ".rgt-cell.tsv").exists(), "a cell with a refused symlink gets no receipt"
    again = await aggregate(client)
    assert [c["outcome"] for c in again["cells"]] == ["failed", "already_durable"], "never skipped as durable"


async def test_security_a_file_under_a_symlinked_directory_in_a_cell_is_refused(roots: Path, client) -> None:
    c = finished_cell(roots, "a")
    finished_cell(roots, "b")
    (c / "data").symlink_to(roots / "outside")
    res = await aggregate(client, files=["best.pth", "data/*"])
    cell = next(c for c in res["cells"] if c["cell"] == "sweep/a")
    assert cell["outcome"] == "failed" and [f["path"] for f in cell["findings"]] == ["sweep/a/data"]
    assert not (roots / "durable" / "results" / "sweep-a" / "sweep" / "a" / "data").exists()


async def test_security_a_symlinked_directory_on_the_way_to_the_cells_is_refused(roots: Path, client) -> None:
    (roots / "scratch" / "linked").symlink_to(roots / "outside", target_is_directory=True)
    (roots / "outside" / "c1").mkdir()
    (roots / "outside" / "c1" / "DONE").write_text("")
    text = error_text(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "linked/*",
                                                                   "name": "sweep-a"}))
    assert "no finished cell could be made durable" in text and "symlink refused" in text
    assert "name the regular files to copy with `files`" in text
    assert not (roots / "durable" / "results").exists()


@pytest.mark.parametrize("root", ["/etc", "{outside}", "{scratch}/../outside"])
async def test_security_a_source_root_outside_the_roots_verify_artifacts_reads_is_refused(
        roots: Path, client, root: str) -> None:
    root = root.format(outside=roots / "outside", scratch=roots / "scratch")
    text = error_text(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "*",
                                                                   "name": "sweep-a", "root": root}))
    assert "[BAD_INPUT]" in text and "outside the roots verify_artifacts reads" in text
    assert "verify_roots" in text
    assert not (roots / "durable" / "results").exists()


async def test_a_source_root_under_an_inventory_verify_roots_entry_is_read(env, tmp_path: Path, client) -> None:
    extra = tmp_path / "elsewhere"
    (extra / "c1").mkdir(parents=True)
    (extra / "c1" / "DONE").write_text("")
    (tmp_path / "durable").mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(tmp_path / "durable"),
                                  "verify_roots": [str(extra)]}})
    res = await aggregate(client, root=str(extra), cells="c*")
    assert res["durable"] == 1 and res["root"] == str(extra.resolve())


async def test_security_cells_and_files_globs_never_reach_the_servers_control_trees(roots: Path, client) -> None:
    """With the durable root as the source root, `*/*` and `**` would reach `.rgt/` (box.env, run
    records) and `code/` (push_code's snapshots): neither is a cell, nor a file of one."""
    durable = roots / "durable"
    for cell, files in {"sweep/good": {"best.pth": "w", "DONE": "", ".rgt/box.env": "TOKEN=canary-5e1f"},
                        "sweep/.rgt": {"DONE": "", "run.json": "{}"}, ".rgt/runs": {"DONE": "", "pid": "1"},
                        "code/proj": {"DONE": "", "train.py": "print(1)"}}.items():
        for name, text in files.items():
            (durable / cell / name).parent.mkdir(parents=True, exist_ok=True)
            (durable / cell / name).write_text(text)
    res = await aggregate(client, root=str(durable), cells="*/*")
    assert [(c["cell"], c["outcome"], c["files"]) for c in res["cells"]] == [("sweep/good", "copied", 2)], res
    dest = durable / "results" / "sweep-a"
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "sweep/good/.rgt-cell.tsv", "sweep/good/DONE", "sweep/good/best.pth"]
    assert "canary-5e1f" not in json.dumps(res)
