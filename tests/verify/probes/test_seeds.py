"""seed_variance (VP4, VP11, statistics): per-arm stats, Welch, single-seed vs every
baseline draw, paired per-item test and bootstrap, Holm across comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter
from scipy import stats as sps

from mcp_server.errors import InputError
from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from tests.conftest import error_text, structured

ADAPTER = TypeAdapter(ProbeInputs)
BASELINE = [42.63, 49.30, 47.26]


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "seed_variance", **inputs}))


def arm(name: str, values: list[float | None], **kw: Any) -> dict[str, Any]:
    return {"name": name, "values": values, **kw}


def comparison(r: ProbeResult, i: int = 0) -> dict[str, Any]:
    return r.measurements["comparisons"][i]  # type: ignore[index,return-value]


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


async def test_single_seed_probe_against_every_baseline_draw_reproduces_the_worked_example() -> None:
    r = await probe(metric="psnr", baseline=arm("baseline", BASELINE), arms=[arm("probe", [49.12])])
    c = comparison(r)
    assert (round(c["vs_worst"], 2), round(c["vs_mean"], 2), round(c["vs_best"], 2)) == (6.49, 2.72, -0.18)
    assert c["variance"] == "single_seed_vs_baseline_seeds" and c["inside_range"]
    assert r.verdict == "noise"
    assert "single seed, no variance band" in r.disclosure
    assert "worst seed 42.63 (+6.49)" in r.disclosure


async def test_separated_arms_with_five_seeds_each_are_an_effect_with_welch_and_iqm() -> None:
    base = [71.2, 70.8, 71.5, 70.9, 71.1]
    new = [73.0, 72.6, 73.4, 72.9, 73.1]
    r = await probe(metric="accuracy", baseline=arm("base", base), arms=[arm("new", new)])
    c = comparison(r)
    ref = sps.ttest_ind(new, base, equal_var=False)
    assert c["p"] == pytest.approx(ref.pvalue, rel=1e-5)
    assert c["welch_df"] == pytest.approx(ref.df, rel=1e-5)
    assert r.verdict == "effect"
    assert r.measurements["arms"]["new"]["iqm"] == pytest.approx(float(sps.trim_mean(new, 0.25)), rel=1e-5)
    assert "variance over seeds" in r.disclosure


async def test_overlapping_arms_are_noise_and_the_disclosure_says_not_an_improvement() -> None:
    r = await probe(metric="accuracy", baseline=arm("base", [71.2, 70.1, 72.4, 70.9]),
                    arms=[arm("new", [71.9, 70.6, 72.8, 71.0])])
    assert r.verdict == "noise"
    assert "not an improvement" in r.disclosure


async def test_a_non_significant_delta_below_the_designs_mde_is_underpowered_not_null() -> None:
    r = await probe(metric="psnr", baseline=arm("base", BASELINE), arms=[arm("new", [50.1, 45.2, 51.9])],
                    min_effect=3.0)
    c = comparison(r)
    assert c["mde"] > 3.0
    assert r.verdict == "underpowered"
    assert "underpowered, not a null result" in r.disclosure


async def test_a_nan_seed_is_instability_not_a_smaller_n() -> None:
    r = await probe(metric="psnr", baseline=arm("base", BASELINE), arms=[arm("new", [50.1, None, 51.9])])
    assert r.verdict == "instability"
    assert r.measurements["arms"]["new"]["nonfinite"] == 1
    assert "retry the identical config" in r.disclosure


async def test_one_collapsed_seed_among_healthy_ones_is_instability() -> None:
    r = await probe(metric="psnr", baseline=arm("base", [47.0, 48.0, 46.0, 47.5, 12.0]),
                    arms=[arm("new", [48.0, 48.5, 47.9, 48.2, 48.1])])
    assert r.verdict == "instability"
    assert r.measurements["instability"]["base"]["outlier_seed_values"] == [12.0]


async def test_one_seed_on_each_side_without_items_is_unverified_and_makes_no_number_up() -> None:
    r = await probe(metric="psnr", baseline=arm("base", [47.0]), arms=[arm("new", [48.0])])
    c = comparison(r)
    assert r.verdict == "unverified"
    assert c["p"] is None and c["prediction_t"] is None


async def test_per_item_scores_give_a_paired_test_and_bootstrap_even_with_one_seed() -> None:
    rng = np.random.default_rng(1)
    base_items = rng.uniform(0.3, 0.9, 200)
    new_items = np.clip(base_items + rng.normal(0.03, 0.05, 200), 0, 1)
    r = await probe(metric="accuracy",
                    baseline=arm("base", [float(base_items.mean())], items={"values": base_items.tolist()}),
                    arms=[arm("new", [float(new_items.mean())], items={"values": new_items.tolist()})])
    c = comparison(r)
    ref = sps.ttest_rel(new_items, base_items)
    assert c["variance"] == "item"
    assert c["paired"]["p"] == pytest.approx(ref.pvalue, rel=1e-4)
    assert c["paired"]["bootstrap_ci_low"] < c["paired"]["mean_diff"] < c["paired"]["bootstrap_ci_high"]
    assert r.verdict == "effect"
    assert "sampling variance of the test items, not seed variance" in r.disclosure


async def test_per_item_lists_of_different_lengths_without_ids_are_refused() -> None:
    with pytest.raises(InputError, match="differ in length"):
        await probe(metric="acc", baseline=arm("base", [0.7], items={"values": [1, 0, 1]}),
                    arms=[arm("new", [0.8], items={"values": [1, 1]})])


async def test_non_finite_per_item_scores_skip_the_paired_test_and_say_why() -> None:
    r = await probe(metric="acc", baseline=arm("base", [0.7, 0.72], items={"values": [1, 0, 1, 1]}),
                    arms=[arm("new", [0.8, 0.79], items={"values": [1, None, 1, 1]})])
    assert "paired" not in comparison(r)
    assert any("non-finite per-item" in w for w in r.warnings)


async def test_holm_correction_across_arms_turns_a_lone_p_below_alpha_into_noise() -> None:
    base = [71.0, 70.0, 72.0, 71.5, 70.5]
    r = await probe(metric="acc", baseline=arm("base", base), arms=[
        arm("a", [72.4, 71.2, 73.1, 72.0, 72.6]), arm("b", [71.1, 70.2, 72.1, 71.4, 70.6]),
        arm("c", [70.9, 70.1, 72.0, 71.6, 70.4])])
    a = comparison(r, 0)
    assert a["p"] < 0.05 < a["p_holm"]
    assert a["verdict"] == "noise"
    assert r.measurements["holm_family_size"] == 3


async def test_comparisons_tried_widens_the_holm_family() -> None:
    kw = {"metric": "acc", "baseline": arm("base", [71.2, 70.8, 71.5, 70.9, 71.1]),
          "arms": [arm("new", [71.9, 71.6, 72.2, 71.5, 71.8])]}
    alone = await probe(**kw)
    many = await probe(**kw, comparisons_tried=40)
    assert alone.verdict == "effect"
    assert many.verdict == "noise" and many.measurements["holm_family_size"] == 40


async def test_an_empty_arm_and_duplicate_names_are_clear_errors() -> None:
    with pytest.raises(InputError, match="empty"):
        await probe(metric="acc", baseline=arm("base", []), arms=[arm("new", [0.8])])
    with pytest.raises(InputError, match="distinct"):
        await probe(metric="acc", baseline=arm("x", [0.7]), arms=[arm("x", [0.8])])


async def test_an_unknown_metric_direction_is_flagged_not_silently_assumed() -> None:
    r = await probe(metric="frob", baseline=arm("base", BASELINE), arms=[arm("probe", [49.12])])
    assert any("direction unknown" in w for w in r.warnings)


async def test_seed_table_and_per_item_files_on_the_box_join_items_by_id(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "seeds.csv").write_text("seed,base,new\n0,0.712,0.741\n1,0.708,0.745\n2,0.715,0.739\n")
    rng = np.random.default_rng(5)
    ids = [f"img_{i:04d}" for i in range(300)]
    base = rng.uniform(0.4, 0.9, 300)
    new = np.clip(base + rng.normal(0.02, 0.04, 300), 0, 1)
    (gpu1 / "base_items.jsonl").write_text(
        "".join(f'{{"id": "{i}", "score": {s}}}\n' for i, s in zip(ids, base, strict=True)))
    (gpu1 / "new_items.csv").write_text("id,score\n" + "".join(
        f"{i},{s}\n" for i, s in list(zip(ids, new, strict=True))[::-1][:-1]))
    seeds = {"path": str(gpu1 / "seeds.csv")}
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "seed_variance", "metric": "accuracy",
        "baseline": {"name": "base", "file": seeds, "column": "base", "items": {
            "file": {"path": str(gpu1 / "base_items.jsonl")}, "column": "score", "key_column": "id"}},
        "arms": [{"name": "new", "file": seeds, "column": "new", "items": {
            "file": {"path": str(gpu1 / "new_items.csv")}, "column": "score", "key_column": "id"}}]}}))
    c = r["measurements"]["comparisons"][0]
    assert c["variance"] == "seed" and c["n_arm"] == 3
    assert c["paired"]["n_items"] == 299
    assert any("one side only" in w for w in r["warnings"])
    assert r["verdict"] == "effect"
    assert len(r["inputs_read"]) == 3


async def test_a_seed_column_with_text_in_it_is_a_clear_error(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "seeds.csv").write_text("seed,base\n0,0.71\n1,oops\n")
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "seed_variance",
        "baseline": {"name": "base", "file": {"path": str(gpu1 / "seeds.csv")}, "column": "base"},
        "arms": [{"name": "new", "values": [0.8]}]}})
    assert "not a number" in error_text(res) and "oops" in error_text(res)


async def test_inline_integer_item_ids_join_with_ids_read_from_a_file_as_text() -> None:
    r = await probe(metric="acc",
                    baseline=arm("base", [0.70], items={"values": [1, 0, 1, 0, 1], "keys": [1, 2, 3, 4, 5]}),
                    arms=[arm("new", [0.72], items={"values": [1, 1, 1, 0, 1], "keys": ["5", "4", "3", "2", "1"]})])
    assert comparison(r)["paired"]["n_items"] == 5
