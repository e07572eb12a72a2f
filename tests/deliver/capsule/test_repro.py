"""repro.sh and the reproduction service: a tiny real run of the demo's train_tiny.py laid out as
a capsule by the contract, re-evaluated by the capsule's own evaluate.command into a fresh
temporary dir; reproduced, a planted change to the evaluation code found, bad inputs refused
(exit 2), the capsule's bytes never touched, and the same through a detached run on `local`."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mcp_server.app import App
from mcp_server.deliver.capsule import repro
from mcp_server.deliver.capsule.repro import read_reproduction, start_reproduction, write_repro
from mcp_server.paths.refusal import PathRefused
from mcp_server.run.jobs.rundir import read_run_record
from mcp_server.run.jobs.wait import wait_for_run
from mcp_server.settings import Settings
from tests.tools.conftest import local_box

__all__ = ["local_box"]

TRAIN_TINY = Path(repro.__file__).resolve().parents[2] / "demo" / "train_tiny.py"
ONBOX = Path(repro.__file__).with_name("repro_onbox.py")
TEST_ID = "blobs-test"
PLANT = ("right += (p >= 0.5)", "right += (p >= 0.7)")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real training run of train_tiny.py (seed 1): weights, final.json, metrics.jsonl."""
    out = tmp_path_factory.mktemp("tiny") / "out"
    subprocess.run([sys.executable, str(TRAIN_TINY), "--seed", "1", "--out", str(out), "--steps", "20",
                    "--pace", "0"], check=True, capture_output=True, timeout=60)
    return out


def sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def lay_capsule(project: Path, run: Path, *, run_id: str = "tiny-s1", script: Path = TRAIN_TINY,
                evaluate: Any = "default", box_run_id: str | None = None) -> Path:
    """The run's outputs as a capsule by the shared contract (what seal writes, made by hand here)."""
    c = project / "runs" / run_id
    test = c / "test" / TEST_ID
    (test / "vis" / "default" / "pred").mkdir(parents=True)
    shutil.copyfile(run / "weights.safetensors", c / "best.pth")
    (c / "config.yaml").write_text("seed: 1\nsteps: 20\nlr: 0.2\n")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (c / "train.csv").write_text("step,loss,acc\n" + "".join(f"{r['step']},{r['loss']},{r['acc']}\n" for r in rows))
    shutil.copyfile(run / "final.json", test / "metrics.json")
    pq.write_table(pa.table({"sample": [0, 1], "label": [0, 1]}), test / "results.parquet")
    (test / "vis" / "default" / "pred" / "0000.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    files = {p.relative_to(c).as_posix(): {"sha256": sha(p), "bytes": p.stat().st_size, "from": p.name}
             for p in sorted(c.rglob("*")) if p.is_file()}
    if evaluate == "default":
        evaluate = {"command": [sys.executable, str(script), "--eval", "{checkpoint}", "--config", "{config}",
                                "--out", "{out}"], "tolerance": {}}
    (c / "run.json").write_text(json.dumps({
        "schema": "remote-gpu-trainer/capsule/v1", "run_id": run_id, "sealed_at": "2026-01-01T00:00:00+00:00",
        "source": {"host": "gpu1", "box_run_id": box_run_id, "pull_verified": None, "pull_verified_sha256": None},
        "provenance": {"command": "train_tiny.py --seed 1", "code_snapshot": None, "git_commit": None,
                       "git_dirty": None, "env_lock": None, "hardware": None, "seed": 1, "box": None, "engine": None},
        "files": files, "tests": [TEST_ID], "evaluate": evaluate}))
    return c


def planted(tmp_path: Path) -> Path:
    """train_tiny.py with its evaluation altered (a higher decision threshold): the accuracy changes."""
    text = TRAIN_TINY.read_text()
    assert PLANT[0] in text
    copy = tmp_path / "train_tiny_planted.py"
    copy.write_text(text.replace(*PLANT))
    return copy


