"""Security (denial of service): a roster of hostile globs against a box holding 2,000 files is
matched off the event loop, within the call's budget_s, while other calls keep being served; a
roster too costly for its budget stops with a coded error naming the glob and the budget; and a
cancelled call stops its matching instead of burning a thread."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_server.globs import MatchBudget, off_loop
from mcp_server.verify.artifacts.roster import RemoteEntry, resolve
from tests.conftest import Env, error_text, structured

FILES = 2000
# `**/` repeated with several stars per directory: the shape that froze the server for 35 s.
HOSTILE = [("**/*a*a*a*/" * 5) + f"b{i}" for i in range(10)]


def _name(i: int) -> str:
    """About 150 characters of a-rich directories: every star has many places to try."""
    return "/".join(f"d{i % 7}a{'a' * (8 + (i + k) % 13)}a{k}" for k in range(6)) + f"/f{i}.bin"


@pytest.fixture
def crowded(env: Env, tmp_path: Path) -> Path:
    durable = tmp_path / "durable"
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(durable),
                                  "scratch_root": str(tmp_path / "scratch")}})
    root = durable / "results" / "crowded"
    for i in range(FILES):
        f = root / _name(i)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
    return root


async def _timed(coro: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    res = await coro
    return res, time.monotonic() - t0


async def test_security_a_hostile_roster_returns_within_budget_while_a_cheap_call_stays_fast(
        crowded: Path, client: Any) -> None:
    async with client.session() as c:
        await c.call_tool("list_runs", {"host": "gpu1"})  # warm: the cheap call's own first-use cost
        verify = asyncio.create_task(_timed(c.call_tool(
            "verify_artifacts", {"host": "gpu1", "root": str(crowded), "roster": HOSTILE, "budget_s": 10})))
        cheap: list[float] = []
        while not verify.done() or not cheap:
            res, took = await _timed(c.call_tool("list_runs", {"host": "gpu1"}))
            assert not res.is_error
            cheap.append(took)
        res, took = await verify
    # The globs match nothing (no path ends in /b<i>): a finished, failed verification naming each.
    r = structured(res)
    assert r["done"] and r["passed"] is False
    assert {f["path"] for f in r["findings"] if f["kind"] == "missing"} == set(HOSTILE)
    assert took < 10 + 5, f"verify_artifacts took {took:.1f} s on a 10 s budget"
    assert max(cheap) < 2, f"list_runs waited {max(cheap):.1f} s behind the glob matching"


async def test_security_a_roster_too_costly_for_its_budget_stops_with_a_coded_error(
        crowded: Path, client: Any) -> None:
    roster = [("**/*a*a*a*/" * 3) + f"z{i}" for i in range(1000)]  # distinct: no shared work
    res, took = await _timed(client.call_tool(
        "verify_artifacts", {"host": "gpu1", "root": str(crowded), "roster": roster, "budget_s": 2}))
    text = error_text(res)
    assert "[BAD_INPUT]" in text and "budget of 2 s" in text and "**/*a*a*a*/" in text
    assert "budget_s" in text  # the next step names the knob
    assert took < 2 + 8, f"the refusal came after {took:.1f} s on a 2 s budget"


async def test_cancelling_the_call_stops_the_matching_thread() -> None:
    entries = [RemoteEntry("f", 1, 0.0, _name(i)) for i in range(FILES)]
    roster = [("**/*a*a*a*/" * 3) + f"z{i}" for i in range(1000)]
    started, ended = threading.Event(), threading.Event()

    def work(budget: MatchBudget) -> object:
        started.set()
        try:
            return resolve(roster, entries, budget)
        finally:
            ended.set()

    task = asyncio.create_task(off_loop(work, MatchBudget(time.monotonic() + 600, 600)))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Unstopped, the thread would run on for tens of seconds after its call was gone.
    assert await asyncio.to_thread(ended.wait, 5)
