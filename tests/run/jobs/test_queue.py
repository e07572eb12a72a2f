"""The on-box queue resumed from a start index, and sync_to_durable per queued cell: for real on
LocalHost and over the test sshd, through a real MCP client."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import error_text, structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until


async def queue(client, box: Box, commands: list[str], **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "commands": commands, "workdir": str(box.work), "probe_s": 0, **args}))
    return res["queue"]


async def ended(client, run_ids: list[str]) -> dict[str, dict]:
    async def all_ended() -> dict[str, dict] | None:
        res = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
        rows = {r["run_id"]: r for r in res["outcomes"][0]["runs"]["runs"] if r["run_id"] in run_ids}
        done = len(rows) == len(run_ids) and all(r["status"] not in ("running", "queued") for r in rows.values())
        return rows if done else None

    return await until(all_ended, timeout=30, interval=0.2, what=f"runs {run_ids} to end")


async def test_a_sweep_restarted_at_cell_3_does_not_run_cells_1_and_2_again(durable_box: Box, client) -> None:
    commands = [f"touch ran{i}" for i in range(1, 5)]
    q = await queue(client, durable_box, commands, name="sweep", start_index=3, max_concurrent=2)
    assert q["start_index"] == 3
    assert [(r["index"], r["run_id"].split("-")[0]) for r in q["runs"]] == [(3, "sweep3"), (4, "sweep4")]
    rows = await ended(client, [r["run_id"] for r in q["runs"]])
    assert {r["status"] for r in rows.values()} == {"succeeded"}
    assert sorted(p.name for p in durable_box.work.glob("ran*")) == ["ran3", "ran4"]


async def test_a_start_index_that_is_not_a_cell_is_refused(durable_box: Box, client) -> None:
    text = error_text(await client.call_tool("launch_detached", {
        "host": "gpu1", "commands": ["true", "true"], "start_index": 3}))
    assert "[BAD_INPUT]" in text and "start_index is not a cell" in text and "1..2" in text
    text = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true",
                                                                 "start_index": 2}))
    assert "start_index applies to a queue" in text


async def test_each_queued_cell_copies_only_its_own_outputs_and_a_failed_copy_is_named(
        durable_box: Box, client) -> None:
    write = 'mkdir -p "out/$RGT_RUN_ID" && echo "$RGT_RUN_ID" > "out/$RGT_RUN_ID/best.pth"'
    q = await queue(client, durable_box, [write, write, "true"], max_concurrent=3,
                    sync_to_durable=["out/{run_id}/*.pth"])
    ids = [r["run_id"] for r in q["runs"]]
    rows = await ended(client, ids)
    assert [rows[i]["status"] for i in ids] == ["succeeded", "succeeded", "sync_failed"]
    assert "matched no file" in rows[ids[2]]["sync"]
    for run_id in ids[:2]:
        copied = sorted((durable_box.durable / "results" / run_id).rglob("*.pth"))
        assert copied == [durable_box.durable / "results" / run_id / "out" / run_id / "best.pth"]
        assert Path(copied[0]).read_text() == run_id + "\n"