def run_repro(project: Path, target: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    script = write_repro(project)
    res = subprocess.run(["bash", str(script), str(target), str(out)], capture_output=True, text=True, timeout=120,
                         cwd=project, env={**os.environ, "RGT_REPRO_PYTHON": sys.executable})
    return res, json.loads((out / "repro_report.json").read_text())


def metric(report: dict[str, Any], name: str) -> dict[str, Any]:
    (test,) = report["capsules"][0]["tests"]
    return next(m for m in test["metrics"] if m["metric"] == name)


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha(p) if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


def test_repro_sh_reproduces_the_tiny_runs_metric(tmp_path: Path, tiny_run: Path) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run)
    res, report = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert report["outcome"] == "reproduced" and report["exit_code"] == 0
    acc = metric(report, "accuracy")
    sealed = json.loads((capsule / "test" / TEST_ID / "metrics.json").read_text())["accuracy"]
    assert acc["outcome"] == "reproduced" and acc["sealed"] == acc["fresh"] == sealed
    assert acc["tolerance"] == {"abs": 1e-6, "rel": 1e-6, "source": "default"}
    assert report["capsules"][0]["untouched"] is True


def test_a_runs_dir_reproduces_every_capsule_in_it(tmp_path: Path, tiny_run: Path) -> None:
    project = tmp_path / "project"
    lay_capsule(project, tiny_run, run_id="tiny-a")
    lay_capsule(project, tiny_run, run_id="tiny-b")
    res, report = run_repro(project, project / "runs", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert [c["run_id"] for c in report["capsules"]] == ["tiny-a", "tiny-b"]


def test_a_planted_change_to_the_evaluation_code_is_reported_as_a_difference(tmp_path: Path, tiny_run: Path) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run, script=planted(tmp_path))
    res, report = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == 1, res.stderr
    assert report["outcome"] == "differs"
    acc = metric(report, "accuracy")
    assert acc["outcome"] == "differs" and acc["fresh"] != acc["sealed"]
    assert acc["abs_diff"] == pytest.approx(abs(acc["fresh"] - acc["sealed"]))
    assert acc["rel_diff"] == pytest.approx(acc["abs_diff"] / acc["sealed"])
    assert metric(report, "loss")["outcome"] == "reproduced"  # the threshold moves the accuracy only


def test_a_tolerance_in_run_json_is_used_and_named(tmp_path: Path, tiny_run: Path) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run, evaluate={
        "command": [sys.executable, str(planted(tmp_path)), "--eval", "{checkpoint}", "--config", "{config}",
                    "--out", "{out}"], "tolerance": {"accuracy": 0.5}})
    res, report = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    acc = metric(report, "accuracy")
    assert acc["outcome"] == "reproduced" and acc["abs_diff"] > 0
    assert acc["tolerance"] == {"abs": 0.5, "rel": 0.0, "source": "run.json evaluate.tolerance"}


@pytest.mark.parametrize(("evaluate", "why"), [
    (None, "records no evaluate command"),
    ({"command": [sys.executable, "-c", "raise SystemExit(3)"], "tolerance": {}}, "the evaluation exited 3"),
    ({"command": [sys.executable, "-c", "pass"], "tolerance": {}}, "wrote no readable metrics.json"),
])
def test_an_evaluation_that_cannot_run_is_reported_with_its_reason(tmp_path: Path, tiny_run: Path, evaluate: Any,
                                                                   why: str) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run, evaluate=evaluate)
    res, report = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == 1, res.stderr
    assert report["outcome"] == "could_not_run"
    assert metric(report, "accuracy")["outcome"] == "could_not_run"
    assert why in metric(report, "accuracy")["why"]


