"""A sweep in a push_code snapshot (`commands` with `code`): every cell works in its own
<cell run dir>/work, the snapshot's entries linked in, as a single launch does. What a cell writes
by relative path lands in its own output_dir (recorded in run.json, the ledger, the launch result
and list_runs), the sealed snapshot keeps its exact bytes, and verify_artifacts of a cell finds its
outputs, declared or named by the call's roster. The on-box queue here and over the sshd; a Slurm
job array on the real single-node Slurm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.run.jobs.test_slurm import login_node, login_sshd, slurm_cluster, sweep, until_status
from tests.run.jobs.test_snapshot_outputs import call, launch, pushed, snapshot_state, verified
from tests.support.wait import until

__all__ = ["login_node", "login_sshd", "slurm_cluster"]  # the Slurm fixtures, shared with test_slurm

CELL = """\
import json, os, sibling
os.makedirs("out", exist_ok=True)
with open("out/x.json", "w") as f:
    json.dump({"cell": os.environ["CELL"], "value": sibling.VALUE, "cwd": os.getcwd(),
               "code": os.environ.get("RGT_CODE_DIR"), "output": os.environ.get("RGT_OUTPUT_DIR"),
               "pycache": os.environ.get("PYTHONPYCACHEPREFIX")}, f)
with open("logs/cell.txt", "w") as f:
    f.write(os.environ["CELL"])
"""
COMMANDS = ["CELL=1 python3 cell.py", "CELL=2 python3 cell.py"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A tiny project: a cell script, the module it imports, and an empty logs/ placeholder folder."""
    root = tmp_path / "cells"
    (root / "logs").mkdir(parents=True)
    (root / "cell.py").write_text(CELL)
    (root / "sibling.py").write_text("VALUE = 7\n")
    (root / "logs/.gitkeep").write_text("")
    return root


async def queued(client: Any, **args: Any) -> dict[str, Any]:
    res = await call(client, "launch_detached", commands=COMMANDS, max_concurrent=2, probe_s=0, **args)
    return dict(res["queue"])


