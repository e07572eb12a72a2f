"""launch_detached / tail_logs / list_runs against the real sshd (bash as the remote shell,
no pty), through a real MCP client; each call uses a fresh server instance."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import error_text, structured
from tests.support.wait import until


@pytest.fixture
def ssh_box(env, box, tmp_path):
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(durable)}})
    return durable


async def launch(client, **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


async def tail(client, run_id: str, **args) -> dict:
    return structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run_id, **args}))


async def wait_status(client, run_id: str, want: set[str], timeout: float = 30) -> dict:
    async def reached() -> dict | None:
        t = await tail(client, run_id)
        return t if t["state"]["status"] in want else None

    return await until(reached, timeout=timeout, interval=0.2, what=f"run {run_id} to be {sorted(want)}")


async def wait_text(client, run_id: str, text: str) -> dict:
    async def shown() -> dict | None:
        t = await tail(client, run_id)
        return t if text in t["text"] else None

    return await until(shown, timeout=30, interval=0.2, what=f"{text!r} in the log of {run_id}")


async def test_job_survives_disconnect_and_sshd_restart_and_records_its_exit_code(ssh_box, box, client) -> None:
    marker = ssh_box / "go"
    run = await launch(client, command=f"while [ ! -f {marker} ]; do sleep 0.1; done; echo finished; exit 7", probe_s=0)
    assert run["outcome"] == "running"
    box.restart()  # drops every session and the listener, then comes back with the same key
    marker.write_text("")
    t = await wait_status(client, run["run_id"], {"failed", "succeeded", "lost"})
    assert t["state"]["status"] == "failed" and t["state"]["exit_code"] == 7
    assert "finished" in t["text"]
    assert (Path(run["run_dir"]) / "exit_code").read_text() == "7\n"


async def test_sigkill_of_the_process_group_is_lost_not_running_or_succeeded(ssh_box, client) -> None:
    run = await launch(client, command="sleep 300", probe_s=0)
    pid = int((Path(run["run_dir"]) / "pid").read_text())
    os.killpg(pid, 9)
    t = await wait_status(client, run["run_id"], {"lost"})
    assert any("killed hard" in e for e in t["state"]["evidence"])


async def test_launch_hands_back_while_the_job_runs_without_a_pty(ssh_box, client) -> None:
    # A launch that waited for its job would come back after 60 s with the job ended.
    run = await launch(client, command="tty; sleep 60", probe_s=0)
    assert run["outcome"] == "running"
    t = await wait_text(client, run["run_id"], "not a tty")
    assert t["state"]["status"] == "running"
    os.killpg(int((Path(run["run_dir"]) / "pid").read_text()), 9)


async def test_launching_a_live_name_twice_starts_one_job(ssh_box, client) -> None:
    first, second = await asyncio.gather(
        launch(client, command="sleep 60", name="train-a", probe_s=0),
        launch(client, command="sleep 60", name="train-a", probe_s=0),
    )
    outcomes = sorted([first["outcome"], second["outcome"]])
    assert outcomes == ["already_running", "running"]
    assert first["run_id"] == second["run_id"]
    runs = list((ssh_box / ".rgt" / "runs").iterdir())
    assert len(runs) == 1
    third = await launch(client, command="sleep 60", name="train-a", probe_s=0)
    assert third["outcome"] == "already_running" and third["run_id"] == first["run_id"]
    os.killpg(int((runs[0] / "pid").read_text()), 9)


async def test_a_finished_name_needs_an_explicit_relaunch(ssh_box, client) -> None:
    first = await launch(client, command="true", name="quick", probe_s=20)
    assert first["outcome"] == "exited_early" and first["state"]["status"] == "succeeded"
    again = await launch(client, command="true", name="quick", probe_s=0)
    assert again["outcome"] == "already_finished" and "relaunch=true" in again["notes"][-1]
    fresh = await launch(client, command="true", name="quick", probe_s=0, relaunch=True)
    assert fresh["run_id"] != first["run_id"]


async def test_an_import_error_comes_back_in_the_launch_result(ssh_box, client) -> None:
    run = await launch(client, command="python3 -c 'import torchvisionx'", probe_s=20)
    assert run["outcome"] == "exited_early"
    assert run["state"]["status"] == "failed" and run["state"]["exit_code"] == 1
    assert "ModuleNotFoundError: No module named 'torchvisionx'" in run["log_tail"]
    assert {"import-error", "traceback"} <= {s["id"] for s in run["signatures"]}


async def test_secret_values_never_leave_the_job(ssh_box, client, env, monkeypatch) -> None:
    secret = "sk-live-Zq9xW3" + os.urandom(4).hex()
    monkeypatch.setenv("WANDB_API_KEY", secret)
    run = await launch(client, command='echo "len ${#WANDB_API_KEY}"; sleep 30',
                       secret_env=["WANDB_API_KEY"], probe_s=1)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert secret not in ps
    for f in Path(run["run_dir"]).rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    await wait_text(client, run["run_id"], f"len {len(secret)}")  # the job receives the value
    assert secret not in str(run)
    # A job that prints its own secret: the log has it, every tool result is redacted.
    leaky = await launch(client, command='echo "key is $WANDB_API_KEY"', secret_env=["WANDB_API_KEY"], probe_s=20)
    assert secret not in str(leaky) and "key is [REDACTED]" in leaky["log_tail"]
    t = await tail(client, leaky["run_id"])
    assert secret not in str(t) and "key is [REDACTED]" in t["text"]
    runs = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    assert secret not in str(runs)
    assert secret.encode() not in (env.home / "ledger.sqlite").read_bytes()
    record = (Path(run["run_dir"]) / "run.json").read_text()
    assert "WANDB_API_KEY" in record and secret not in record
    os.killpg(int((Path(run["run_dir"]) / "pid").read_text()), 9)


async def test_offsets_lose_and_duplicate_nothing_while_the_log_grows(ssh_box, client) -> None:
    command = "for i in $(seq 1 150); do printf 'line %d é ✓ ' $i; [ $((i % 3)) = 0 ] && echo; sleep 0.005; done"
    run = await launch(client, command=command, probe_s=0)
    got, offset, calls = b"", 0, 0
    async with client.session() as c:  # one connection: the loop reads as fast as the log grows

        async def read_to_the_end() -> bool:
            nonlocal got, offset, calls
            t = structured(await c.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"],
                                                           "offset": offset, "max_bytes": 97}))
            got += t["text"].encode()
            assert t["offset"] == offset
            offset = t["next_offset"]
            calls += 1
            return t["state"]["status"] != "running" and t["eof"]

        await until(read_to_the_end, timeout=120, interval=0, what="the whole log")
    assert calls > 10
    assert got == (Path(run["run_dir"]) / "log").read_bytes()


async def test_last_lines_keep_a_partial_line_as_it_is(ssh_box, client) -> None:
    run = await launch(client, command="printf 'a\\nb\\nc\\npartial'", probe_s=20)
    t = await tail(client, run["run_id"], lines=2)
    assert t["text"] == "c\npartial" and t["next_offset"] == t["size"]


async def test_a_rotated_log_is_reported_and_read_from_zero(ssh_box, client) -> None:
    run = await launch(client, command="echo short", probe_s=20)
    t = await tail(client, run["run_id"], offset=10_000)
    assert t["log_reset"] is True and t["offset"] == 0 and "short" in t["text"]


async def test_a_bare_path_can_be_tailed_without_a_run(ssh_box, client, tmp_path) -> None:
    f = ssh_box / "logs" / "train.log"
    f.parent.mkdir()
    f.write_text("epoch 3/10 loss 0.41\n")
    t = structured(await client.call_tool("tail_logs", {"host": "gpu1", "path": str(f)}))
    assert t["state"] is None and t["progress"] == "epoch 3/10 loss 0.41"


async def test_a_silent_running_job_gets_a_stall_warning(ssh_box, client) -> None:
    run = await launch(client, command="sleep 60", probe_s=0)
    log = Path(run["run_dir"]) / "log"
    old = time.time() - 3600
    os.utime(log, (old, old))
    t = await tail(client, run["run_id"], stall_s=600)
    assert t["state"]["status"] == "running" and "not grown for 60 min" in t["stall_warning"]
    os.killpg(int((Path(run["run_dir"]) / "pid").read_text()), 9)


@pytest.mark.parametrize("name", ["a b", "x;rm", "$(id)", "-flag", "../up", "q'uote"])
async def test_unsafe_run_names_are_refused(ssh_box, client, name) -> None:
    text = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true", "name": name}))
    assert "not a safe name" in text


async def test_workdirs_with_shell_metacharacters_are_used_literally(ssh_box, client, tmp_path) -> None:
    weird = tmp_path / "my dir;echo INJECTED $(echo SUB) 'q'"
    weird.mkdir()
    run = await launch(client, command="pwd", workdir=str(weird), probe_s=20)
    assert run["state"]["status"] == "succeeded"
    t = await tail(client, run["run_id"])
    assert t["text"].splitlines()[-1] == str(weird)
    assert "INJECTED\n" not in t["text"]


async def test_a_missing_workdir_is_a_clear_error(ssh_box, client, tmp_path) -> None:
    text = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true",
                                                                 "workdir": str(tmp_path / "nope")}))
    assert "workdir does not exist" in text


async def test_the_disk_gate_refuses_before_anything_starts(ssh_box, client) -> None:
    text = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true",
                                                                 "min_free_gib": 1e9}))
    assert "disk gate" in text and "GiB free" in text
    assert not list((ssh_box / ".rgt" / "runs").iterdir())


async def test_tmux_backend_keeps_the_contract_and_is_attachable(ssh_box, client) -> None:
    run = await launch(client, command="echo in-tmux; sleep 30", backend="tmux", probe_s=0)
    assert run["backend"] == "tmux" and run["outcome"] == "running"
    sessions = subprocess.run(["tmux", "ls"], capture_output=True, text=True).stdout
    assert run["tmux_session"] in sessions
    t = await wait_text(client, run["run_id"], "in-tmux")
    assert t["state"]["status"] == "running"
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1"}))["outcomes"][0]["runs"]["runs"]
    assert [(r["run_id"], r["status"]) for r in listed] == [(run["run_id"], "running")]
    subprocess.run(["tmux", "kill-session", "-t", run["tmux_session"]], check=False)
    os.killpg(int((Path(run["run_dir"]) / "pid").read_text()), 9)


async def test_queue_runs_commands_with_a_concurrency_limit(ssh_box, client) -> None:
    res = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "commands": ["sleep 1; echo one", "sleep 1; echo two", "echo three"],
        "max_concurrent": 1, "probe_s": 0.3}))
    q = res["queue"]
    states = [r["state"]["status"] for r in q["runs"]]
    assert states[0] == "running" and states[1:] == ["queued", "queued"]
    for r in q["runs"]:
        t = await wait_status(client, r["run_id"], {"succeeded", "failed", "lost"}, timeout=20)
        assert t["state"]["status"] == "succeeded"
    ends = [float((ssh_box / ".rgt" / "runs" / r["run_id"] / "ended_at").read_text()) for r in q["runs"]]
    assert ends == sorted(ends)


async def test_launch_fans_out_over_hosts(env, box, client, tmp_path) -> None:
    env.write_inventory({"a": {"destination": "testbox", "durable_root": str(tmp_path / "a")},
                         "dead": {"destination": "root@127.0.0.1:1"}})
    (tmp_path / "a").mkdir()
    res = structured(await client.call_tool("launch_detached", {"hosts": ["a", "dead"], "command": "true",
                                                                "probe_s": 20}))
    by = {o["host"]: o for o in res["outcomes"]}
    assert by["a"]["launch"]["state"]["status"] == "succeeded"
    assert by["dead"]["error"]["code"] == "HOST_UNREACHABLE"


async def test_list_runs_reads_the_box_and_reconciles_the_ledger(ssh_box, client) -> None:
    ok = await launch(client, command="true", probe_s=20)
    (ssh_box / ".rgt" / "runs" / "foreign-1").mkdir()
    (ssh_box / ".rgt" / "runs" / "foreign-1" / "run.json").write_text('{"run_id": "foreign-1", "command": "x"}')
    res = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    runs = {r["run_id"]: r for r in res["outcomes"][0]["runs"]["runs"]}
    assert runs[ok["run_id"]]["status"] == "succeeded" and runs[ok["run_id"]]["in_ledger"]
    assert runs["foreign-1"]["in_ledger"] is False and runs["foreign-1"]["status"] == "lost"


async def test_unreachable_box_is_an_error_never_a_job_status(env, client) -> None:
    env.write_inventory({"dead": {"destination": "root@127.0.0.1:1"}})
    text = error_text(await client.call_tool("tail_logs", {"host": "dead", "run_id": "r-1"}))
    assert "says nothing about jobs" in text or "network error" in text
