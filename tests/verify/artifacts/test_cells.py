"""Expected cells: a sweep must hold N cell directories, each with the same files. Incomplete and
missing cells are named and fail the verification; the cells' files are pulled like any roster
file; each cell's metrics come back as a table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_server.verify.artifacts.cells import CellSpec, find_cells, judge, with_metrics
from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.roster import RemoteEntry
from tests.conftest import error_text
from tests.verify.artifacts.pulls import until_done, write_checkpoint

SPEC = CellSpec(glob="sweep/lr=*", expect=3, files=["best.pth", "metrics.json"])


def _entries(*paths: str) -> list[RemoteEntry]:
    return [RemoteEntry(kind="f", size=1, mtime=0.0, path=p) for p in paths]


def test_every_cell_complete_reads_n_of_n_and_blocks_nothing() -> None:
    cells = find_cells(SPEC, _entries(*(f"sweep/lr={lr}/{f}" for lr in ("1e-3", "3e-4", "1e-4")
                                        for f in ("best.pth", "metrics.json"))))
    report, findings = judge(SPEC, cells)
    assert report.summary == "3 of 3 cells complete" and findings == []
    assert [c.name for c in cells] == ["lr=1e-3", "lr=1e-4", "lr=3e-4"]


def test_an_incomplete_cell_is_named_with_what_it_lacks() -> None:
    cells = find_cells(SPEC, _entries("sweep/lr=1e-3/best.pth", "sweep/lr=1e-3/metrics.json",
                                      "sweep/lr=1e-4/best.pth", "sweep/lr=1e-4/metrics.json",
                                      "sweep/lr=3e-4/metrics.json", "sweep/lr=3e-4/log.txt"))
    report, findings = judge(SPEC, cells)
    assert report.summary == "2 of 3 cells complete: cell lr=3e-4 lacks best.pth"
    assert [(f.path, f.kind, f.blocking) for f in findings] == [("sweep/lr=3e-4", "incomplete_cell", True)]


def test_cells_missing_entirely_are_counted_against_the_expected_number() -> None:
    spec = SPEC.model_copy(update={"expect": 8})
    cells = find_cells(spec, _entries("sweep/lr=1e-3/best.pth", "sweep/lr=1e-3/metrics.json",
                                      "sweep/lr=3e-4/metrics.json", "sweep/other/best.pth", "README.md"))
    report, findings = judge(spec, cells)
    assert (report.found, report.complete) == (2, 1)
    assert report.summary == ("1 of 8 cells complete: 6 expected cells missing entirely (2 found); "
                              "cell lr=3e-4 lacks best.pth")
    assert {f.kind for f in findings} == {"incomplete_cell", "missing_cells"} and all(f.blocking for f in findings)


def test_more_cells_than_declared_is_reported_without_failing() -> None:
    spec = SPEC.model_copy(update={"expect": 1})
    cells = find_cells(spec, _entries("sweep/lr=1/best.pth", "sweep/lr=1/metrics.json",
                                      "sweep/lr=2/best.pth", "sweep/lr=2/metrics.json"))
    report, findings = judge(spec, cells)
    assert report.summary == "2 of 2 cells complete: 2 cells found, 1 expected"
    assert [(f.kind, f.blocking) for f in findings] == [("extra_cells", False)]


def test_the_metric_table_holds_each_cells_top_level_numbers_and_is_bounded() -> None:
    spec = CellSpec(glob="c*", expect=60, files=["m.json"])
    cells = find_cells(spec, _entries(*(f"c{i:02d}/m.json" for i in range(60))))
    checks = {f"c{i:02d}/m.json": FileVerdict(path=f"c{i:02d}/m.json", kind="json", ok=True, detail="",
                                              scalars={f"k{j}": float(i) for j in range(20)}) for i in range(60)}
    report = with_metrics(judge(spec, cells)[0], cells, checks)
    assert len(report.metrics) == 50 and list(report.metrics)[3] == "c03"
    assert len(report.metrics["c03"]) == 16 and report.metrics["c03"]["k0"] == 3.0


@pytest.mark.parametrize("bad", [{"glob": "/abs/*"}, {"glob": "../up/*"}, {"files": ["../x"]}, {"files": []},
                                 {"expect": 0}])
def test_a_cell_spec_that_escapes_the_root_or_asks_nothing_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CellSpec.model_validate({"glob": "sweep/*", "expect": 2, "files": ["best.pth"]} | bad)


def _sweep(root: Path, psnr: dict[str, float], skip: str | None = None) -> None:
    for lr, value in psnr.items():
        cell = root / "sweep" / f"lr={lr}"
        cell.mkdir(parents=True)
        (cell / "metrics.json").write_text(json.dumps({"psnr": value, "split": "test", "n": 100}))
        if lr != skip:
            write_checkpoint(cell / "best.pth")


async def test_an_incomplete_sweep_fails_the_verification_naming_the_cell(results, client) -> None:
    _sweep(results, {"1e-3": 31.5, "3e-4": 32.25, "1e-4": 30.0}, skip="3e-4")
    cells = {"glob": "sweep/lr=*", "expect": 4, "files": ["best.pth", "metrics.json"]}
    r = await until_done(client, root=str(results), roster=["train.csv"], cells=cells)
    assert r["passed"] is False and "do not tear down" in r["next_step"]
    assert r["cells"]["summary"] == ("2 of 4 cells complete: 1 expected cell missing entirely (3 found); "
                                     "cell lr=3e-4 lacks best.pth")
    kinds = {(f["path"], f["kind"]) for f in r["findings"]}
    assert {("sweep/lr=3e-4", "incomplete_cell"), ("sweep/lr=*", "missing_cells")} <= kinds
    # The cells' files joined the roster: pulled and verified beside train.csv.
    assert (Path(r["dest"]) / "sweep" / "lr=1e-3" / "best.pth").exists()
    assert r["files_total"] == 1 + 5
    assert r["cells"]["incomplete"] == {"lr=3e-4": ["best.pth"]}
    assert r["cells"]["metrics"] == {"lr=1e-3": {"psnr": 31.5, "n": 100.0}, "lr=1e-4": {"psnr": 30.0, "n": 100.0},
                                     "lr=3e-4": {"psnr": 32.25, "n": 100.0}}


async def test_a_complete_sweep_passes_with_cells_alone(results, client) -> None:
    _sweep(results, {"0.1": 29.0, "0.01": 30.5})
    r = await until_done(client, root=str(results), cells={"glob": "sweep/*", "expect": 2,
                                                            "files": ["best.pth", "metrics.json"]})
    assert r["passed"] is True, r["findings"]
    assert r["cells"]["summary"] == "2 of 2 cells complete" and r["files_total"] == 4


async def test_a_bad_cell_glob_is_a_clear_input_error(results, client) -> None:
    text = error_text(await client.call_tool("verify_artifacts", {
        "host": "gpu1", "root": str(results), "cells": {"glob": "../*", "expect": 1, "files": ["a"]}}))
    assert "'..'" in text
