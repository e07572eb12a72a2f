"""The run directory's record (run.json): read and validated in one place, with a clear error,
through the tool that reads it, when it is missing, not JSON, or not a run record."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.local import LocalHost
from mcp_server.run.jobs.rundir import RunRecordSummary, declared_outputs, read_run_record
from tests.conftest import error_text, structured

RUN_ID = "train-20260101-000000-abcdef"


@pytest.fixture
def durable(env, tmp_path: Path) -> Path:
    root = tmp_path / "durable"
    root.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(root)}})
    return root


def write_record(durable: Path, text: str, run_id: str = RUN_ID) -> Path:
    run_dir = durable / ".rgt" / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(text)
    return run_dir / "run.json"


async def verify_by_run_id(client) -> str:
    return error_text(await client.call_tool("verify_artifacts", {"host": "gpu1", "run_id": RUN_ID}))


async def test_a_corrupt_run_json_is_a_clear_error_naming_the_file(durable: Path, client) -> None:
    path = write_record(durable, '{"run_id": "train-1", "command": ')  # cut off mid-write
    text = await verify_by_run_id(client)
    assert "run.json of run " + RUN_ID + " is not valid JSON" in text
    assert str(path) in text


async def test_a_run_json_of_the_wrong_shape_names_the_fields(durable: Path, client) -> None:
    write_record(durable, json.dumps({"run_id": RUN_ID, "started_at": "yesterday"}))
    text = await verify_by_run_id(client)
    assert "is not a run record" in text
    assert "started_at" in text and "command" in text


async def test_a_missing_run_is_not_found_with_the_path_it_looked_at(durable: Path, client) -> None:
    text = await verify_by_run_id(client)
    assert f"no run {RUN_ID} on this box" in text and "run.json does not exist" in text


async def test_a_run_without_declared_outputs_asks_for_root_and_roster(durable: Path, client) -> None:
    launched = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true", "probe_s": 20}))
    run_id = launched["outcomes"][0]["launch"]["run_id"]
    text = error_text(await client.call_tool("verify_artifacts", {"host": "gpu1", "run_id": run_id}))
    assert f"run {run_id} declared no outputs" in text


async def test_the_record_a_launch_wrote_reads_back_with_its_outputs(durable: Path, client) -> None:
    launched = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "true", "probe_s": 20, "outputs": ["best.pth"], "output_root": str(durable)}))
    run_id = launched["outcomes"][0]["launch"]["run_id"]
    host = LocalHost()
    record = await read_run_record(host, str(durable), run_id)
    assert record.run_id == run_id and record.backend == "shell" and record.command == "true"
    outputs = await declared_outputs(host, str(durable), run_id)
    assert (outputs.root, outputs.patterns) == (str(durable), ["best.pth"])


async def test_reading_a_record_checks_the_run_id(durable: Path) -> None:
    with pytest.raises(InputError, match="not a valid run id"):
        await read_run_record(LocalHost(), str(durable), "../etc")
    with pytest.raises(NotFoundError):
        await read_run_record(LocalHost(), str(durable), RUN_ID)


def b64(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def test_a_summary_keeps_the_fields_it_can_read_and_drops_the_wrong_ones() -> None:
    summary = RunRecordSummary.from_base64(b64({"name": "a", "started_at": "soon", "secret_env_names": ["K"]}))
    assert (summary.name, summary.started_at, summary.secret_env_names) == ("a", None, ["K"])
    assert RunRecordSummary.from_base64("not base64!") == RunRecordSummary()
    assert RunRecordSummary.from_base64(b64([1, 2])) == RunRecordSummary()
    assert RunRecordSummary.from_base64("") == RunRecordSummary()
