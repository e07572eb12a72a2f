"""aggregate_results for real: finished cells of a sweep copied from scratch to
<durable_root>/results/<name>/<cell>/ and verified; unfinished cells named and skipped; zero
cells made durable is an error. On LocalHost and over the test sshd, through a real MCP client."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mcp_server.run.jobs import aggregate as aggregate_module
from tests.conftest import error_text, structured


@pytest.fixture(params=["local", "ssh"])
def sweep(request: pytest.FixtureRequest, env, tmp_path: Path) -> Path:
    """A box whose scratch root holds sweep/, with the durable root beside it."""
    scratch, durable = tmp_path / "scratch", tmp_path / "durable"
    (scratch / "sweep").mkdir(parents=True)
    durable.mkdir()
    destination = "local"
    if request.param == "ssh":
        request.getfixturevalue("box")
        destination = "testbox"
    env.write_inventory({"gpu1": {"destination": destination, "durable_root": str(durable),
                                  "scratch_root": str(scratch)}})
    return tmp_path


def cell(root: Path, name: str, *, done: bool, weights: bytes = b"w") -> Path:
    c = root / "scratch" / "sweep" / name
    (c / "logs").mkdir(parents=True)
    (c / "best.pth").write_bytes(weights)
    (c / "logs" / "train.log").write_text(f"cell {name}\n")
    if done:
        (c / "DONE").write_text("")
    return c


async def aggregate(client, **args) -> dict:
    return structured(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "sweep/*",
                                                                   "name": "sweep-a", **args}))


async def test_three_finished_and_one_running_cell_copies_three_and_names_the_running_one(sweep: Path, client) -> None:
    for name in ("lr=1e-3", "lr=3e-4", "lr=1e-4"):
        cell(sweep, name, done=True, weights=name.encode())
    cell(sweep, "lr=3e-5", done=False)
    res = await aggregate(client)
    by = {c["cell"]: c for c in res["cells"]}
    assert (res["durable"], res["unfinished"], res["failed"], res["complete"]) == (3, 1, 0, True)
    assert by["sweep/lr=3e-5"]["outcome"] == "unfinished" and "no DONE" in by["sweep/lr=3e-5"]["detail"]
    dest = sweep / "durable" / "results" / "sweep-a"
    assert res["dest"] == str(dest)
    for name in ("lr=1e-3", "lr=3e-4", "lr=1e-4"):
        assert by[f"sweep/{name}"]["outcome"] == "copied" and by[f"sweep/{name}"]["files"] == 3
        assert (dest / "sweep" / name / "best.pth").read_bytes() == name.encode()
        assert (dest / "sweep" / name / "logs" / "train.log").read_text() == f"cell {name}\n"
        receipt = (dest / "sweep" / name / ".rgt-cell.tsv").read_text().splitlines()
        assert {ln.split("\t")[3]: ln.split("\t")[2] for ln in receipt}["best.pth"] == \
            hashlib.sha256(name.encode()).hexdigest()
    assert not (dest / "sweep" / "lr=3e-5").exists()
    assert (sweep / "scratch" / "sweep" / "lr=1e-3" / "best.pth").exists()  # the source is never removed


async def test_a_second_call_skips_cells_already_durable_and_takes_the_newly_finished(sweep: Path, client) -> None:
    cell(sweep, "a", done=True)
    late = cell(sweep, "b", done=False)
    await aggregate(client)
    (late / "DONE").write_text("")
    res = await aggregate(client)
    assert {c["cell"]: c["outcome"] for c in res["cells"]} == {"sweep/a": "already_durable", "sweep/b": "copied"}
    assert res["durable"] == 2 and res["complete"]


async def test_zero_finished_cells_is_an_error_never_a_success(sweep: Path, client) -> None:
    cell(sweep, "a", done=False)
    cell(sweep, "b", done=False)
    text = error_text(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "sweep/*",
                                                                   "name": "sweep-a"}))
    assert "[NOT_FOUND]" in text and "0 of 2 cell(s) are finished" in text and "marker" in text
    assert not (sweep / "durable" / "results").exists()


async def test_no_matching_cell_directory_is_an_error(sweep: Path, client) -> None:
    text = error_text(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "nothing/*",
                                                                   "name": "sweep-a"}))
    assert "[NOT_FOUND]" in text and "no cell directory matches 'nothing/*'" in text


async def test_a_differing_durable_file_is_never_replaced_and_the_cell_fails(sweep: Path, client) -> None:
    cell(sweep, "a", done=True, weights=b"new")
    cell(sweep, "b", done=True)
    old = sweep / "durable" / "results" / "sweep-a" / "sweep" / "a" / "best.pth"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"old")
    res = await aggregate(client)
    by = {c["cell"]: c for c in res["cells"]}
    assert by["sweep/a"]["outcome"] == "failed" and "best.pth differs" in by["sweep/a"]["detail"]
    assert old.read_bytes() == b"old"
    assert by["sweep/b"]["outcome"] == "copied" and res["complete"] is False and res["next_step"]


async def test_an_unwritable_durable_root_copies_nothing_and_is_an_error(sweep: Path, client) -> None:
    cell(sweep, "a", done=True)
    (sweep / "durable" / "results").write_text("a file where the results directory belongs")
    text = error_text(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "sweep/*",
                                                                   "name": "sweep-a"}))
    assert "no finished cell could be made durable" in text and "cannot create" in text


async def test_only_the_named_files_are_copied_and_a_custom_marker_counts(sweep: Path, client) -> None:
    c = cell(sweep, "a", done=False)
    (c / "best_metrics.json").write_text("{}")
    res = await aggregate(client, marker="best_metrics.json", files=["best.pth", "best_metrics.json"])
    assert res["durable"] == 1
    copied = sweep / "durable" / "results" / "sweep-a" / "sweep" / "a"
    assert sorted(p.name for p in copied.iterdir() if not p.name.startswith(".rgt-")) == ["best.pth",
                                                                                       "best_metrics.json"]


@pytest.mark.parametrize(("args", "says"), [
    ({"name": "../up"}, "not a safe name"),
    ({"cells": "/etc/*"}, "relative to the root"),
    ({"cells": "."}, "names the source root itself"),
    ({"marker": "DONE*"}, "one file name, not a glob"),
])
async def test_unsafe_arguments_are_refused(sweep: Path, client, args: dict, says: str) -> None:
    text = error_text(await client.call_tool("aggregate_results", {"host": "gpu1", "cells": "sweep/*",
                                                                   "name": "sweep-a", **args}))
    assert "[BAD_INPUT]" in text and says in text


async def test_a_spent_time_budget_leaves_cells_pending_and_the_next_call_finishes_them(
        sweep: Path, client, monkeypatch) -> None:
    cell(sweep, "a", done=True)
    cell(sweep, "b", done=True)
    monkeypatch.setattr(aggregate_module, "BUDGET_S", 0)  # no time for any copy in this call
    first = await aggregate(client)
    assert (first["durable"], first["pending"], first["complete"]) == (0, 2, False)
    assert "call aggregate_results again" in first["next_step"]
    monkeypatch.setattr(aggregate_module, "BUDGET_S", 25)
    second = await aggregate(client)
    assert (second["durable"], second["pending"], second["complete"]) == (2, 0, True)


async def test_a_source_root_that_holds_the_durable_results_never_collects_them_again(sweep: Path, client) -> None:
    durable = sweep / "durable"
    (durable / "a").mkdir()
    (durable / "a" / "DONE").write_text("")
    (durable / ".rgt" / "runs").mkdir(parents=True)
    for _ in range(2):
        res = await aggregate(client, root=str(durable), cells="*")
        assert [c["cell"] for c in res["cells"]] == ["a"]
    assert res["cells"][0]["outcome"] == "already_durable"
    assert not (durable / "results" / "sweep-a" / "results").exists()
