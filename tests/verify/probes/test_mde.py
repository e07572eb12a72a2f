"""mde (statistics §5): minimum detectable effect, floored by the noisier arm."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mcp_server.errors import InputError
from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe

ADAPTER = TypeAdapter(ProbeInputs)


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "mde", **inputs}))


async def test_the_worked_example_sd_3_42_three_seeds_gives_7_75_and_the_headline_is_resolvable() -> None:
    r = await probe(sd=3.42, n=3, claimed_effect=9.9)
    assert round(r.measurements["mde"], 2) == 7.75  # type: ignore[arg-type]
    assert r.measurements["df"] == 4 and r.measurements["t_crit"] == pytest.approx(2.776, abs=5e-4)
    assert r.verdict == "clean"
    assert any("80%-power" in w for w in r.warnings)


async def test_a_claimed_effect_below_the_mde_is_underpowered_with_the_seeds_it_would_need() -> None:
    r = await probe(sd=3.42, n=3, claimed_effect=5.0)
    assert r.verdict == "underpowered"
    assert r.measurements["n_needed"] == 5
    assert "underpowered, not null" in r.disclosure and "7.75" in r.disclosure


async def test_the_noisier_arm_sets_the_floor() -> None:
    quiet = await probe(sd=1.0, sd_other=3.42, n=3, claimed_effect=5.0)
    assert quiet.measurements["sd_used"] == 3.42 and quiet.measurements["sd_from"] == "noisier arm"
    assert quiet.verdict == "underpowered"


async def test_per_seed_values_give_sd_and_n() -> None:
    r = await probe(baseline_values=[42.63, 49.30, 47.26], claimed_effect=2.72)
    assert r.measurements["n"] == 3
    assert r.measurements["sd_used"] == pytest.approx(3.41778, rel=1e-5)
    assert r.verdict == "underpowered"


async def test_without_a_claim_the_mde_is_reported_but_no_verdict_is_invented() -> None:
    r = await probe(sd=2.0, n=5)
    assert r.verdict == "not_applicable"
    assert "cannot be told from seed noise" in r.disclosure


async def test_one_seed_per_arm_is_unverified_not_a_number() -> None:
    r = await probe(sd=2.0, n=1, claimed_effect=1.0)
    assert r.verdict == "unverified" and "mde" not in r.measurements
    single = await probe(baseline_values=[47.0], claimed_effect=1.0)
    assert single.verdict == "unverified"


async def test_zero_spread_across_seeds_is_flagged_before_trusting_an_mde_of_zero() -> None:
    r = await probe(baseline_values=[0.5, 0.5, 0.5], claimed_effect=0.01)
    assert r.verdict == "unverified" and r.next_probe is not None and r.next_probe.catalog == "VP15"


async def test_missing_spread_or_count_is_a_clear_error() -> None:
    with pytest.raises(ValidationError, match="`sd` or `baseline_values`"):
        ADAPTER.validate_python({"probe": "mde", "n": 3})
    with pytest.raises(InputError, match="runs per arm"):
        await probe(sd=1.0)
    with pytest.raises(InputError, match="non-finite"):
        await probe(baseline_values=[1.0, float("nan"), 2.0])
