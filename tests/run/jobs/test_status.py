"""The run-state line `rgt_state` prints on the box, and the one pair that reads and writes it."""

from __future__ import annotations

import pytest

from mcp_server.run.jobs.status import StateLine, lost_evidence, parse_state

LINES = [
    "exited\t0\t1700000000\t10\t1700000000",
    "exited\t137\t-\t10\t1700000000",
    "alive\t4242\t-\t10\t1700000000",
    "queued\tqueue-q-20260101-000000-abcdef\t-\t0\t1700000000",
    "gone\t4242\t-\t-\t-",
    "gone\t-\t-\t-\t-",
]


def test_status_comes_from_the_process_and_the_exit_file() -> None:
    assert parse_state("exited\t0\t1700000000\t10\t1700000000").status == "succeeded"
    failed = parse_state("exited\t137\t-\t10\t1700000000")
    assert failed.status == "failed" and failed.exit_code == 137
    assert parse_state("alive\t4242\t-\t10\t1700000000").status == "running"
    assert parse_state("gone\t4242\t-\t10\t1700000000").status == "lost"


@pytest.mark.parametrize("line", LINES)
def test_format_writes_back_exactly_what_parse_read(line: str) -> None:
    assert StateLine.parse(line).format() == line


@pytest.mark.parametrize("line", LINES)
def test_a_line_carried_in_key_value_output_with_bars_reads_the_same(line: str) -> None:
    assert StateLine.parse(line.replace("\t", "|")) == StateLine.parse(line)
    assert parse_state(line.replace("\t", "|") + "\n") == parse_state(line)


def test_every_field_of_a_line_lands_in_the_state() -> None:
    state = parse_state("exited\t3\t1700000100\t2048\t1700000099")
    assert (state.status, state.exit_code, state.ended_at, state.log_size, state.log_mtime) == (
        "failed", 3, 1700000100.0, 2048, 1700000099.0)
    queued = parse_state("queued\tqueue-a-1\t-\t0\t1700000000")
    assert queued.status == "queued" and "queue-a-1" in queued.evidence[0]


@pytest.mark.parametrize("line", ["", "gone", "alive\tnot-a-pid", "exited\tnot-a-code", "garbage\t1\t2\t3\t4"])
def test_a_short_or_garbled_line_reads_as_lost_never_running(line: str) -> None:
    state = parse_state(line)
    assert state.status == "lost" and state.exit_code is None


def test_lost_evidence_points_at_reboot_oom_or_hard_kill() -> None:
    reboot = lost_evidence({"boot_then": "a", "boot_now": "b", "uptime": "300"}, [])
    assert "rebooted" in reboot[0]
    oom = lost_evidence({"boot_then": "a", "boot_now": "a", "oom_then": "0", "oom_now": "2"}, [])
    assert "oom_kill counter rose from 0 to 2" in oom[0]
    hard = lost_evidence({"boot_then": "a", "boot_now": "a", "oom_then": "0", "oom_now": "0"}, [])
    assert "killed hard" in hard[0]


SYNC_OK = "ok 2 file(s), 12 bytes copied to /d/results/r-1, each verified by size and sha256"
SYNC_FAILED = "failed 1 problem(s) copying to /d/results/r|1: out/best.pth: cannot create /d/results: Not a directory"


def test_exit_0_whose_copy_to_the_durable_root_failed_is_sync_failed_never_succeeded() -> None:
    state = parse_state(f"exited\t0\t1700000000\t10\t1700000000\t{SYNC_FAILED}")
    assert (state.status, state.exit_code) == ("sync_failed", 0)
    assert state.sync == SYNC_FAILED.removeprefix("failed ")  # a `|` in a path stays in the reason
    ok = parse_state(f"exited\t0\t1700000000\t10\t1700000000\t{SYNC_OK}")
    assert ok.status == "succeeded" and ok.sync is not None and ok.sync.startswith("2 file(s)")


@pytest.mark.parametrize("sync", [SYNC_OK, SYNC_FAILED])
def test_a_sync_field_survives_format_and_the_bar_separated_form(sync: str) -> None:
    line = f"exited\t0\t1700000000\t10\t1700000000\t{sync}"
    assert StateLine.parse(line).format() == line
    assert parse_state(line.replace("\t", "|")) == parse_state(line)


@pytest.mark.parametrize("sync", ["garbage", "failed", "okay 1 file", "failed ok"])
def test_any_sync_field_but_ok_reads_as_sync_failed(sync: str) -> None:
    assert parse_state(f"exited\t0\t-\t10\t1700000000\t{sync}").status == "sync_failed"
