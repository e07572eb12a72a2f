"""cancel_run through a real MCP client, on LocalHost and over the test sshd, for every engine:
the process group stops, the run reads `cancelled` everywhere (never failed or lost), who/when/
why are recorded in the run dir and the ledger, and an ended run is left untouched."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from mcp_server.ledger import Ledger
from mcp_server.settings import Settings
from tests.conftest import error_text, structured
from tests.run.jobs.conftest import Box, group_alive
from tests.support.wait import until, until_sync


async def launch(client, **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "probe_s": 0, **args}))
    if res.get("queue"):
        return res["queue"]
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


async def cancel(client, run_id: str, **args) -> dict:
    return structured(await client.call_tool("cancel_run", {"host": "gpu1", "run_id": run_id, **args}))


async def status(client, run_id: str) -> dict:
    tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run_id}))
    return tail["state"]


def pid_of(run_dir: Path) -> int:
    return int(until_sync(lambda: (run_dir / "pid").is_file() and (run_dir / "pid").read_text().strip(),
                          what="the wrapper's pid"))


async def listed_status(client, run_id: str) -> str:
    res = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    (row,) = [r for r in res["outcomes"][0]["runs"]["runs"] if r["run_id"] == run_id]
    return str(row["status"])


@pytest.mark.parametrize("backend", ["shell", "tmux"])
async def test_cancel_stops_the_group_and_the_run_reads_cancelled_everywhere(durable_box: Box, client,
                                                                              backend: str) -> None:
    run = await launch(client, command="sleep 300 & sleep 300; wait", backend=backend)
    run_dir = Path(run["run_dir"])
    pgid = pid_of(run_dir)
    result = await cancel(client, run["run_id"], reason="diverging at step 900", grace_s=1)
    assert result["changed"] and result["status_before"] == "running"
    assert result["state"]["status"] == "cancelled" and result["state"]["exit_code"] == 143  # the TERM, recorded
    await until(lambda: not group_alive(pgid), what="the run's process group to be gone")
    record = json.loads((run_dir / "cancelled").read_text())
    assert record["reason"] == "diverging at step 900" and record["run_id"] == run["run_id"]
    assert "via" in record["by"] and record["at"] > 0 and not (run_dir / "cancelled.tmp").exists()
    assert (await status(client, run["run_id"]))["status"] == "cancelled"
    assert await listed_status(client, run["run_id"]) == "cancelled"
    ledger = Ledger.open(Settings.from_env().ledger_path, None)
    events = ledger.events("cancel", run_id=run["run_id"])
    ledger.close()
    assert [e.data["reason"] for e in events] == ["diverging at step 900"]


async def test_cancelling_an_ended_run_says_so_and_changes_nothing(durable_box: Box, client) -> None:
    run = await launch(client, command="exit 3")
    run_dir = Path(run["run_dir"])
    until_sync(lambda: (run_dir / "exit_code").is_file(), what="the run to end")
    result = await cancel(client, run["run_id"])
    assert not result["changed"] and result["state"]["status"] == "failed" and result["state"]["exit_code"] == 3
    assert "already ended" in result["message"] and result["record"] is None
    assert not (run_dir / "cancelled").exists()
    assert (await status(client, run["run_id"]))["status"] == "failed"


async def test_cancel_is_idempotent_the_second_call_changes_nothing(durable_box: Box, client) -> None:
    run = await launch(client, command="sleep 300")
    pid_of(Path(run["run_dir"]))
    assert (await cancel(client, run["run_id"], grace_s=1))["changed"]
    marker = Path(run["run_dir"]) / "cancelled"
    written = marker.read_bytes()
    again = await cancel(client, run["run_id"])
    assert not again["changed"] and again["state"]["status"] == "cancelled" and marker.read_bytes() == written


async def test_signal_first_lets_the_job_checkpoint_and_its_exit_code_is_kept(durable_box: Box, client) -> None:
    ckpt = durable_box.work / "ckpt"
    command = f"trap 'echo saved > {ckpt}; exit 0' USR1; sleep 300 & wait"
    run = await launch(client, command=command, workdir=str(durable_box.work))
    pid_of(Path(run["run_dir"]))
    result = await cancel(client, run["run_id"], signal_first="USR1", grace_s=5)
    assert ckpt.read_text() == "saved\n"
    assert result["state"]["status"] == "cancelled" and result["state"]["exit_code"] == 0
    assert result["record"]["signal_first"] == "USR1"


async def test_a_cancelled_queue_cell_never_starts(durable_box: Box, client) -> None:
    queue = await launch(client, commands=["sleep 300", "touch started-2"], max_concurrent=1,
                         workdir=str(durable_box.work))
    first, second = (r["run_id"] for r in queue["runs"])
    assert (await cancel(client, second))["state"]["status"] == "cancelled"
    pid_of(durable_box.durable / ".rgt" / "runs" / first)
    assert (await cancel(client, first, grace_s=1))["state"]["status"] == "cancelled"
    queue_dir = Path(queue["queue_dir"])
    until_sync(lambda: (queue_dir / "exit_code").is_file(), timeout=15, what="the queue runner to finish")
    assert not (durable_box.work / "started-2").exists()
    assert (await status(client, second))["status"] == "cancelled"


async def test_a_signal_that_is_not_offered_is_refused_before_anything_runs(durable_box: Box, client) -> None:
    run = await launch(client, command="sleep 300")
    pgid = pid_of(Path(run["run_dir"]))
    res = await client.call_tool("cancel_run", {"host": "gpu1", "run_id": run["run_id"], "signal_first": "KILL"})
    assert "signal_first" in error_text(res)
    assert group_alive(pgid) and not (Path(run["run_dir"]) / "cancelled").exists()
    os.killpg(pgid, signal.SIGKILL)
