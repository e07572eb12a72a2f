"""A client that gives up on launch_detached during its probe still learns the run id (the first
progress message names it) and the ledger holds the run before the probe begins; the job keeps
running and list_runs shows it as the ledger's."""

from __future__ import annotations

import anyio

from mcp_server.ledger import Ledger
from mcp_server.settings import Settings
from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until


async def test_giving_up_during_the_probe_leaves_the_run_id_known_and_the_run_running(durable_box: Box,
                                                                                       client) -> None:
    messages: list[str] = []
    first = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        first.set()

    async with client.session() as c:
        with anyio.move_on_after(20):
            async with anyio.create_task_group() as tg:
                async def start() -> None:
                    await c.call_tool("launch_detached", {"host": "gpu1", "command": "sleep 300", "probe_s": 20},
                                      progress_callback=on_progress)

                tg.start_soon(start)
                await first.wait()
                await until(lambda: any(durable_box.durable.glob(".rgt/runs/*/pid")), what="the job to start")
                tg.cancel_scope.cancel()  # mid-probe: the job runs, the call never returns
        assert first.is_set()
        ledger = Ledger.open(Settings.from_env().ledger_path, None)
        begun = ledger.latest("launch_begun", host="gpu1")
        ledger.close()
        assert begun is not None and begun.run_id and begun.run_id in messages[0]
        run_dir = durable_box.durable / ".rgt" / "runs" / begun.run_id
        assert begun.data["run_dir"] == str(run_dir)
        listed = structured(await c.call_tool("list_runs", {"host": "gpu1"}))["outcomes"][0]["runs"]
    (row,) = listed["runs"]
    assert row["run_id"] == begun.run_id and row["status"] == "running" and row["in_ledger"]
