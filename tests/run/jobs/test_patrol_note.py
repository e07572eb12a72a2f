"""What an on-box patrol leaves in a run's dir reaches the agent: tail_logs and wait_for_run show
its last status line and its escalations, newest first, cleaned as box text and bounded, through
the real MCP client on this machine and over the test sshd. A run without a patrol shows none."""

from __future__ import annotations

import json

from tests.conftest import structured
from tests.run.jobs.conftest import Box


def crafted(box: Box, run_id: str, patrol: object | None) -> None:
    d = box.durable / ".rgt" / "runs" / run_id
    d.mkdir(parents=True)
    (d / "log").write_text("step=1 loss=2.0\nstep=2 loss=1.5\n")
    (d / "workdir").write_text(str(box.work))
    (d / "exit_code").write_text("1\n")
    (d / "ended_at").write_text("1765000000\n")
    if patrol is not None:
        (d / "patrol.json").write_text(patrol if isinstance(patrol, str) else json.dumps(patrol))


async def test_tail_and_wait_show_the_patrols_last_line_and_escalations_newest_first(client, durable_box: Box) -> None:
    escalations = [{"key": f"r:stalled:{i}", "kind": "stalled", "level": "warn", "text": f"stall {i}", "at": i,
                    "notified": [{"channel": "ops", "kind": "slack", "status": "sent"}]} for i in range(14)]
    escalations.append({"key": "r:ended", "kind": "ended", "level": "crit", "at": 99.0,
                        "text": "failed: exit 1 \x1b[2J\x1b]0;pwned\x07CUDA out of memory",
                        "notified": [{"channel": "ops", "kind": "slack", "status": "failed", "error": "HTTP 403"}]})
    crafted(durable_box, "run-20261206-000000-aaaaaa", {"last": "03:00 run alive step 2 \x1b[31m| disk 40%", "at": 5.0,
                                                        "escalations": escalations})
    tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": "run-20261206-000000-aaaaaa"}))
    note = tail["patrol"]
    assert note["last"] == "03:00 run alive step 2 | disk 40%"
    assert len(note["escalations"]) == 10  # bounded, newest first
    first = note["escalations"][0]
    assert first["kind"] == "ended" and "\x1b" not in first["text"] and "\x07" not in first["text"]
    assert first["notified"] == ["ops: failed"]
    assert first["new"] is True  # not shown to an agent before
    waited = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": "run-20261206-000000-aaaaaa",
                                                                 "timeout_s": 1}))
    assert waited["patrol"]["escalations"][0]["kind"] == "ended"
    assert waited["patrol"]["escalations"][0]["new"] is False  # the tail_logs above showed it: acknowledged
    async with client.session() as c:
        view = json.loads((await c.read_resource("runs://gpu1/run-20261206-000000-aaaaaa")).contents[0].text)
    assert view["patrol"]["last"] == "03:00 run alive step 2 | disk 40%"


async def test_no_patrol_and_a_damaged_patrol_file_read_as_no_note(client, durable_box: Box) -> None:
    crafted(durable_box, "run-20261206-000000-bbbbbb", None)
    crafted(durable_box, "run-20261206-000000-cccccc", "{not json")
    for run_id in ("run-20261206-000000-bbbbbb", "run-20261206-000000-cccccc"):
        tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run_id}))
        assert tail.get("patrol") is None, run_id


async def test_list_runs_shows_the_patrols_last_line_and_how_many_escalations(client, durable_box: Box) -> None:
    crafted(durable_box, "run-20261206-000000-dddddd", {"last": "x", "escalations": []})
    d = durable_box.durable / ".rgt" / "runs" / "run-20261206-000000-dddddd"
    (d / "run.json").write_text(json.dumps({"run_id": d.name, "command": "true", "started_at": 1765000000}))
    (d / "patrol_state").write_text("2\t03:00 run alive step 9 \x1b[2J| disk 40%\n")
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    (row,) = listed["outcomes"][0]["runs"]["runs"]
    assert row["patrol"] == "03:00 run alive step 9 | disk 40% [2 escalation(s): tail_logs shows them]"


def test_a_new_escalation_changes_what_a_subscriber_is_told_about() -> None:
    from mcp_server.run.jobs.runscan import BoxRun
    from mcp_server.run.jobs.status import RunState
    from mcp_server.run.jobs.watch import fingerprint

    run = BoxRun(run_id="r", engine="shell", started_at=0.0, name=None, state=RunState(status="running"))
    escalated = BoxRun(run_id="r", engine="shell", started_at=0.0, name=None, state=RunState(status="running"),
                       patrol_escalations=1)
    assert fingerprint(run, 0.0, 900) != fingerprint(escalated, 0.0, 900)
