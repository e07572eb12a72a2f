"""collapse (VP10, §4): cross-sample cosine, per-feature std, effective rank, real vs
shuffled — on the raw input first, then on the outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter

from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from mcp_server.verify.probes.collapse import effective_rank, matrix_stats
from tests.conftest import structured

ADAPTER = TypeAdapter(ProbeInputs)
RNG = np.random.default_rng(0)


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "collapse", **inputs}))


def healthy(b: int = 64, d: int = 32) -> np.ndarray:
    return RNG.normal(size=(b, d))


def collapsed(b: int = 64, d: int = 32, noise: float = 1e-3) -> np.ndarray:
    return RNG.normal(size=(1, d)) + noise * RNG.normal(size=(b, d))


def dc_input(b: int = 64, d: int = 128) -> np.ndarray:
    """|x| ~ 0.5 with per-element std ~ 0.005: a sample-invariant component dominates."""
    return 0.5 + 0.0047 * RNG.normal(size=(b, d))


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


def test_mean_offdiagonal_cosine_matches_the_full_cosine_matrix() -> None:
    x = healthy(20, 8)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    full = unit @ unit.T
    expected = (full.sum() - np.trace(full)) / (20 * 19)
    assert matrix_stats(x).mean_offdiag_cosine == pytest.approx(expected, rel=1e-5)


def test_effective_rank_is_one_for_rank_one_spread_and_full_for_orthogonal_spread() -> None:
    direction = RNG.normal(size=(1, 16))
    assert effective_rank(RNG.normal(size=(50, 1)) * direction) == pytest.approx(1.0, rel=1e-6)
    assert effective_rank(np.vstack([np.eye(8), -np.eye(8)])) == pytest.approx(8.0, rel=1e-6)
    assert effective_rank(np.ones((10, 4))) == 0.0


async def test_distinct_outputs_for_distinct_inputs_are_clean() -> None:
    r = await probe(outputs={"rows": healthy().tolist()}, inputs={"rows": healthy(64, 20).tolist()})
    assert r.verdict == "clean"
    assert abs(r.measurements["outputs"]["mean_offdiag_cosine"]) < 0.2  # type: ignore[index]


async def test_outputs_pinned_near_cosine_one_are_collapsed() -> None:
    r = await probe(outputs={"rows": collapsed().tolist()})
    assert r.verdict == "collapsed"
    assert r.measurements["outputs"]["mean_offdiag_cosine"] > 0.99  # type: ignore[index]
    assert "raw input was not checked" in r.disclosure


async def test_an_invariant_dominated_input_routes_the_fix_to_the_input_not_the_head() -> None:
    r = await probe(outputs={"rows": collapsed().tolist()}, inputs={"rows": dc_input().tolist()})
    assert r.verdict == "collapsed"
    assert r.measurements["input_invariant_dominated"] is True
    assert r.measurements["inputs"]["std_over_mean_abs"] < 0.02  # type: ignore[index]
    assert "fix the input normalisation" in r.disclosure
    assert r.next_probe is not None and r.next_probe.route == "references://verifying/representation-collapse"


async def test_a_healthy_input_with_collapsed_outputs_puts_the_collapse_inside_the_model() -> None:
    r = await probe(outputs={"rows": collapsed().tolist()}, inputs={"rows": healthy(64, 20).tolist()})
    assert r.verdict == "collapsed" and "inside the model" in r.disclosure


async def test_identical_or_all_zero_outputs_are_collapsed() -> None:
    same = await probe(outputs={"rows": [[0.2, -0.1, 0.4]] * 16})
    assert same.verdict == "collapsed" and "per-feature std 0" in same.reason
    zero = await probe(outputs={"rows": [[0.0, 0.0]] * 8})
    assert zero.verdict == "collapsed" and "zero vector" in zero.reason


async def test_real_equal_to_shuffled_conditioning_is_collapsed_even_with_scattered_outputs() -> None:
    r = await probe(outputs={"rows": healthy().tolist()}, real_score=0.126, shuffled_score=0.126, chance=0.1)
    assert r.verdict == "collapsed" and "== shuffled" in r.reason
    ok = await probe(outputs={"rows": healthy().tolist()}, real_score=0.54, shuffled_score=0.11, chance=0.1)
    assert ok.verdict == "clean"


async def test_outputs_that_ignore_shuffled_conditioning_are_collapsed() -> None:
    out = healthy()
    r = await probe(outputs={"rows": out.tolist()}, shuffled_outputs={"rows": out.tolist()})
    assert r.verdict == "collapsed" and r.measurements["shuffled_outputs_equal_real"] is True


async def test_an_invariant_input_with_distinct_outputs_is_clean_with_a_warning() -> None:
    r = await probe(outputs={"rows": healthy().tolist()}, inputs={"rows": dc_input().tolist()})
    assert r.verdict == "clean" and any("sample-invariant" in w for w in r.warnings)


async def test_one_row_or_non_finite_values_are_unverified_with_the_reason() -> None:
    one = await probe(outputs={"rows": [[1.0, 2.0]]})
    assert one.verdict == "unverified" and "need at least 2" in one.reason
    nan = await probe(outputs={"rows": [[1.0, float("nan")], [0.5, 0.2]]})
    assert nan.verdict == "unverified" and "non-finite" in nan.reason


async def test_embedding_npy_files_on_the_box_with_image_shaped_inputs(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    np.save(gpu1 / "emb.npy", collapsed(256, 64).astype(np.float32))
    np.save(gpu1 / "raw.npy", (0.5 + 0.004 * RNG.normal(size=(256, 1, 8, 8))).astype(np.float32))
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "collapse", "outputs": {"file": {"path": str(gpu1 / "emb.npy")}},
        "inputs": {"file": {"path": str(gpu1 / "raw.npy")}}, "max_rows": 128}}))
    assert r["verdict"] == "collapsed"
    assert r["measurements"]["inputs"]["features"] == 64 and r["measurements"]["outputs"]["rows"] == 128


async def test_an_object_npy_is_refused_rather_than_unpickled(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    np.save(gpu1 / "obj.npy", np.array([{"a": 1}, {"b": 2}], dtype=object), allow_pickle=True)
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "collapse", "outputs": {"file": {"path": str(gpu1 / "obj.npy")}}}})
    assert res.is_error and "pickle" in res.content[0].text
