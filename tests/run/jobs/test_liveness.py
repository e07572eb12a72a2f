"""Liveness truth (security: teardown must never pass while training still holds the box).
A run whose wrapper died while its command lives is `orphaned` — live for list_runs, teardown
and cancel_run, never `lost`; a TERM from outside is recorded as such, not as a hard kill.
On LocalHost and over the test sshd."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.run.jobs.test_cancel_run import cancel, launch, status
from tests.support.wait import until


async def _running(client, run_id: str) -> dict:
    async def ok() -> dict | None:
        st = await status(client, run_id)
        return st if st["status"] == "running" else None
    return await until(ok, timeout=30, what=f"{run_id} to run")


async def test_security_a_run_whose_wrapper_died_is_orphaned_live_and_cancellable(durable_box: Box, client,
                                                                                  request) -> None:
    run = await launch(client, command="sleep 300")
    st = await _running(client, run["run_id"])
    wrapper = st["pid"]
    os.kill(wrapper, signal.SIGKILL)  # only the wrapper: its command keeps running

    async def orphaned() -> dict | None:
        s = await status(client, run["run_id"])
        return s if s["status"] == "orphaned" else None
    st = await until(orphaned, timeout=20, what="the run to read orphaned")
    assert "sleep" in " ".join(st["evidence"]) and "cancel_run" in " ".join(st["evidence"])
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1"}))["outcomes"][0]["runs"]
    assert listed["live"] == 1 and listed["runs"][0]["status"] == "orphaned"
    action = "none" if request.node.callspec.params["durable_box"] == "local" else "manual"
    plan = structured(await client.call_tool("plan_teardown", {"host": "gpu1", "action": action}))
    g1 = plan["gates"][0]
    assert g1["id"] == "G1" and g1["state"] == "fail" and run["run_id"] in g1["evidence"]
    res = await cancel(client, run["run_id"], grace_s=1, reason="orphaned test")
    assert res["changed"] is True and res["state"]["status"] == "cancelled", res
    assert _live_members(wrapper) == []


def _live_members(pgid: int) -> list[str]:
    """Processes of a group that are not zombies (a container's init may never reap the killed wrapper)."""
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat=,comm="], capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if ln.split()[1] == str(pgid) and not ln.split()[2].startswith("Z")]


async def test_security_a_term_from_outside_is_recorded_not_reported_as_a_hard_kill(durable_box: Box,
                                                                                    client) -> None:
    run = await launch(client, command="sleep 300")
    st = await _running(client, run["run_id"])
    os.killpg(st["pid"], signal.SIGTERM)  # the whole group, as a platform stop or `kill -- -pgid` does

    async def ended() -> dict | None:
        s = await status(client, run["run_id"])
        return s if s["status"] not in ("running", "orphaned") else None
    st = await until(ended, timeout=20, what="the run to end")
    assert st["status"] == "failed" and st["exit_code"] == 143, st
    assert "SIGTERM" in " ".join(st["evidence"])
    log = Path(run["run_dir"], "log").read_text()
    assert "received SIGTERM" in log
    assert Path(run["run_dir"], "signalled").read_text().strip() == "TERM"


async def test_security_a_run_log_is_not_world_readable(durable_box: Box, client) -> None:
    run = await launch(client, command="echo hi")
    log = Path(run["run_dir"], "log")

    async def written() -> bool:
        return log.exists() and log.stat().st_size > 0
    await until(written, timeout=20, what="the log to be written")
    assert log.stat().st_mode & 0o777 == 0o640
