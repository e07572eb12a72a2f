"""Evidence rows proposed from sealed capsules (real verify_artifacts pulls of tiny runs on the
test sshd), applied only with the plan's token, then reconciled against a small paper."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mcp_server.deliver.capsule.evidence_plan import apply_evidence, propose_evidence
from mcp_server.errors import GateRefused
from mcp_server.ledger import Ledger
from tests.conftest import structured
from tests.deliver.capsule.sealed_runs import sealed_capsules


def _propose(env: Any, project: Path, run_ids: list[str], **kw: Any) -> Any:
    ledger = Ledger.open(env.home / "ledger.sqlite")
    try:
        return propose_evidence(project, run_ids, claim_id="C1", metric="accuracy", test_id="main",
                                evidence_path=project / "EVIDENCE.json", statement="Ours classifies the blobs",
                                aliases=kw.pop("aliases", ["Ours"]), ledger=ledger, **kw)
    finally:
        ledger.close()


def _apply(env: Any, project: Path, token: str) -> Any:
    ledger = Ledger.open(env.home / "ledger.sqlite")
    try:
        return apply_evidence(token, ledger=ledger, evidence_path=project / "EVIDENCE.json")
    finally:
        ledger.close()


async def test_three_seeds_become_one_row_with_its_std_and_reconcile_finds_the_stale_number(
        client, env, box, tmp_path) -> None:
    project, runs = await sealed_capsules(client, env, tmp_path, [1, 2, 3])
    plan = _propose(env, project, runs)
    row = plan.row
    assert (row["value"], row["split"], row["n"]) == (0.82, "test", 400)
    assert row["variance"] == {"type": "std", "value": 0.02, "seeds": 3} and row["run_ids"] == runs
    assert plan.disclosure is None and plan.current_sha256 is None and not (project / "EVIDENCE.json").exists()
    assert plan.diff == [{"op": "add", "path": f"/{k}", "value": v} for k, v in plan.document.items()]
    assert row["results_json"] == os.path.relpath(plan.group_file, project) and not Path(plan.group_file).exists()
    done = _apply(env, project, plan.token)
    assert json.loads((project / "EVIDENCE.json").read_text()) == plan.document
    group = json.loads(Path(plan.group_file).read_text())
    assert [s["run_id"] for s in group["sources"]] == runs and group["metrics"][0]["value"] == 0.82
    assert done.written == [plan.group_file, str(project / "EVIDENCE.json")]
    (project / "README.md").write_text("Ours reaches accuracy 0.82 on the test set (3 seeds).\n")
    (project / "slides.md").write_text("Ours reaches accuracy 0.85\n")
    out = structured(await client.call_tool("reconcile_evidence", {
        "evidence": str(project / "EVIDENCE.json"), "documents": ["README.md", "slides.md"], "include_matches": True}))
    by = {(f["file"], f["text"]): f["category"] for f in out["findings"] if f["text"] in ("0.82", "0.85")}
    assert by == {("README.md", "0.82"): "match", ("slides.md", "0.85"): "stale"}


async def test_a_single_seed_points_at_its_capsule_and_gets_a_disclosure(client, env, box, tmp_path) -> None:
    project, (run,) = await sealed_capsules(client, env, tmp_path, [2])
    (project / "EVIDENCE.json").write_text(json.dumps({"claims": [
        {"id": "C0", "metric": "loss", "evidence": [{"value": 0.3}]}]}))
    plan = _propose(env, project, [run])
    row = plan.row
    assert row["results_json"] == f"runs/{run}/test/main/metrics.json" and row["run_id"] == run == row["run"]
    record = json.loads((project / "runs" / run / "run.json").read_text())
    assert row["results_sha256"] == record["files"]["test/main/metrics.json"]["sha256"]
    assert (row["value"], row["variance"]) == (0.82, None) and plan.group_file is None
    assert plan.disclosure and plan.disclosure.startswith("single seed:")
    assert [op["path"] for op in plan.diff] == ["/claims/1"]
    _apply(env, project, plan.token)
    assert json.loads((project / "EVIDENCE.json").read_text())["claims"][1]["disclosure"] == plan.disclosure


async def test_a_replayed_token_is_refused(client, env, box, tmp_path) -> None:
    project, runs = await sealed_capsules(client, env, tmp_path, [1])
    plan = _propose(env, project, runs)
    _apply(env, project, plan.token)
    written = (project / "EVIDENCE.json").read_bytes()
    with pytest.raises(GateRefused) as err:
        _apply(env, project, plan.token)
    assert "already used" in err.value.message and (project / "EVIDENCE.json").read_bytes() == written


async def test_evidence_edited_between_plan_and_apply_is_refused(client, env, box, tmp_path) -> None:
    project, runs = await sealed_capsules(client, env, tmp_path, [1])
    (project / "EVIDENCE.json").write_text('{"claims": []}\n')
    plan = _propose(env, project, runs)
    (project / "EVIDENCE.json").write_text('{"claims": [], "project": "edited"}\n')
    with pytest.raises(GateRefused) as err:
        _apply(env, project, plan.token)
    assert "changed since the plan" in err.value.message and "propose again" in (err.value.next_step or "")
    assert json.loads((project / "EVIDENCE.json").read_text())["project"] == "edited"


async def test_a_tampered_capsule_is_refused_by_propose_and_by_apply(client, env, box, tmp_path) -> None:
    project, (run,) = await sealed_capsules(client, env, tmp_path, [1])
    plan = _propose(env, project, [run])
    train = project / "runs" / run / "train.csv"
    os.chmod(train, 0o644)
    train.write_text("epoch,loss\n0,0.01\n")
    with pytest.raises(GateRefused) as err:
        _apply(env, project, plan.token)
    assert "changed after it was sealed (train.csv)" in err.value.message and err.value.expected != err.value.observed
    assert not (project / "EVIDENCE.json").exists()
    with pytest.raises(GateRefused):
        _propose(env, project, [run])
