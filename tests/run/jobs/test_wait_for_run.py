"""wait_for_run through a real MCP client, on LocalHost and over the test sshd: it returns when a
short run ends, with progress received meanwhile; it returns "still running" at its bound on a
long one; a client that gives up stops only the wait, never the run."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from mcp_server.app import App
from mcp_server.hosts.base import Host
from mcp_server.run.jobs.wait import wait_for_run
from mcp_server.settings import Settings
from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until_sync


async def launch(client, **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "probe_s": 0, **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


def pid_file(run: dict) -> str:
    path = Path(run["run_dir"]) / "pid"
    return until_sync(lambda: path.is_file() and path.read_text().strip(), what="the wrapper's pid")


async def test_returns_when_a_short_run_ends_with_progress_meanwhile(durable_box: Box, client) -> None:
    run = await launch(client, command="for i in 1 2 3 4 5 6; do echo step=$i loss=0.$i; sleep 1; done; exit 4")
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    started = time.monotonic()
    res = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": run["run_id"],
                                                             "timeout_s": 60}, progress_callback=on_progress))
    assert time.monotonic() - started < 30
    assert res["ended"] and res["state"]["status"] == "failed" and res["state"]["exit_code"] == 4
    assert res["status_at_start"] == "running" and "ended: failed" in res["message"]
    assert res["last_line"] == "step=6 loss=0.6" and res["log_offset"] > 0
    assert seen and all(total == 60 for _, total, _ in seen)
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
    assert "running" in (seen[0][2] or "")


async def test_returns_still_running_at_its_bound_on_a_long_run(durable_box: Box, client) -> None:
    run = await launch(client, command="echo warming up; sleep 300")
    res = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": run["run_id"], "timeout_s": 3}))
    assert not res["ended"] and not res["changed"] and res["state"]["status"] == "running"
    assert 3 <= res["waited_s"] < 15 and "call again" in res["message"]
    assert res["last_line"] == "warming up"
    tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"],
                                                           "offset": res["log_offset"]}))
    assert tail["text"] == ""  # nothing new since the offset the wait handed back


async def test_an_ended_run_returns_at_once(durable_box: Box, client) -> None:
    run = await launch(client, command="echo done")
    until_sync(lambda: (Path(run["run_dir"]) / "exit_code").is_file(), what="the run to end")
    res = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": run["run_id"]}))
    assert res["ended"] and res["state"]["status"] == "succeeded" and res["polls"] == 1


async def test_a_client_that_gives_up_stops_only_the_wait(durable_box: Box, client) -> None:
    run = await launch(client, command="sleep 300")
    pid_file(run)
    got_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got_progress.set()

    async with client.session() as c:
        with anyio.move_on_after(20):
            async with anyio.create_task_group() as tg:
                async def wait() -> None:
                    await c.call_tool("wait_for_run", {"host": "gpu1", "run_id": run["run_id"], "timeout_s": 120},
                                      progress_callback=on_progress)

                tg.start_soon(wait)
                await got_progress.wait()
                tg.cancel_scope.cancel()
        assert got_progress.is_set()
        tail = structured(await c.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"]}))
    assert tail["state"]["status"] == "running"


class FirstCallHost:
    """The box; opens a gate file once the first round trip has come back."""

    def __init__(self, host: Host, gate: Path) -> None:
        self.inner, self.name, self.gate = host, host.name, gate

    async def run(self, *args, **kwargs):
        res = await self.inner.run(*args, **kwargs)
        self.gate.write_text("")
        return res


async def test_a_queued_run_that_starts_is_a_change_of_state(durable_box: Box, client) -> None:
    gate = durable_box.work / "go"
    res = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "commands": [f"while [ ! -f {gate} ]; do sleep 0.1; done", "sleep 300"],
        "max_concurrent": 1, "probe_s": 0}))
    second = res["queue"]["runs"][1]["run_id"]
    app = App(Settings.from_env())
    spec = app.pool.spec("gpu1")
    try:
        host = FirstCallHost(await app.pool.host(spec), gate)
        out = await wait_for_run(host, spec, second, redactor=app.redactor, timeout_s=30, poll_s=0.2)  # type: ignore[arg-type]
    finally:
        await app.close()
    assert out.status_at_start == "queued" and out.changed and not out.ended and out.state.status == "running"
    assert "changed to running" in out.message