async def ended(client: Any, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each cell's list_runs row once all have ended."""
    async def all_ended() -> dict[str, dict[str, Any]] | None:
        res = await call(client, "list_runs")
        rows = {r["run_id"]: r for r in res["outcomes"][0]["runs"]["runs"] if r["run_id"] in run_ids}
        done = len(rows) == len(run_ids) and all(r["status"] not in ("running", "queued") for r in rows.values())
        return rows if done else None

    return await until(all_ended, timeout=30, interval=0.2, what=f"cells {run_ids} to end")


def check_cells(runs: list[dict[str, Any]], runs_dir: Path, snap: Path) -> None:
    """Each cell wrote in its own <run dir>/work, with the code and its dirs in the environment."""
    for cell, run in enumerate(runs, 1):
        out = runs_dir / run["run_id"] / "work"
        assert run["output_dir"] == str(out), "the launch result names the cell's own output dir"
        result = json.loads((out / "out/x.json").read_text())
        assert result == {"cell": str(cell), "value": 7, "cwd": str(out), "code": str(snap.resolve()),
                          "output": str(out), "pycache": str(out.parent / "pycache")}
        assert (out / "logs/cell.txt").read_text() == str(cell) and not (out / "logs").is_symlink()
        record = json.loads((out.parent / "run.json").read_text())
        assert record["output_dir"] == str(out) and record["workdir"] == str(snap.resolve())
        assert (out.parent / "workdir").read_text().strip() == str(out)


async def test_each_queued_cell_in_a_snapshot_writes_in_its_own_output_dir_and_the_snapshot_keeps_its_bytes(
        client: Any, durable_box: Box, project: Path) -> None:
    code, snap = await pushed(client, project, durable_box.durable)
    before = snapshot_state(snap)
    queue = await queued(client, code=code)
    ids = [r["run_id"] for r in queue["runs"]]
    rows = await ended(client, ids)
    assert [rows[i]["status"] for i in ids] == ["succeeded", "succeeded"], rows

    assert snapshot_state(snap) == before, "the sealed snapshot gained or changed nothing"
    runs_dir = durable_box.durable / ".rgt" / "runs"
    check_cells(queue["runs"], runs_dir, snap)
    assert [rows[i]["output_dir"] for i in ids] == [r["output_dir"] for r in queue["runs"]], "list_runs shows it"

    # No outputs were declared: a roster of the call's own is read at the cell's output_dir.
    v = await verified(client, run_id=ids[1], roster=["out/x.json"])
    assert v["passed"] and v["root"] == queue["runs"][1]["output_dir"], v["findings"]
    assert json.loads((Path(v["dest"]) / "out/x.json").read_text())["cell"] == "2"


async def test_a_queued_cell_that_declared_outputs_verifies_by_its_run_id(client: Any, durable_box: Box,
                                                                         project: Path) -> None:
    code, _ = await pushed(client, project, durable_box.durable)
    queue = await queued(client, code=code, outputs=["out/x.json"])
    ids = [r["run_id"] for r in queue["runs"]]
    await ended(client, ids)
    record = json.loads((durable_box.durable / ".rgt/runs" / ids[0] / "run.json").read_text())
    assert record["outputs"] == {"root": queue["runs"][0]["output_dir"], "patterns": ["out/x.json"]}
    v = await verified(client, run_id=ids[0])
    assert v["passed"] and v["root"] == queue["runs"][0]["output_dir"], v["findings"]


async def test_a_queue_in_a_plain_workdir_still_writes_there_with_its_dirs_in_the_environment(
        client: Any, durable_box: Box, project: Path) -> None:
    queue = await queued(client, workdir=str(project))
    ids = [r["run_id"] for r in queue["runs"]]
    await ended(client, ids)
    assert [r["output_dir"] for r in queue["runs"]] == [str(project)] * 2
    result = json.loads((project / "out/x.json").read_text())
    assert result["cwd"] == result["code"] == result["output"] == str(project) and result["pycache"] is None
    assert not any((durable_box.durable / ".rgt/runs" / i / "work").exists() for i in ids)


async def test_a_single_run_without_declared_outputs_verifies_a_given_roster_at_its_output_dir(
        client: Any, durable_box: Box, project: Path) -> None:
    code, _ = await pushed(client, project, durable_box.durable)
    run = await launch(client, command="CELL=9 python3 cell.py", code=code)

    async def done() -> bool:
        t = await call(client, "tail_logs", run_id=run["run_id"])
        return t["state"]["status"] == "succeeded"

    await until(done, timeout=30, interval=0.2, what="the run to succeed")
    v = await verified(client, run_id=run["run_id"], roster=["out/x.json"])
    assert v["passed"] and v["root"] == run["output_dir"], v["findings"]


async def test_a_slurm_array_in_a_snapshot_gives_each_task_its_own_output_dir(
        login_node: Path, client: Any, project: Path) -> None:
    r = structured(await client.call_tool("push_code", {"host": "cluster", "source": str(project)}))
    snap = login_node / "code" / r["project"] / r["snapshot_id"]
    before = snapshot_state(snap)
    queue = await sweep(client, COMMANDS, max_concurrent=2, code=f"{r['project']}/{r['snapshot_id']}",
                        outputs=["out/x.json"])
    assert queue["backend"] == "slurm"
    done = [await until_status(client, r["run_id"], {"succeeded", "failed", "lost", "cancelled"}, timeout=90)
            for r in queue["runs"]]
    assert [d["status"] for d in done] == ["succeeded"] * 2, done
    assert snapshot_state(snap) == before, "the sealed snapshot gained or changed nothing"
    check_cells(queue["runs"], login_node / ".rgt" / "runs", snap)
