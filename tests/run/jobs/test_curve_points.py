"""The points plot_run gives a view to draw: bounded per series and in all, finite, rounded,
and shaped like the series (a spike survives the cut)."""

from __future__ import annotations

import math

from mcp_server.run.jobs.curve_points import MAX_PER_SERIES, MAX_TOTAL, curve_points


def test_a_short_series_comes_whole_without_its_nan_and_inf_points() -> None:
    pts = [(1.0, 2.0), (2.0, math.nan), (3.0, math.inf), (4.0, 1.0)]
    (one,) = curve_points([("r", {"loss": pts})], ["loss"])
    assert (one.run_id, one.key, one.xy) == ("r", "loss", [(1.0, 2.0), (4.0, 1.0)])


def test_a_long_series_is_cut_to_the_bound_in_order_and_keeps_its_spike() -> None:
    pts = [(float(i), 1.0 / (i + 1)) for i in range(20_000)]
    pts[12_345] = (12_345.0, 50.0)
    (one,) = curve_points([("r", {"loss": pts})], ["loss"])
    xs = [x for x, _ in one.xy]
    assert 50 < len(one.xy) <= MAX_PER_SERIES
    assert xs == sorted(xs) and (12_345.0, 50.0) in one.xy


def test_many_runs_and_series_share_the_total_and_values_are_rounded() -> None:
    data = {k: [(float(i), math.pi * i) for i in range(1000)] for k in ("loss", "acc", "lr", "ppl")}
    got = curve_points([(f"r{n}", data) for n in range(16)], ["loss", "acc", "lr", "ppl"])
    assert len(got) == 64 and sum(len(s.xy) for s in got) <= MAX_TOTAL
    assert all(y == float(f"{y:.6g}") for s in got for _, y in s.xy)


def test_a_key_a_run_lacks_gives_no_series_for_it() -> None:
    got = curve_points([("a", {"loss": [(1.0, 1.0)]}), ("b", {"acc": [(1.0, 0.5)]})], ["loss"])
    assert [(s.run_id, s.key) for s in got] == [("a", "loss")]
    assert curve_points([("a", {})], ["loss"]) == []
