"""trajectory (VP2): curve shape, direction-aware, with and without a control."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from mcp_server.errors import InputError
from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from tests.conftest import error_text, structured

ADAPTER = TypeAdapter(ProbeInputs)
CLIMB = [0.10, 0.35, 0.52, 0.63, 0.70, 0.74, 0.76, 0.77, 0.775, 0.776, 0.777, 0.777]
LOWER_CEILING = [0.10, 0.33, 0.48, 0.57, 0.62, 0.65, 0.665, 0.67, 0.672, 0.673, 0.673, 0.674]
GENTLE = [0.10, 0.18, 0.26, 0.33, 0.39, 0.44, 0.49, 0.53, 0.57, 0.60, 0.63, 0.66]
LOSS = [2.30, 1.60, 1.20, 0.95, 0.80, 0.72, 0.68, 0.66, 0.655, 0.652, 0.651, 0.650]


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "trajectory", **inputs}))


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


async def test_a_healthy_climb_that_levels_off_is_clean() -> None:
    r = await probe(run={"values": CLIMB}, metric="val/acc")
    assert r.verdict == "clean"
    assert r.measurements["run"]["shape"] == "plateau"
    assert r.measurements["direction"] == "higher"


async def test_a_curve_still_climbing_at_the_end_is_clean_with_an_undertraining_warning() -> None:
    r = await probe(run={"values": GENTLE}, metric="acc")
    assert r.verdict == "clean" and r.measurements["run"]["shape"] == "still_improving"
    assert any("still improving" in w for w in r.warnings)


async def test_a_falling_loss_is_healthy_because_lower_is_better() -> None:
    r = await probe(run={"values": LOSS}, metric="train_loss")
    assert r.verdict == "clean" and r.measurements["direction"] == "lower"
    wrong_way = await probe(run={"values": LOSS}, metric="custom_score", direction="higher")
    assert wrong_way.verdict == "instability"
    assert wrong_way.measurements["run"]["shape"] == "best_at_first"


async def test_best_at_the_first_epoch_with_grad_spikes_is_instability() -> None:
    r = await probe(run={"values": [0.61, 0.40, 0.35, 0.42, 0.38, 0.30]}, metric="miou",
                    grad_norm={"values": [1.0, 1.2, 0.9, 45.0, 1.1, 60.0]})
    assert r.verdict == "instability"
    assert r.measurements["grad_norm_spikes"] == 2
    assert "grad-norm spikes" in r.reason
    assert r.next_probe is not None and r.next_probe.run_probe == "seed_variance"


async def test_an_early_peak_then_decline_is_instability_and_says_reproduce() -> None:
    r = await probe(run={"values": [0.2, 0.5, 0.7, 0.72, 0.6, 0.5, 0.45, 0.42]}, metric="dice")
    assert r.verdict == "instability"
    assert r.measurements["run"]["shape"] == "peak_then_decline"
    assert r.measurements["run"]["best_step"] == 3
    assert r.next_probe is not None and r.next_probe.catalog == "VP3"


async def test_a_metric_that_ends_worse_than_it_started_has_diverged() -> None:
    r = await probe(run={"values": [1.0, 0.8, 0.7, 0.9, 1.5, 3.0]}, metric="loss")
    assert r.verdict == "instability" and r.measurements["run"]["shape"] == "diverged"


async def test_a_nan_in_the_curve_is_instability_at_the_step_it_appears() -> None:
    r = await probe(run={"values": [2.3, 1.2, 0.9, None, None], "keys": [0, 100, 200, 300, 400]}, metric="loss")
    assert r.verdict == "instability"
    assert r.measurements["run"]["first_nonfinite_step"] == 300
    assert r.next_probe is not None and r.next_probe.catalog == "SH2"


async def test_a_constant_metric_is_a_bug_not_a_result() -> None:
    r = await probe(run={"values": [0.1] * 10}, metric="acc")
    assert r.verdict == "bug" and r.measurements["run"]["shape"] == "flat"


async def test_a_curve_pinned_at_its_chance_floor_is_a_bug() -> None:
    r = await probe(run={"values": [0.098, 0.101, 0.099, 0.102, 0.1, 0.101]}, metric="acc", chance=0.1)
    assert r.verdict == "bug" and "chance" in r.reason


async def test_two_points_are_too_few_to_read_a_trajectory() -> None:
    r = await probe(run={"values": [0.3, 0.5]}, metric="acc")
    assert r.verdict == "unverified"


async def test_a_run_that_tracks_its_control_is_clean() -> None:
    r = await probe(run={"values": [v + 0.001 for v in CLIMB]}, control={"values": CLIMB}, metric="acc")
    assert r.verdict == "clean" and r.reason == "the run tracks its control"


async def test_a_healthy_run_that_saturates_below_its_control_is_an_effect() -> None:
    r = await probe(run={"values": LOWER_CEILING}, control={"values": CLIMB}, metric="acc")
    assert r.verdict == "effect"
    assert r.measurements["effect_shape"] == "lower ceiling"
    assert r.measurements["gap"] == pytest.approx(0.674 - 0.777)
    assert "seed noise" in r.disclosure


async def test_a_healthy_run_with_a_gentler_slope_is_an_effect() -> None:
    r = await probe(run={"values": GENTLE}, control={"values": CLIMB}, metric="acc")
    assert r.verdict == "effect" and r.measurements["effect_shape"] == "gentler slope"


async def test_curves_of_different_length_are_compared_at_the_common_budget() -> None:
    r = await probe(run={"values": CLIMB[:8]}, control={"values": CLIMB}, metric="acc")
    assert r.measurements["compared_at_step"] == 7
    assert any("different steps" in w for w in r.warnings)


async def test_an_unhealthy_control_makes_the_comparison_unverified() -> None:
    r = await probe(run={"values": CLIMB}, control={"values": [0.5, 0.3, 0.2, 0.25, 0.2]}, metric="acc")
    assert r.verdict == "unverified" and "control" in r.reason


async def test_an_unknown_metric_without_a_direction_is_refused_not_assumed() -> None:
    with pytest.raises(InputError, match="never assumed"):
        await probe(run={"values": CLIMB}, metric="frobnication")


async def test_inline_steps_that_do_not_match_the_values_are_refused() -> None:
    with pytest.raises(InputError, match="differ in length"):
        await probe(run={"values": CLIMB, "keys": [1, 2, 3]}, metric="acc")


async def test_tracker_csv_export_on_the_box_with_gaps_and_nan(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    rows = ["Step,run-a - val/loss,run-a - val/acc"]
    for i, (loss, acc) in enumerate(zip(LOSS, CLIMB, strict=True)):
        rows.append(f"{i * 50},{loss},{'' if i % 4 == 1 else acc}")
    rows.append(f"{len(LOSS) * 50},nan,")
    (gpu1 / "export.csv").write_text("\n".join(rows) + "\n")
    ref = {"path": str(gpu1 / "export.csv")}
    acc = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "val/acc",
        "run": {"file": ref, "column": "run-a - val/acc", "key_column": "Step"}}}))
    assert acc["verdict"] == "clean" and acc["measurements"]["run"]["points"] == 9
    loss = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "val/loss",
        "run": {"file": ref, "column": "run-a - val/loss", "key_column": "Step"}}}))
    assert loss["verdict"] == "instability"
    assert loss["measurements"]["run"]["first_nonfinite_step"] == len(LOSS) * 50
    assert len(loss["measurements"]["run_sample"]) <= 20


async def test_jsonl_training_log_on_the_box_against_a_control_column(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    pairs = enumerate(zip(LOWER_CEILING, CLIMB, strict=True))
    lines = [json.dumps({"epoch": i, "acc": a, "ctl_acc": c}) for i, (a, c) in pairs]
    (gpu1 / "log.jsonl").write_text("\n".join(lines) + "\n")
    ref = {"path": str(gpu1 / "log.jsonl")}
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "acc", "run": {"file": ref, "column": "acc", "key_column": "epoch"},
        "control": {"file": ref, "column": "ctl_acc", "key_column": "epoch"}}}))
    assert r["verdict"] == "effect"
    assert len(r["inputs_read"]) == 1


async def test_a_missing_column_names_the_columns_that_exist(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "log.csv").write_text("step,loss\n0,1.0\n1,0.5\n")
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "acc", "run": {"file": {"path": str(gpu1 / "log.csv")}, "column": "acc"}}})
    text = error_text(res)
    assert "column 'acc' not found" in text and "loss" in text


async def test_a_direction_that_contradicts_the_table_is_used_but_flagged() -> None:
    r = await probe(run={"values": LOSS}, metric="loss", direction="higher")
    assert r.measurements["direction"] == "higher"
    assert any("lower-is-better in the direction table" in w for w in r.warnings)
