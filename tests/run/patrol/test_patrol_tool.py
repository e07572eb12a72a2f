"""launch_detached's `watch` through a real MCP client: a patrol started on the box (this machine
and over the test sshd) reports a run's end, with its failure signature, to a channel configured
in the inventory (a local HTTP receiver stands in for the webhook service), once; a whole-box
patrol on a metered box reports that it sits idle with what it cost; `test` sends one message per
channel; the patrol keeps going after the MCP session ends; the channel's secret never lands in
a file or a process list on the box."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_text, structured
from tests.run.jobs.conftest import Box
from tests.support.receivers import HttpReceiver

SECRET_PATH = "/hook/T0KEN-5ecret-2f9a"  # a webhook URL carries its token: the secret is the URL


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    r = HttpReceiver().start()
    yield r
    r.stop()


@pytest.fixture
def channel(receiver: HttpReceiver, durable_box: Box, env: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The inventory of the run tests' box plus one webhook channel whose URL is in the server's env."""
    url = receiver.url + SECRET_PATH
    monkeypatch.setenv("RGT_TEST_HOOK", url)
    text = env.config.read_text() + '\n[notify.ops]\nkind = "webhook"\nurl_env = "RGT_TEST_HOOK"\n'
    env.config.write_text(text)
    return url


def received(receiver: HttpReceiver, n: int, kind: str | None = None, timeout: float = 40.0) -> list[dict[str, Any]]:
    """The messages (of `kind`, when given: a busy CI disk may add a disk alarm), once `n` came."""
    deadline = time.monotonic() + timeout
    while True:
        got = [r.json() for r in receiver.requests]
        got = [m for m in got if kind is None or m["kind"] == kind]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


WATCH = {"interval_min": 0.05, "stall_min": 30}


