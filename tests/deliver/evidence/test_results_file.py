"""Results files in every accepted shape read into the same entries, and the shipped
schema accepts exactly those shapes (naming the place of anything else)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server.deliver.evidence.results_file import MetricEntry, lookup, read_results
from mcp_server.deliver.evidence.schema import check

PSNR = MetricEntry(metric="psnr", split="test", value=31.42, n=100, variance=0.08, seeds=3)


@pytest.mark.parametrize(("shape", "data"), [
    ("flat", {"psnr": 31.42, "psnr_std": 0.08, "split": "test", "n": 100, "seeds": 3}),
    ("flat", {"split": "test", "n": 100, "seeds": 3, "metrics": {"psnr": 31.42, "psnr_std": 0.08}}),
    ("flat", {"test": {"psnr": 31.42, "psnr_std": 0.08, "n": 100}, "seeds": 3}),
    ("listed", {"metrics": [{"metric": "psnr", "split": "test", "value": 31.42, "n": 100,
                             "variance": {"type": "std", "value": 0.08, "seeds": 3}}]}),
    ("mapped", {"psnr": {"test": {"value": 31.42, "n": 100, "variance": {"type": "std", "value": 0.08, "seeds": 3}}}}),
])
def test_every_shape_reads_into_the_same_entry(shape: str, data: dict[str, Any]) -> None:
    assert check("results", data) == []
    results = read_results(data)
    assert results.shape == shape
    assert results.entries == [PSNR]


def test_counters_settings_and_text_in_a_flat_file_are_not_metrics() -> None:
    data = {"epoch": 87, "step": 12000, "lr": 0.001, "seed": 0, "dataset": "div2k", "ok": True, "psnr": 31.07}
    assert check("results", data) == []
    assert [(e.metric, e.value) for e in read_results(data).entries] == [("psnr", 31.07)]


def test_per_split_blocks_keep_their_split_and_the_file_level_n() -> None:
    results = read_results({"n": 50, "val": {"psnr": 31.6}, "test": {"psnr": 31.42, "n": 100}})
    assert [(e.split, e.value, e.n) for e in results.entries] == [("val", 31.6, 50), ("test", 31.42, 100)]


def test_a_file_that_states_no_split_stands_for_the_split_asked_for() -> None:
    table = read_results({"psnr": 28.10, "n": 14}).table()
    got = lookup(table, "PSNR", "test")
    assert got is not None and got.value == 28.10
    both = read_results({"val": {"psnr": 31.6}, "test": {"psnr": 31.42}}).table()
    assert lookup(both, "psnr", "val") is not None and lookup(both, "psnr", "val").value == 31.6  # type: ignore[union-attr]  # checked just before
    assert lookup(both, "psnr", "train") is None


@pytest.mark.parametrize(("data", "where"), [
    ({"psnr": [31.42]}, "$.psnr"),
    ({"psnr": 31.42, "n": 0}, "$.n"),
    ({"psnr": 31.42, "split": "holdout"}, "$.split"),
    ({"metrics": [{"metric": "psnr"}]}, "$.metrics[0]"),
    ({"test": {"psnr": {"mean": 31.42}}}, "$.test.psnr"),
])
def test_a_file_in_no_accepted_shape_is_refused_at_its_place(data: dict[str, Any], where: str) -> None:
    errors = check("results", data)
    assert errors and errors[0].json_path == where
