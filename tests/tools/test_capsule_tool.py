"""The capsule tool through the real MCP client, end to end: tiny runs on the test sshd pulled by
verify_artifacts, sealed into capsules, two seeds proposed as one evidence row and applied with the
plan's token, then reconcile_evidence on a small paper with one correct and one stale number; a
capsule reproduced on `local` as a detached run and its report read; a tracker store read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import error_text, structured
from tests.deliver.capsule.sealed_runs import verified_pulls

EVAL = """\
import argparse, json, pathlib
ap = argparse.ArgumentParser()
ap.add_argument("--config"); ap.add_argument("--out")
a = ap.parse_args()
seed = int(pathlib.Path(a.config).read_text().split("seed:")[1].split()[0])
pathlib.Path(a.out, "metrics.json").write_text(json.dumps(
    {"accuracy": round(0.80 + 0.02 * (seed - 1), 4), "split": "test", "n": 400, "seed": seed}))
"""


async def call(client: Any, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("capsule", args))


async def test_pull_to_capsule_to_evidence_to_reconcile(client: Any, env: Any, box: Any, tmp_path: Path) -> None:
    pulls = await verified_pulls(client, env, tmp_path, [1, 2])
    project = tmp_path / "project"
    sealed = [(await call(client, action="seal", project=str(project), path=str(p)))["sealed"] for p in pulls]
    run_ids = [s["run_id"] for s in sealed]
    assert all((project / "runs" / r / "run.json").is_file() for r in run_ids)

    plan = (await call(client, action="propose", project=str(project), run_ids=run_ids,
                       row={"claim": "C1", "metric": "accuracy", "aliases": ["Ours"]}))["plan"]
    assert plan["row"]["value"] == 0.81 and plan["row"]["variance"]["seeds"] == 2
    assert not (project / "EVIDENCE.json").exists(), "a proposal writes nothing"
    applied = (await call(client, action="apply", project=str(project), token=plan["token"]))["applied"]
    assert Path(applied["evidence_path"]) == project / "EVIDENCE.json"
    replay = error_text(await client.call_tool("capsule", {"action": "apply", "project": str(project),
                                                          "token": plan["token"]}))
    assert "already used" in replay

    (project / "paper.md").write_text("Ours reaches an accuracy of 0.81 on the test set.\n")
    (project / "slides.md").write_text("Ours: accuracy 0.84\n")
    report = structured(await client.call_tool("reconcile_evidence", {
        "evidence": str(project / "EVIDENCE.json"), "documents": [str(project / "paper.md"),
                                                                 str(project / "slides.md")]}))
    kinds = {(Path(f["file"]).name, f["category"]) for f in report["findings"] if f.get("file")}
    assert ("slides.md", "stale") in kinds and ("paper.md", "stale") not in kinds


async def test_a_capsule_is_reproduced_on_a_box_and_its_report_read(client: Any, env: Any, box: Any,
                                                                   tmp_path: Path) -> None:
    (pull,) = await verified_pulls(client, env, tmp_path, [2])
    evaluator = tmp_path / "eval_seed.py"
    evaluator.write_text(EVAL)
    project = tmp_path / "project"
    sealed = (await call(client, action="seal", project=str(project), path=str(pull), evaluate={
        "command": [sys.executable, str(evaluator), "--config", "{config}", "--out", "{out}"]}))["sealed"]
    started = (await call(client, action="reproduce", project=str(project), run_ids=[sealed["run_id"]]))["started"]
    waited = structured(await client.call_tool("wait_for_run", {"run_id": started["run_id"], "timeout_s": 30}))
    assert waited["ended"], waited
    report = (await call(client, action="report", run_ids=[started["run_id"]]))["report"]
    assert report["outcome"] == "reproduced"
    assert {v["metric"]: v["outcome"] for v in report["verdicts"]}["accuracy"] == "reproduced"


async def test_an_action_without_what_it_needs_names_the_argument(client: Any, tmp_path: Path) -> None:
    text = error_text(await client.call_tool("capsule", {"action": "propose", "project": str(tmp_path)}))
    assert "[BAD_INPUT] action propose needs `row`" in text and "call capsule again with row" in text


async def test_a_tracker_store_is_read_and_held_against_the_jobs(client: Any, tmp_path: Path, env: Any) -> None:
    store = tmp_path / "mlflow.db"
    writer = tmp_path / "log_run.py"  # written by mlflow itself, in a process of its own
    writer.write_text(f"""import mlflow
mlflow.set_tracking_uri("sqlite:///{store}")
with mlflow.start_run(run_name="seed1"):
    mlflow.set_tag("rgt_run_id", "train-20990101-000000-abcdef")  # a run id no job of this server has
    mlflow.log_param("lr", 0.2)
    mlflow.log_metric("loss", 0.5)
""")
    subprocess.run([sys.executable, str(writer)], check=True, capture_output=True, timeout=120)
    result = (await call(client, action="trackers", path=str(store)))["trackers"]
    assert result["backend"] == "mlflow" and len(result["runs"]) == 1
    (run,) = result["runs"]
    assert run["rgt_run_id"] == "train-20990101-000000-abcdef" and run["config"]["lr"] in ("0.2", 0.2)
    assert [f["run"]["rgt_run_id"] for f in result["report"]["no_job"]] == ["train-20990101-000000-abcdef"]
    assert json.dumps(result)  # plain data
