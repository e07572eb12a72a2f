"""metric_sanity (§6): direction table, chance floors, false precision, sparse targets."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import TypeAdapter

from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from mcp_server.verify.probes.directions import direction_of

ADAPTER = TypeAdapter(ProbeInputs)


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "metric_sanity", **inputs}))


@pytest.mark.parametrize(("name", "direction"), [
    ("PSNR", "higher"), ("val/SSIM", "higher"), ("mAP50", "higher"), ("AP@[.5:.95]", "higher"),
    ("LPIPS", "lower"), ("NMSE", "lower"), ("train_loss", "lower"), ("test/mIoU", "higher"),
    ("dice", "higher"), ("top1_err", "lower"), ("perplexity", "lower"), ("FID", "lower"),
    ("rewards/margins", "higher"), ("rewards/accuracies", "higher"), ("recall@5", "higher"),
    ("latency_ms", "lower"), ("episode_return", "higher"), ("frobnication", None),
])
def test_the_direction_table_reads_tracker_spellings(name: str, direction: str | None) -> None:
    assert direction_of(name) == direction


async def test_an_accuracy_well_above_chance_with_known_direction_is_clean() -> None:
    r = await probe(metric="accuracy", value=0.873, reported="0.873", n=10000, num_classes=10)
    assert r.verdict == "clean"
    assert r.measurements["chance_floor"] == 0.1 and r.measurements["chance_formula"] == "1/k = 1/10"
    assert r.warnings == []


async def test_reading_a_loss_as_higher_is_better_is_a_bug() -> None:
    r = await probe(metric="val_loss", value=0.41, direction="higher")
    assert r.verdict == "bug" and "lower-is-better" in r.reason


async def test_an_accuracy_indistinguishable_from_one_over_k_is_at_its_chance_floor() -> None:
    r = await probe(metric="acc", value=0.104, n=1000, num_classes=10)
    assert r.verdict == "bug"
    assert r.measurements["p_above_chance"] > 0.05  # type: ignore[operator]
    assert "chance floor" in r.disclosure


async def test_an_accuracy_far_below_chance_points_at_the_label_mapping() -> None:
    r = await probe(metric="accuracy", value=3.0, reported="3.0%", n=1000, num_classes=10)
    assert r.verdict == "bug" and "below chance" in r.reason


async def test_an_infonce_loss_resting_at_ln_b_has_no_useful_gradient() -> None:
    r = await probe(metric="infonce_loss", value=5.53, batch_size=256)
    assert r.verdict == "bug"
    assert r.measurements["chance_floor"] == pytest.approx(math.log(256), rel=1e-5)
    learned = await probe(metric="infonce_loss", value=2.1, batch_size=256)
    assert learned.verdict == "clean"


async def test_cross_entropy_still_at_ln_c_has_learned_nothing() -> None:
    r = await probe(metric="cross_entropy", value=2.30, num_classes=10)
    assert r.verdict == "bug" and r.measurements["chance_formula"] == "ln C = ln 10"


async def test_in_batch_retrieval_at_one_over_b_is_at_chance() -> None:
    r = await probe(metric="recall@1", value=0.0079, batch_size=128, chance_kind="retrieval")
    assert r.verdict == "bug"


async def test_zero_items_scored_is_a_bug_not_a_non_significant_result() -> None:
    r = await probe(metric="accuracy", value=0.0, n=0)
    assert r.verdict == "bug" and "scorer did not apply" in r.reason


async def test_an_unknown_metric_without_a_direction_is_unverified() -> None:
    r = await probe(metric="frobnication", value=3.2)
    assert r.verdict == "unverified" and "direction" in r.reason


async def test_psnr_on_a_mostly_background_target_is_unverified_until_foreground_scored() -> None:
    r = await probe(metric="PSNR", value=31.2, foreground_fraction=0.03)
    assert r.verdict == "unverified" and "foreground-scoped" in r.disclosure
    dense = await probe(metric="PSNR", value=31.2, foreground_fraction=0.6)
    assert dense.verdict == "clean"


async def test_real_no_better_than_shuffled_conditioning_is_collapsed() -> None:
    r = await probe(metric="accuracy", value=0.126, shuffle_value=0.126, num_classes=10, n=5000)
    assert r.verdict == "collapsed"


async def test_a_shuffle_baseline_below_chance_on_val_is_an_optimistic_artifact() -> None:
    r = await probe(metric="accuracy", value=0.54, shuffle_value=0.03, num_classes=10, split="val")
    assert r.verdict == "unverified" and "below chance" in r.reason
    assert any("test split" in w for w in r.warnings)


async def test_four_decimals_on_a_hundred_items_is_false_precision() -> None:
    r = await probe(metric="accuracy", value=87.3456, reported="87.3456%", n=100)
    assert r.verdict == "clean"
    assert r.measurements["decimals_reported"] == 4 and r.measurements["decimals_justified"] == 0
    assert any("false precision" in w for w in r.warnings)
    assert "false precision" in r.disclosure
    fine = await probe(metric="accuracy", value=0.873, reported="0.87", n=100)
    assert fine.warnings == []


async def test_false_precision_for_a_non_proportion_uses_the_per_item_std() -> None:
    r = await probe(metric="psnr", value=28.4137, reported="28.4137", n=50, std=3.1)
    assert r.measurements["decimals_justified"] == 1
    assert any("false precision" in w for w in r.warnings)


async def test_a_nan_metric_is_unverified_and_no_floor_is_compared() -> None:
    r = await probe(metric="accuracy", value=float("nan"), num_classes=10)
    assert r.verdict == "unverified" and "chance_floor" not in r.measurements
