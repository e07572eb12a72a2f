"""list_runs at scale, through a real MCP client, on LocalHost and over the test sshd: 1050 run
dirs whose run ids sort in a different order than their start times; newest first, every run
reachable by paging (run 1001 included), `total` counts them all, the newest run is always on
page 1, and the state / name glob / since filters apply before paging."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import error_text, structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until_sync

N_RUNS = 1050
BASE = 1_700_000_000.0  # 2023-11-14: every crafted run is older than a run launched now


def crafted_runs(durable: Path) -> list[str]:
    """N_RUNS ended run dirs; returns their ids newest first. Names are scrambled so that the
    run ids' byte order says nothing about when each run started."""
    runs = durable / ".rgt" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    ids = []
    for i in range(N_RUNS):
        name = f"exp{(i * 7919) % N_RUNS:04d}"
        run_id = f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(BASE + 60 * i))}-{i:06x}"
        d = runs / run_id
        d.mkdir()
        record = {"schema": "remote-gpu-trainer/run/v1", "run_id": run_id, "name": name, "backend": "shell",
                  "command": f"python train.py --seed {i}", "started_at": BASE + 60 * i}
        (d / "run.json").write_text(json.dumps(record, indent=2))
        (d / "log").write_text(f"step=1 loss=0.{i}\n")
        (d / "exit_code").write_text("0\n" if i % 3 else "1\n")
        (d / "ended_at").write_text(f"{BASE + 60 * i + 30:.0f}\n")
        ids.append(run_id)
    return ids[::-1]


async def page(client, **args) -> dict:
    res = structured(await client.call_tool("list_runs", {"host": "gpu1", **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return dict(outcome["runs"])


async def every_page(client, limit: int, **args) -> list[dict]:
    pages, cursor = [], None
    while True:
        got = await page(client, limit=limit, **({"cursor": cursor} if cursor else {}), **args)
        pages.append(got)
        cursor = got["next_cursor"]
        if cursor is None:
            return pages


async def test_paging_over_1050_runs_reaches_every_run_newest_first(durable_box: Box, client) -> None:
    newest_first = crafted_runs(durable_box.durable)
    pages = await every_page(client, limit=200)
    assert [len(p["runs"]) for p in pages] == [200, 200, 200, 200, 200, 50]
    assert all(p["total"] == N_RUNS for p in pages)
    seen = [r["run_id"] for p in pages for r in p["runs"]]
    assert seen == newest_first  # each run exactly once, in start-time order, not run-id order
    assert seen[1000] in [r["run_id"] for r in pages[5]["runs"]]  # run 1001 is on the sixth page
    statuses = {r["run_id"]: r["status"] for p in pages for r in p["runs"]}
    assert statuses[newest_first[-1]] == "failed" and statuses[newest_first[-2]] == "succeeded"


async def test_the_newest_run_is_always_on_page_one(durable_box: Box, client) -> None:
    crafted_runs(durable_box.durable)
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": "sleep 300",
                                                                "name": "aaa-fresh", "probe_s": 0}))
    fresh = res["outcomes"][0]["launch"]["run_id"]
    until_sync(lambda: (durable_box.durable / ".rgt" / "runs" / fresh / "pid").is_file(), what="the run to start")
    first = await page(client, limit=5)
    assert first["runs"][0]["run_id"] == fresh and first["runs"][0]["status"] == "running"
    assert first["total"] == N_RUNS + 1 and first["live"] == 1 and first["next_cursor"]
    default = await page(client)
    assert default["runs"][0]["run_id"] == fresh and len(default["runs"]) == 50


async def test_filters_apply_before_paging_and_total_counts_the_matches(durable_box: Box, client) -> None:
    newest_first = crafted_runs(durable_box.durable)
    failed = await every_page(client, limit=100, state=["failed"])
    ids = [r["run_id"] for p in failed for r in p["runs"]]
    assert len(ids) == 350 and failed[0]["total"] == 350 and all(
        r["status"] == "failed" for p in failed for r in p["runs"])
    assert ids == [i for i in newest_first if i in set(ids)]
    named = await page(client, limit=200, name="exp000*")
    assert named["total"] == 10 and all(r["name"].startswith("exp000") for r in named["runs"])
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE + 60 * 1000))
    recent = await page(client, limit=200, since=since)
    assert recent["total"] == 50 and [r["run_id"] for r in recent["runs"]] == newest_first[:50]
    running = await page(client, state=["running"])
    assert running["total"] == 0 and running["runs"] == [] and running["next_cursor"] is None


async def test_a_cursor_that_list_runs_did_not_give_is_refused_clearly(durable_box: Box, client) -> None:
    res = await client.call_tool("list_runs", {"host": "gpu1", "cursor": "not-a-cursor"})
    assert "BAD_INPUT" in error_text(res) and "next_cursor" in error_text(res)
    res = await client.call_tool("list_runs", {"cursor": "x"})
    assert "host" in error_text(res)
    res = await client.call_tool("list_runs", {"host": "gpu1", "since": "last tuesday"})
    assert "since" in error_text(res)
