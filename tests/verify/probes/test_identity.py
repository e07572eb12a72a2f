"""checkpoint_identity (VP15, SH6): two checkpoints or runs compared by hash and by their
declared seeds and determinism flags; checkpoint files are hashed on the sshd box."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from mcp_server.verify.probes.identity import knob_audit
from tests.conftest import error_text, structured

ADAPTER = TypeAdapter(ProbeInputs)
FULL_FLAGS = {"torch.use_deterministic_algorithms": True, "torch.backends.cudnn.deterministic": True,
              "torch.backends.cudnn.benchmark": False, "worker_init_fn": "seed_worker",
              "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
H1, H2 = "a" * 64, "b" * 64


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "checkpoint_identity", **inputs}))


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


def test_knob_audit_names_what_a_seed_alone_does_not_give() -> None:
    audit = knob_audit(0, {"torch.manual_seed": 0})
    assert not audit.achievable
    assert set(audit.missing) == {"deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark_off",
                                     "worker_seeding", "cublas_workspace"}
    assert knob_audit(0, FULL_FLAGS).achievable
    assert "seed" in knob_audit(None, FULL_FLAGS).missing


async def test_two_different_runs_with_identical_bytes_are_a_stale_checkpoint_bug() -> None:
    r = await probe(a={"label": "seed0", "sha256": H1, "seed": 0}, b={"label": "seed1", "sha256": H1, "seed": 1},
                    expect="distinct")
    assert r.verdict == "bug" and "stale" in r.disclosure
    assert r.next_probe is not None and r.next_probe.route == "references://verifying/smoke-hidden-failures#sh6"


async def test_a_byte_identical_metric_across_two_runs_is_the_sh6_tell() -> None:
    r = await probe(a={"label": "run1", "sha256": H1, "metric": 0.8941},
                    b={"label": "run2", "sha256": H2, "metric": 0.8941},
                    expect="distinct")
    assert r.verdict == "bug" and "0.8941" in r.reason


async def test_two_different_runs_with_different_bytes_are_clean() -> None:
    r = await probe(a={"label": "seed0", "sha256": H1, "seed": 0}, b={"label": "seed1", "sha256": H2, "seed": 1},
                    expect="distinct")
    assert r.verdict == "clean"


async def test_a_rerun_with_the_same_bytes_achieved_determinism() -> None:
    r = await probe(a={"label": "first", "sha256": H1, "seed": 0, "flags": FULL_FLAGS},
                    b={"label": "rerun", "sha256": "SHA256:" + H1.upper(), "seed": 0, "flags": FULL_FLAGS},
                    expect="identical")
    assert r.verdict == "clean" and r.warnings == []


async def test_a_rerun_with_different_bytes_is_stochastic_and_names_the_missing_knobs() -> None:
    r = await probe(a={"label": "first", "sha256": H1, "seed": 0}, b={"label": "rerun", "sha256": H2, "seed": 0},
                    expect="identical")
    assert r.verdict == "stochastic"
    assert "determinism not fully declared" in r.disclosure and "cudnn_benchmark_off" in r.disclosure
    full = await probe(a={"label": "first", "sha256": H1, "seed": 0, "flags": FULL_FLAGS},
                       b={"label": "rerun", "sha256": H2, "seed": 0, "flags": FULL_FLAGS}, expect="identical")
    assert full.verdict == "stochastic" and "declared but not achieved" in full.disclosure


async def test_a_rerun_that_declares_another_seed_is_confounded() -> None:
    r = await probe(a={"label": "first", "sha256": H1, "seed": 0}, b={"label": "rerun", "sha256": H2, "seed": 1},
                    expect="identical")
    assert r.verdict == "confounded" and "seed 0 vs 1" in r.reason


async def test_without_hashes_identity_is_unverified_and_a_metric_match_proves_nothing() -> None:
    r = await probe(a={"label": "x", "metric": 0.5}, b={"label": "y", "metric": 0.5}, expect="identical")
    assert r.verdict == "unverified" and "proves nothing" in r.disclosure


def test_a_malformed_sha256_is_refused() -> None:
    with pytest.raises(ValidationError):
        ADAPTER.validate_python({"probe": "checkpoint_identity", "expect": "distinct",
                                 "a": {"label": "a", "sha256": "abc"}, "b": {"label": "b"}})


async def test_checkpoint_files_on_the_box_are_hashed_and_compared(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    blob = os.urandom(3 * 1024 * 1024 + 17)
    (gpu1 / "run1").mkdir()
    (gpu1 / "run2").mkdir()
    (gpu1 / "run1" / "best.pth").write_bytes(blob)
    (gpu1 / "run2" / "best.pth").write_bytes(blob)
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "run_id": "sweep-7", "inputs": {
        "probe": "checkpoint_identity", "expect": "distinct",
        "a": {"label": "seed0", "file": {"path": str(gpu1 / "run1" / "best.pth")}, "seed": 0},
        "b": {"label": "seed1", "file": {"path": str(gpu1 / "run2" / "best.pth")}, "seed": 1}}}))
    assert r["verdict"] == "bug"
    assert r["measurements"]["sha256_a"] == hashlib.sha256(blob).hexdigest()
    assert [f["bytes"] for f in r["inputs_read"]] == [len(blob), len(blob)]


async def test_a_declared_hash_that_the_file_contradicts_is_a_bug(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "best.pth").write_bytes(b"weights v2")
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "checkpoint_identity", "expect": "identical",
        "a": {"label": "claimed", "sha256": hashlib.sha256(b"weights v1").hexdigest(),
              "file": {"path": str(gpu1 / "best.pth")}},
        "b": {"label": "other", "sha256": H2}}}))
    assert r["verdict"] == "bug" and "does not match the file" in r["disclosure"]


async def test_a_checkpoint_over_the_hash_limit_is_refused_before_streaming(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "big.pth").write_bytes(b"\0" * 4096)
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "checkpoint_identity", "expect": "distinct", "max_hash_bytes": 1024,
        "a": {"label": "a", "file": {"path": str(gpu1 / "big.pth")}}, "b": {"label": "b", "sha256": H2}}})
    text = error_text(res)
    assert "over the 1024-byte limit" in text and "pass its sha256" in text


async def test_a_missing_checkpoint_is_not_found(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "checkpoint_identity", "expect": "distinct",
        "a": {"label": "a", "file": {"path": str(gpu1 / "nope.pth")}}, "b": {"label": "b", "sha256": H2}}})
    assert "file not found" in error_text(res)


def test_flags_copied_from_a_log_as_text_are_read_as_booleans() -> None:
    logged = {k: (str(v) if isinstance(v, bool) else v) for k, v in FULL_FLAGS.items()}
    assert knob_audit(0, logged).achievable
