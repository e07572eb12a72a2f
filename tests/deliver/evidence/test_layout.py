"""Which run a results file belongs to, in each layout: the canonical capsule, the legacy
run tree, a plain `selected/` copy, the legacy `selected` symlink (inside or outside runs/),
and any other folder. Pure path logic over already-resolved paths."""

from __future__ import annotations

import pytest

from mcp_server.deliver.evidence.layout import Place, place, probes

ROOT = "/p"


@pytest.mark.parametrize(("written", "real", "expected"), [
    ("/p/runs/R1/test/set14/metrics.json", {}, Place("capsule", "/p/runs/R1", "R1")),
    ("/p/results/ours/runs/R1/results.json", {}, Place("run", "/p/results/ours/runs/R1", "R1", "/p/results/ours")),
    ("/p/results/ours/selected/results.json", {},
     Place("selected_copy", "/p/results/ours/selected", exp_dir="/p/results/ours",
           selected="/p/results/ours/selected")),
    ("/p/results/ours/selected/results.json",
     {"/p/results/ours/selected": "/p/results/ours/runs/R1"},
     Place("selected_link", "/p/results/ours/runs/R1", "R1", "/p/results/ours", "/p/results/ours/selected")),
    ("/p/results/ours/selected/results.json", {"/p/results/ours/selected": "/p/elsewhere"},
     Place("selected_link", "/p/elsewhere", None, "/p/results/ours", "/p/results/ours/selected", outside_runs=True)),
    ("/p/results/ours/selected/results.json", {"/p/results/ours/selected": "/p/runs/R1"},
     Place("selected_link", "/p/runs/R1", "R1", "/p/results/ours", "/p/results/ours/selected")),
    ("/p/final_ckpts/lr3e-4/best_metrics.json", {}, Place("other", "/p/final_ckpts/lr3e-4")),
])
def test_each_layout_is_recognised(written: str, real: dict[str, str], expected: Place) -> None:
    assert place(written, real, ROOT) == expected


def test_a_runs_folder_above_the_project_is_not_taken_for_a_run() -> None:
    assert place("/home/u/runs/p/cells/a/best_metrics.json", {}, "/home/u/runs/p").layout == "other"


def test_a_path_through_selected_asks_for_the_link_and_its_experiment() -> None:
    assert probes("/p/results/ours/selected/test/a/metrics.json") == [
        "/p/results/ours/selected/test/a", "/p/results/ours/selected", "/p/results/ours"]
