"""A run launched in a push_code snapshot works in its own dir (<run dir>/work, the snapshot's
entries linked in): `python3 train.py`, an import of a sibling module and a relative read of
data/ work as if it ran in the snapshot, what it writes lands in the reported output_dir, the
snapshot keeps its exact bytes, and verify_artifacts of the run finds the outputs. A plain
workdir is still the working directory. Through the real MCP client, here and over the sshd."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until

TRAIN = """\
import json, os, sibling
os.makedirs("out", exist_ok=True)
with open("data/x.txt") as f:
    x = f.read().strip()
with open("out/result.json", "w") as f:
    json.dump({"x": x, "value": sibling.VALUE, "cwd": os.getcwd(),
               "code": os.environ.get("RGT_CODE_DIR"), "output": os.environ.get("RGT_OUTPUT_DIR")}, f)
with open("logs/run.txt", "w") as f:
    f.write("a log the project keeps in its placeholder folder")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A tiny project (no git): a script, the module it imports, data it reads by a relative path,
    and an empty logs/ folder kept by a placeholder, where it writes."""
    root = tmp_path / "tiny"
    (root / "data").mkdir(parents=True)
    (root / "logs").mkdir()
    (root / "train.py").write_text(TRAIN)
    (root / "sibling.py").write_text("VALUE = 42\n")
    (root / "data/x.txt").write_text("from the snapshot\n")
    (root / "logs/.gitkeep").write_text("")
    return root


def snapshot_state(d: Path) -> dict[str, str]:
    """Every entry under the snapshot, folders included: file hashes and modes."""
    out = {}
    for p in sorted(d.rglob("*")):
        rel = p.relative_to(d).as_posix()
        if p.is_symlink():
            out[rel] = "link " + os.readlink(p)
        elif p.is_dir():
            out[rel] = f"dir {p.stat().st_mode:o}"
        else:
            out[rel] = f"{hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_mode:o}"
    return out


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool(tool, {"host": "gpu1", **args}))


async def launch(client: Any, **args: Any) -> dict[str, Any]:
    (outcome,) = (await call(client, "launch_detached", probe_s=0, **args))["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


async def ended(client: Any, run_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        t = await call(client, "tail_logs", run_id=run_id)
        return t if t["state"]["status"] not in ("running", "queued") else None

    t = await until(done, timeout=30, interval=0.2, what=f"run {run_id} to end")
    assert t["state"]["status"] == "succeeded", t["text"]
    return t


async def verified(client: Any, **args: Any) -> dict[str, Any]:
    out = await call(client, "verify_artifacts", budget_s=30, **args)
    while not out["done"]:
        out = await call(client, "verify_artifacts", budget_s=30, **args)
    return out


async def pushed(client: Any, project: Path, durable: Path) -> tuple[str, Path]:
    r = await call(client, "push_code", source=str(project))
    return f"{r['project']}/{r['snapshot_id']}", durable / "code" / r["project"] / r["snapshot_id"]


async def test_a_snapshot_run_writes_in_its_own_dir_and_the_snapshot_keeps_its_bytes(
        client: Any, durable_box: Box, project: Path) -> None:
    code, snap = await pushed(client, project, durable_box.durable)
    before = snapshot_state(snap)
    run = await launch(client, command="python3 train.py", code=code, outputs=["out/result.json", "logs/run.txt"])
    await ended(client, run["run_id"])

    assert snapshot_state(snap) == before, "the sealed snapshot gained or changed nothing"
    out = Path(run["output_dir"])
    assert out == Path(run["run_dir"]) / "work"
    result = json.loads((out / "out/result.json").read_text())
    assert result == {"x": "from the snapshot", "value": 42, "cwd": str(out), "code": str(snap.resolve()),
                      "output": str(out)}, "the import, the relative read and the job's environment all hold"
    assert not (out / "logs").is_symlink() and (out / "logs/run.txt").is_file(), "a placeholder folder is the run's own"
    assert (out / "train.py").is_symlink() and os.readlink(out / "train.py") == str(snap.resolve() / "train.py")
    assert not (out / ".rgt").exists(), "the snapshot's own bookkeeping is not linked in"
    record = json.loads((Path(run["run_dir"]) / "run.json").read_text())
    assert record["output_dir"] == str(out) and record["workdir"] == str(snap.resolve())
    assert record["outputs"]["root"] == str(out)

    v = await verified(client, run_id=run["run_id"])
    assert v["passed"] and v["root"] == str(out), v["findings"]
    assert json.loads((Path(v["dest"]) / "out/result.json").read_text())["value"] == 42


async def test_a_plain_workdir_is_still_where_the_run_writes(client: Any, durable_box: Box, project: Path) -> None:
    run = await launch(client, command="python3 train.py", workdir=str(project), outputs=["out/result.json"])
    await ended(client, run["run_id"])
    assert run["output_dir"] == str(project)
    result = json.loads((project / "out/result.json").read_text())
    assert result["cwd"] == result["code"] == result["output"] == str(project)
    assert (project / "logs/run.txt").is_file() and not (Path(run["run_dir"]) / "work").exists()
    assert (project / "__pycache__").is_dir(), "Python's own bytecode cache, as before"


async def test_a_rerun_of_a_snapshot_run_gets_its_own_output_dir(client: Any, durable_box: Box,
                                                                 project: Path) -> None:
    code, snap = await pushed(client, project, durable_box.durable)
    first = await launch(client, command="python3 train.py", code=code, outputs=["out/result.json"])
    await ended(client, first["run_id"])
    again = await launch(client, rerun_of=first["run_id"])
    await ended(client, again["run_id"])
    assert again["output_dir"] == str(Path(again["run_dir"]) / "work") != first["output_dir"]
    record = json.loads((Path(again["run_dir"]) / "run.json").read_text())
    assert record["outputs"]["root"] == again["output_dir"] and record["code_snapshot"] == snap.name
