"""Sealing a verified pull into `<project>/runs/<run-id>/`: built from real verify_artifacts pulls
of tiny runs on the test sshd; hashes re-checked, provenance from the ledger, refusals named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mcp_server.deliver.capsule.layout import check_layout
from mcp_server.deliver.capsule.seal import seal_capsule, verify_capsule
from mcp_server.deliver.capsule.seal_roles import default_roles
from mcp_server.deliver.evidence.runs import provenance_hash
from mcp_server.deliver.evidence.schema import check
from mcp_server.errors import ConflictError, GateRefused
from mcp_server.paths.refusal import PathRefused
from tests.deliver.capsule.sealed_runs import seal, verified_pulls


async def test_a_verified_pull_seals_into_a_capsule_with_its_record_and_provenance(client, env, box, tmp_path) -> None:
    (pull,) = await verified_pulls(client, env, tmp_path, [2], git=True)
    verified = json.loads(pull.read_text())
    result = seal(env, tmp_path / "project", pull)
    capsule = tmp_path / "project" / "runs" / verified["run_id"]
    assert result.capsule == str(capsule) and result.run_id == verified["run_id"]
    assert sorted(p.name for p in (tmp_path / "project" / "runs").iterdir()) == [verified["run_id"]]  # no partial left
    assert check_layout(capsule) == [] and verify_capsule(capsule) == []
    record = json.loads((capsule / "run.json").read_text())
    assert record["schema"] == "remote-gpu-trainer/capsule/v1" and record["tests"] == ["main"]
    assert record["source"]["box_run_id"] == verified["run_id"] and record["source"]["pull_verified"] == str(pull)
    metrics = record["files"]["test/main/metrics.json"]
    pulled = verified["files"]["test/main/metrics.json"]["sha256"]
    assert metrics["sha256"] == "sha256:" + pulled.removeprefix("sha256:")
    assert set(record["files"]) == set(verified["files"])
    prov = record["provenance"]
    assert "tiny_seed_run.py --seed 2" in prov["command"] and prov["engine"] == "shell" and prov["seed"] == 2
    assert prov["box"]["host"] == "gpu1" and prov["box"]["hostname"]
    assert prov["git_dirty"] is True and len(prov["git_commit"]) == 40  # from the ledger's launch event
    assert prov["hardware"] is None  # the test box has no nvidia-smi: unknown, never invented
    doc = json.loads((capsule / "provenance.json").read_text())
    assert doc["provenance_hash"] == provenance_hash(doc["hash_inputs"]) == result.provenance_hash
    assert doc["hash_inputs"]["code_git_sha"] == {"commit": prov["git_commit"], "dirty": True}
    assert doc["hash_inputs"]["seed"] == {"value": 2} and doc["hash_inputs"]["data_hash"]["dataset"] == "unknown"
    (one,) = [f for f in result.findings if f.kind == "unknown_provenance"]  # one finding naming each input
    unknown = set((one.path or "").split("; "))
    assert "$.hash_inputs.data_hash" in unknown and "run.json provenance.hardware" in unknown
    assert "$.hash_inputs.hardware.gpu" in unknown and "$.hash_inputs.code_git_sha.commit" not in unknown
    assert result.provenance_schema_valid is True, "unknown inputs are null, which the schema accepts"
    assert check("provenance", doc) == [], "the shipped schema accepts it"
    assert os.stat(capsule / "best.pth").st_ino == os.stat(pull.parent / "best.pth").st_ino  # linked, not re-sent


async def test_sealing_the_same_run_again_is_refused_and_says_a_rerun_gets_a_new_id(client, env, box, tmp_path) -> None:
    (pull,) = await verified_pulls(client, env, tmp_path, [1])
    first = seal(env, tmp_path / "project", pull, link=False)
    assert {f.how for f in first.files} == {"copy"}
    with pytest.raises(ConflictError) as err:
        seal(env, tmp_path / "project", pull)
    assert "never edited" in str(err.value) and "new run id" in str(err.value)
    assert verify_capsule(Path(first.capsule)) == []


async def test_a_pulled_file_changed_after_verification_is_refused(client, env, box, tmp_path) -> None:
    (pull,) = await verified_pulls(client, env, tmp_path, [1])
    (pull.parent / "train.csv").write_text("epoch,loss\n0,0.1\n")
    with pytest.raises(GateRefused) as err:
        seal(env, tmp_path / "project", pull)
    assert "changed after it was verified" in err.value.message and "verify_artifacts" in (err.value.next_step or "")
    assert err.value.observed != err.value.expected and str(err.value.expected).startswith("sha256:")
    assert list((tmp_path / "project" / "runs").iterdir()) == []


async def test_a_tampered_capsule_file_is_named_with_both_hashes(client, env, box, tmp_path) -> None:
    (pull,) = await verified_pulls(client, env, tmp_path, [1])
    capsule = Path(seal(env, tmp_path / "project", pull, link=False).capsule)
    metrics = capsule / "test" / "main" / "metrics.json"
    before = json.loads((capsule / "run.json").read_text())["files"]["test/main/metrics.json"]["sha256"]
    os.chmod(metrics, 0o644)
    metrics.write_text(json.dumps({"accuracy": 0.99, "split": "test", "n": 400}))
    (found,) = verify_capsule(capsule)
    assert (found.kind, found.path, found.expected) == ("tampered", "test/main/metrics.json", before)
    assert found.actual and found.actual != before


def test_a_project_outside_the_pull_roots_is_refused_before_anything_is_read(env, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RGT_PULL_ROOTS", str(tmp_path / "pulls-only"))
    with pytest.raises(PathRefused) as err:
        seal_capsule(tmp_path / "pulls-only" / "project", tmp_path / "PULL_VERIFIED.json", roles=None,
                     evaluate=None, ledger=None)
    assert err.value.message.startswith("path refused") and "RGT_PULL_ROOTS" in (err.value.next_step or "")
    with pytest.raises(PathRefused) as err:
        seal_capsule(tmp_path / "project", tmp_path / "pulls-only" / "PULL_VERIFIED.json", roles=None,
                     evaluate=None, ledger=None)
    assert "project" in err.value.message
    assert not (tmp_path / "project").exists()


def test_the_layout_check_reports_missing_forbidden_and_incomplete_parts(tmp_path) -> None:
    capsule = tmp_path / "runs" / "r1"
    (capsule / "test" / "main" / "vis").mkdir(parents=True)
    (capsule / "test" / "main" / "metrics.json").write_text("{}")
    for name in ("run.json", "config.yaml", "latest.pth"):
        (capsule / name).write_text("{}")
    (capsule / "results").mkdir()
    kinds = {(f.kind, f.path) for f in check_layout(capsule)}
    assert kinds == {("missing_file", "train.csv"), ("missing_file", "best.pth"), ("forbidden_file", "latest.pth"),
                     ("forbidden_dir", "results/"), ("incomplete_test", "test/main/")}


def test_the_default_roles_take_obvious_names_and_never_guess_between_two() -> None:
    roles, findings = default_roles(["ckpt/model_best.pt", "out/metrics.json", "out/results.parquet",
                                     "out/vis/a/0.png", "cfg.yaml", "train.csv", "latest.pth"])
    assert roles == {"best.pth": "ckpt/model_best.pt", "test/main/metrics.json": "out/metrics.json",
                     "test/main/results.parquet": "out/results.parquet", "test/main/vis/a/0.png": "out/vis/a/0.png",
                     "config.yaml": "cfg.yaml", "train.csv": "train.csv"}
    assert [(f.kind, f.path) for f in findings] == [("not_sealed", "latest.pth")]
    _, two = default_roles(["a.pth", "b.pt", "test/main/metrics.json"])
    assert [(f.kind, f.path) for f in two] == [("ambiguous_role", "best.pth"), ("not_sealed", "a.pth"),
                                              ("not_sealed", "b.pt")]
