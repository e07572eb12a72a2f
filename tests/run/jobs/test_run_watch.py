"""Runs as subscribable resources, through the real MCP client (in memory): a client listening
to `runs://gpu1/<run id>` is told when the run ends, without calling anything; one watcher per
host polls all its watched runs in one round trip; nothing polls while nobody listens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_server.app import App
from mcp_server.run.jobs.cancel import cancel_run
from mcp_server.server import build_server
from mcp_server.settings import Settings
from tests.conftest import structured


@pytest.fixture
def fast_watch(monkeypatch: pytest.MonkeyPatch, env: Any, tmp_path: Path) -> Path:
    monkeypatch.setenv("RGT_WATCH_INTERVAL", "0.3")
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(durable)}})
    return durable


async def _launch(c: Client, command: str) -> str:
    res = structured(await c.call_tool("launch_detached", {"host": "gpu1", "command": command, "probe_s": 0}))
    return str(res["outcomes"][0]["launch"]["run_id"])


async def test_a_subscriber_is_told_when_its_run_ends_without_polling(fast_watch: Path) -> None:
    async with Client(build_server(Settings.from_env())) as c:
        run_id = await _launch(c, "sleep 1.5; echo done")
        uri = f"runs://gpu1/{run_id}"
        async with c.listen(resource_subscriptions=[uri, uri + "/log"]) as sub:
            got: list[str] = []

            async def first_two() -> None:
                async for event in sub:
                    got.append(str(getattr(event, "uri", event)))
                    if len(got) >= 2:
                        return
            await asyncio.wait_for(first_two(), timeout=20)
        assert sorted(got) == sorted([uri, uri + "/log"])
        view = await c.read_resource(uri)
        assert '"status": "succeeded"' in view.contents[0].text


async def test_one_round_trip_per_poll_for_all_the_watched_runs_and_none_without_a_listener(
        fast_watch: Path) -> None:
    published: list[str] = []

    async def publish(uri: str) -> None:
        published.append(uri)

    app = App(Settings.from_env(), publish)
    try:
        async with Client(build_server(Settings.from_env())) as c:
            ids = [await _launch(c, "sleep 30") for _ in range(3)]
        host, spec = await app._open_host("gpu1")
        start = host.round_trips
        await asyncio.sleep(1.0)
        assert host.round_trips == start, "nothing polls while nobody listens"
        taken = app.watch.add([f"runs://gpu1/{i}" for i in ids] + [f"runs://gpu1/{ids[0]}/log"])
        await asyncio.sleep(1.5)
        polls = app.watch.polls("gpu1")
        app.watch.remove(taken)
        # 0.3 s base interval doubling while quiet: a few polls, each ONE command for the 3 runs.
        assert polls >= 2 and host.round_trips - start == polls, (polls, host.round_trips - start)
        after = host.round_trips
        await asyncio.sleep(1.0)
        assert host.round_trips == after and app.watch.watching() == [], "the watcher stops with the last listener"
        assert published == [], "nothing changed, nothing published"
        for i in ids:
            await cancel_run(host, spec, i, by="test", grace_s=0.5)
    finally:
        await app.close()


async def test_over_stdio_wait_for_run_sends_progress_and_a_subscriber_hears_the_end(fast_watch: Path) -> None:
    import os

    from mcp import StdioServerParameters

    from tests.run.audit.test_audit_box import console_script

    names = ("RGT_HOME", "RGT_CONFIG", "RGT_SSH_CONFIG", "PATH", "RGT_WATCH_INTERVAL", "RGT_PULL_ROOTS")
    params = StdioServerParameters(command=console_script(), env={k: os.environ[k] for k in names if k in os.environ})
    async with Client(params, read_timeout_seconds=60) as c:
        run_id = await _launch(c, "for i in 1 2 3 4 5 6; do echo step=$i; sleep 1; done")
        uri = f"runs://gpu1/{run_id}"
        seen: list[tuple[float, str | None]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, message))
        async with c.listen(resource_subscriptions=[uri]) as sub:
            waited = structured(await c.call_tool("wait_for_run", {"host": "gpu1", "run_id": run_id,
                                                                   "timeout_s": 40}, progress_callback=progress))
            event = await asyncio.wait_for(sub.__anext__(), timeout=10)
        assert waited["ended"] and waited["state"]["status"] == "succeeded"
        assert seen and [v for v, _ in seen] == sorted(v for v, _ in seen), "progress is monotone"
        assert str(getattr(event, "uri", "")) == uri
