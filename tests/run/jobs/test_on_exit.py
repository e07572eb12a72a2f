"""on_exit: a command the wrapper runs on the box after the run's result is recorded, for when
no server is running (a webhook, ntfy). Through the real MCP client, on LocalHost and over the
test sshd: it sees the run's state in its environment, secrets reach it only through the
environment (never argv or a file), and its failure never changes the recorded result."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until_sync

REPORT = 'printf "%s %s %s %s\\n" "$RGT_RUN_ID" "$RGT_STATE" "$RGT_EXIT_CODE" "${{#NOTIFY_TOKEN}}" >> {out}'


async def launch(client, **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "probe_s": 0, **args}))
    if res.get("queue"):
        return dict(res["queue"])
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return dict(outcome["launch"])


def lines_of(path: Path, n: int) -> list[str]:
    return until_sync(lambda: path.is_file() and len(path.read_text().splitlines()) >= n and
                      path.read_text().splitlines(), timeout=20, what="on_exit to report")


async def test_on_exit_sees_the_state_and_its_failure_never_changes_the_result(durable_box: Box, client,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "tok-9f2c41d7e3"
    monkeypatch.setenv("NOTIFY_TOKEN", secret)
    out = durable_box.work / "notified"
    run = await launch(client, command="echo training; exit 3", secret_env=["NOTIFY_TOKEN"],
                       on_exit=REPORT.format(out=out) + "; exit 7")
    (line,) = lines_of(out, 1)
    assert line == f"{run['run_id']} failed 3 {len(secret)}"  # the secret reached it, by environment
    run_dir = Path(run["run_dir"])
    until_sync(lambda: "on_exit exited 7" in (run_dir / "on_exit.log").read_text()
               if (run_dir / "on_exit.log").is_file() else False, what="the wrapper to log on_exit's exit")
    tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"]}))
    assert tail["state"]["status"] == "failed" and tail["state"]["exit_code"] == 3
    assert (run_dir / "exit_code").read_text().strip() == "3"
    for f in run_dir.iterdir():  # no secret value in any file of the run dir
        assert secret not in f.read_text(errors="replace"), f.name


async def test_a_succeeding_run_whose_on_exit_fails_still_reads_succeeded(durable_box: Box, client) -> None:
    run = await launch(client, command="true", on_exit="echo hook ran; no-such-command-here")
    log = Path(run["run_dir"]) / "on_exit.log"
    until_sync(lambda: log.is_file() and "on_exit exited 127" in log.read_text(), what="on_exit to fail")
    assert "hook ran" in log.read_text()
    done = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": run["run_id"]}))
    assert done["state"]["status"] == "succeeded" and done["state"]["exit_code"] == 0


async def test_every_queue_cell_runs_on_exit_and_a_run_without_one_has_no_hook(durable_box: Box, client) -> None:
    out = durable_box.work / "cells"
    queue = await launch(client, commands=["exit 0", "exit 5"], max_concurrent=1, on_exit=REPORT.format(out=out))
    got = sorted(lines_of(out, 2))
    first, second = (r["run_id"] for r in queue["runs"])
    assert got == sorted([f"{first} succeeded 0 0", f"{second} failed 5 0"])
    plain = await launch(client, command="true")
    until_sync(lambda: (Path(plain["run_dir"]) / "exit_code").is_file(), what="the run to end")
    assert not any((Path(plain["run_dir"]) / f).exists() for f in ("on_exit.sh", "on_exit.log"))


async def test_a_run_cancelled_with_a_first_signal_reports_cancelled(durable_box: Box, client) -> None:
    out = durable_box.work / "notified"
    run = await launch(client, command="trap 'exit 0' USR1; sleep 300 & wait", on_exit=REPORT.format(out=out))
    until_sync(lambda: (Path(run["run_dir"]) / "pid").is_file(), what="the run to start")
    await client.call_tool("cancel_run", {"host": "gpu1", "run_id": run["run_id"], "signal_first": "USR1",
                                          "grace_s": 5})
    (line,) = lines_of(out, 1)
    assert line == f"{run['run_id']} cancelled 0 0"