def test_an_evaluation_that_writes_into_the_capsule_is_caught(tmp_path: Path, tiny_run: Path) -> None:
    stray = "import pathlib, sys; pathlib.Path(sys.argv[1]).with_name('stray.txt').write_text('x')"
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run, evaluate={"command": [sys.executable, "-c", stray, "{config}"]})
    res, report = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == 1, res.stderr
    assert report["outcome"] == "differs" and report["capsules"][0]["untouched"] is False
    assert "changed while it was reproduced" in report["problems"][0]


@pytest.mark.parametrize(("pins", "status", "detail"), [
    (f"pyarrow=={pa.__version__}\n", "matches", "all 1 pinned packages match"),
    (f"pyarrow=={pa.__version__}\nno-such-package-rgt==1.0\n", "differs", "no-such-package-rgt==1.0 (here: absent)"),
])
def test_the_env_finding_says_whether_this_python_matches_the_lock(tmp_path: Path, tiny_run: Path, pins: str,
                                                                   status: str, detail: str) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run)
    (capsule / "requirements.lock").write_text(pins)
    run = json.loads((capsule / "run.json").read_text())
    run["provenance"]["env_lock"] = {"path": "requirements.lock", "sha256": sha(capsule / "requirements.lock")}
    run["files"]["requirements.lock"] = {"sha256": sha(capsule / "requirements.lock"), "bytes": len(pins), "from": ""}
    (capsule / "run.json").write_text(json.dumps(run))
    res, report = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == 0, res.stderr  # a finding, never a block
    env = report["capsules"][0]["env"]
    assert env["status"] == status and detail in env["detail"]


def _remove(rel: str) -> Any:
    def act(c: Path) -> None:
        target = c / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    return act


BAD_INPUTS = {
    "no capsule": (lambda c: shutil.rmtree(c), "no capsule"),
    "missing run.json": (_remove("run.json"), "missing root file run.json"),
    "missing config.yaml": (_remove("config.yaml"), "missing root file config.yaml"),
    "missing train.csv": (_remove("train.csv"), "missing root file train.csv"),
    "missing best.pth": (_remove("best.pth"), "missing root file best.pth"),
    "a latest.pth": (lambda c: (c / "latest.pth").write_bytes(b"x"), "latest.pth"),
    "no test dir": (_remove("test"), "no test/ dir"),
    "a test without metrics.json": (_remove(f"test/{TEST_ID}/metrics.json"), "has no metrics.json"),
    "a test without results.parquet": (_remove(f"test/{TEST_ID}/results.parquet"), "has no results.parquet"),
    "a test without vis": (_remove(f"test/{TEST_ID}/vis"), "has no vis/ dir"),
    "a sealed file changed": (lambda c: (c / "config.yaml").write_text("seed: 2\n"), "does not hold the bytes"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_bad_input_exits_2_with_the_reason(tmp_path: Path, tiny_run: Path, case: str) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run)
    spoil, reason = BAD_INPUTS[case]
    spoil(capsule)
    res, report = run_repro(project, project / "runs", tmp_path / "out")
    assert res.returncode == 2
    assert reason in res.stderr
    assert report["outcome"] == "bad_input" and any(reason in p for p in report["problems"])


@pytest.mark.parametrize("plant", [False, True], ids=["reproduced", "differs"])
def test_the_capsules_bytes_are_unchanged_by_a_reproduction(tmp_path: Path, tiny_run: Path, plant: bool) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run, script=planted(tmp_path) if plant else TRAIN_TINY)
    before = tree_digest(capsule)
    res, _ = run_repro(project, capsule, tmp_path / "out")
    assert res.returncode == (1 if plant else 0), res.stderr
    assert tree_digest(capsule) == before


def test_write_repro_puts_an_executable_repro_sh_beside_the_capsules(tmp_path: Path, tiny_run: Path) -> None:
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run)
    before = tree_digest(capsule)
    script = write_repro(project)
    assert script == (project / "repro.sh").resolve()
    assert os.access(script, os.X_OK) and script.read_bytes() == repro.sources()["repro.sh"]
    assert (project / "repro_onbox.py").read_bytes() == ONBOX.read_bytes()
    assert tree_digest(capsule) == before
    assert sorted(p.name for p in project.iterdir()) == ["repro.sh", "repro_onbox.py", "runs"]  # no temp left