async def launch(client: Any, command: str, **extra: Any) -> dict[str, Any]:
    out = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": command, "probe_s": 0,
                                                                "watch": WATCH, **extra}))
    (outcome,) = out["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


async def test_a_watched_run_that_succeeds_is_reported_once_and_its_patrol_ends(client, durable_box: Box,
                                                                                 receiver: HttpReceiver,
                                                                                 channel: str) -> None:
    run = await launch(client, "sleep 2; echo step=1 loss=0.5")
    assert any("patrol patrol-" in n for n in run["notes"]), run["notes"]
    (msg,) = received(receiver, 1, "succeeded")
    assert msg["run_id"] == run["run_id"] and run["run_id"] in msg["message"]
    time.sleep(3)
    assert len(received(receiver, 1, "succeeded")) == 1, "each event once"
    tail = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"]}))
    assert tail["patrol"]["escalations"][0]["kind"] == "succeeded"
    assert tail["patrol"]["escalations"][0]["notified"] == ["ops: sent"]
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1", "name": "patrol-*"}))
    (patrol,) = listed["outcomes"][0]["runs"]["runs"]
    for _ in range(50):
        if patrol["status"] != "running":
            break
        time.sleep(0.2)
        listed = structured(await client.call_tool("list_runs", {"host": "gpu1", "name": "patrol-*"}))
        (patrol,) = listed["outcomes"][0]["runs"]["runs"]
    assert patrol["status"] == "succeeded", patrol  # it stopped by itself once the run's end was sent


@pytest.mark.parametrize("durable_box", ["local"], indirect=True)
async def test_a_failed_run_is_reported_with_its_failure_signature(client, durable_box: Box, receiver: HttpReceiver,
                                                                   channel: str) -> None:
    run = await launch(client, "sleep 1; echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; "
                               "exit 1")
    (msg,) = received(receiver, 1, "failed")
    assert msg["level"] == "crit"
    assert "CUDA out of memory" in msg["message"] and run["run_id"] in msg["message"]


@pytest.mark.parametrize("durable_box", ["local"], indirect=True)
async def test_an_idle_metered_box_is_reported_with_its_cost(client, durable_box: Box, receiver: HttpReceiver,
                                                             channel: str, env: Any) -> None:
    env.config.write_text(env.config.read_text().replace('durable_root =', 'hourly_price = 1.2\ndurable_root =', 1))
    out = structured(await client.call_tool("launch_detached", {"host": "gpu1", "watch": {
        "interval_min": 0.05, "idle_min": 0.05}}))
    patrol = out["outcomes"][0]["launch"]
    assert patrol["name"] == "patrol-box"
    msg = received(receiver, 1, "idle", timeout=120)[0]  # a loaded CI box ticks late
    assert "$" in msg["message"], msg
    await client.call_tool("cancel_run", {"host": "gpu1", "run_id": patrol["run_id"], "grace_s": 10})


@pytest.mark.parametrize("durable_box", ["local"], indirect=True)
async def test_test_sends_one_message_per_channel_and_says_how_each_went(client, durable_box: Box,
                                                                       receiver: HttpReceiver, channel: str) -> None:
    out = structured(await client.call_tool("launch_detached", {"host": "gpu1", "watch": {"test": True}}))
    assert out["tested"] == ["ops: sent"]
    (msg,) = received(receiver, 1, "test")
    bad = await client.call_tool("launch_detached", {"host": "gpu1", "watch": {"test": True, "channels": ["nope"]}})
    assert bad.is_error and "[notify.nope]" in error_text(bad)


@pytest.mark.parametrize("durable_box", ["local"], indirect=True)
async def test_the_patrol_goes_on_after_the_session_ends_and_no_secret_lands_on_the_box(
        client, durable_box: Box, receiver: HttpReceiver, channel: str) -> None:
    async with client.session() as c:
        res = await c.call_tool("launch_detached", {"host": "gpu1", "command": "sleep 4", "probe_s": 0,
                                                    "watch": WATCH})
        run = structured(res)["outcomes"][0]["launch"]
    # the session (and its server) is gone; the run and its patrol are not
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert "patrol_onbox.py" in ps and SECRET_PATH not in ps
    (msg,) = received(receiver, 1, "succeeded")
    assert msg["run_id"] == run["run_id"]
    on_box = [p for p in durable_box.durable.rglob("*") if p.is_file() and SECRET_PATH.encode() in p.read_bytes()]
    assert on_box == [], on_box
    environ = [p for p in Path("/proc").glob("[0-9]*/cmdline") if SECRET_PATH.encode() in _read(p)]
    assert environ == []


def _read(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except OSError:
        return b""


def test_the_box_files_run_on_a_bare_python_without_the_package() -> None:
    """The patrol and sender import nothing of the server: copied alone, they start."""
    import tempfile

    from mcp_server.run.patrol.service import BOX_FILES, _code

    with tempfile.TemporaryDirectory() as d:
        for name, data in _code().items():
            (Path(d) / name).write_bytes(data)
        assert sorted(p.name for p in Path(d).iterdir()) == sorted(BOX_FILES)
        spec = Path(d) / "spec.json"
        spec.write_text(json.dumps({"host": "x", "durable_root": d, "runs": [], "lifetime_s": 1, "interval_s": 1,
                                    "sample_s": 0.2, "channels": []}))
        done = subprocess.run([sys.executable, "-I", str(Path(d) / "patrol_onbox.py"), str(spec)],
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        assert "patrol stops" in done.stdout


@pytest.mark.parametrize("durable_box", ["ssh"], indirect=True)
async def test_the_patrol_started_over_ssh_survives_an_sshd_restart(client, durable_box: Box, receiver: HttpReceiver,
                                                                    channel: str, sshd: Any) -> None:
    run = await launch(client, "sleep 5")
    sshd.stop()  # every SSH session to the box ends here, the server's included
    sshd.start()
    (msg,) = received(receiver, 1, "succeeded")
    assert msg["run_id"] == run["run_id"]
