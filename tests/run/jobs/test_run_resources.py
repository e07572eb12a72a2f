"""Runs as resources through a real MCP client, on LocalHost and over the test sshd: the status
JSON of a run while it runs and after it ends, its log tail, and a clear error for a run that
does not exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until_sync


async def launch(client, command: str) -> dict:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "probe_s": 0, "command": command}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


async def read(client, uri: str) -> str:
    async with client.session() as c:
        return (await c.read_resource(uri)).contents[0].text


async def test_the_templates_are_listed(client) -> None:
    async with client.session() as c:
        templates = {t.uri_template: t for t in (await c.list_resource_templates()).resource_templates}
    assert templates["runs://{host}/{run_id}"].mime_type == "application/json"
    assert templates["runs://{host}/{run_id}/log"].mime_type == "text/plain"


async def test_a_run_reads_as_status_json_while_it_runs_and_after_it_ends(durable_box: Box, client) -> None:
    run = await launch(client, "echo step=1 loss=0.9; sleep 2; echo CUDA out of memory; echo last words; exit 3")
    until_sync(lambda: b"step=1" in (Path(run["run_dir"]) / "log").read_bytes(), what="the first log line")
    live = json.loads(await read(client, f"runs://gpu1/{run['run_id']}"))
    assert live["state"]["status"] == "running" and live["exit_code"] is None
    assert live["last_line"] == "step=1 loss=0.9" and live["elapsed_s"] >= 0 and live["started_at_utc"]
    until_sync(lambda: (Path(run["run_dir"]) / "exit_code").is_file(), what="the run to end")
    ended = json.loads(await read(client, f"runs://gpu1/{run['run_id']}"))
    assert ended["state"]["status"] == "failed" and ended["exit_code"] == 3 and ended["last_line"] == "last words"
    assert 1 <= ended["elapsed_s"] < 30 and ended["cost_so_far"] is None
    assert any(s["id"] for s in ended["signatures"]) and ended["log_uri"] == f"runs://gpu1/{run['run_id']}/log"
    log = await read(client, ended["log_uri"])
    assert log.splitlines()[0].startswith(f"# {run['run_id']} on gpu1: failed")
    assert log.splitlines()[-3:] == ["step=1 loss=0.9", "CUDA out of memory", "last words"]


async def test_a_missing_run_is_a_clear_not_found(durable_box: Box, client) -> None:
    async with client.session() as c:
        with pytest.raises(MCPError, match=r"\[NOT_FOUND\].*no run no-such-run"):
            await c.read_resource("runs://gpu1/no-such-run")
        with pytest.raises(MCPError, match=r"\[BAD_INPUT\] run_id is not a valid run id"):
            await c.read_resource("runs://gpu1/-rf")
        with pytest.raises(MCPError, match="Unknown resource"):  # no traversal out of the runs dir
            await c.read_resource("runs://gpu1/..")