def test_write_repro_refuses_a_project_outside_the_pull_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_PULL_ROOTS", str(tmp_path / "elsewhere"))
    with pytest.raises(PathRefused):
        write_repro(tmp_path / "project")
    assert not (tmp_path / "project").exists()


def test_the_on_box_helper_parses_as_python_3_8() -> None:
    ast.parse(ONBOX.read_text(), feature_version=(3, 8))


async def _reproduce(capsule: Path, timeout_s: float = 90) -> tuple[Any, Any, Any]:
    app = App(Settings.from_env())
    try:
        spec = app.pool.spec("gpu1")
        host = await app.pool.host(spec)
        started = await start_reproduction(host, spec, capsule, ledger=app.ledger, redactor=app.redactor)
        waited = await wait_for_run(host, spec, started.run_id, redactor=app.redactor, timeout_s=timeout_s,
                                    poll_s=0.2)
        assert waited.ended, waited.message
        report = await read_reproduction(host, spec, started.run_id)
        record = await read_run_record(host, spec.durable_root, started.run_id)
        return started, report, record
    finally:
        await app.close()


async def test_a_detached_reproduction_on_local_gives_per_metric_verdicts(local_box: Path, tmp_path: Path,
                                                                          tiny_run: Path) -> None:
    capsule = lay_capsule(tmp_path / "project", tiny_run, script=planted(tmp_path), box_run_id="train-20260101-1")
    before = tree_digest(capsule)
    started, report, record = await _reproduce(capsule)
    assert report.status == "ended" and report.outcome == "differs"
    acc = next(v for v in report.verdicts if v.metric == "accuracy")
    assert acc.outcome == "differs" and acc.capsule == "tiny-s1" and acc.test == TEST_ID
    assert acc.says.startswith(f"accuracy differs by {acc.abs_diff:.6g} absolute")
    assert "tolerance 1e-06 abs + 1e-06 rel (default)" in acc.says
    assert next(v for v in report.verdicts if v.metric == "loss").outcome == "reproduced"
    assert started.rerun_of == record.rerun_of == "train-20260101-1"
    assert started.capsule == str(capsule) and started.snapshot is None  # local: read in place
    assert tree_digest(capsule) == before


async def test_a_detached_run_that_ends_without_a_report_could_not_run(local_box: Path, tmp_path: Path,
                                                                       tiny_run: Path) -> None:
    # The evaluation kills repro.sh itself (SIGKILL to its parent): the run ends before any report.
    capsule = lay_capsule(tmp_path / "project", tiny_run, evaluate={
        "command": ["sh", "-c", "kill -9 $PPID"], "tolerance": {}})
    _, report, _ = await _reproduce(capsule)
    assert report.status == "ended" and report.outcome == "could_not_run" and report.verdicts == []
    assert "before a report was read: it wrote no report" in report.problems[0]
    assert "exit code 137" in report.problems[0]


async def test_a_reproduction_over_ssh_carries_the_capsule_as_a_sealed_snapshot(box: Any, env: Any, tmp_path: Path,
                                                                                tiny_run: Path) -> None:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(durable)}})
    project = tmp_path / "project"
    capsule = lay_capsule(project, tiny_run)
    (project / ".gitignore").write_text("*.pth\n")  # what many projects ignore: the capsule still goes whole
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    started, report, _ = await _reproduce(capsule)
    assert report.outcome == "reproduced", report.problems
    assert {v.outcome for v in report.verdicts} == {"reproduced"}
    assert started.snapshot is not None and started.snapshot.startswith("capsule-tiny-s1/")
    assert started.capsule.startswith(f"{durable}/code/capsule-tiny-s1/")
    assert (Path(started.capsule) / "best.pth").read_bytes() == (capsule / "best.pth").read_bytes()
