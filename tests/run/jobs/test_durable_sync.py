"""sync_to_durable for real: the wrapper copies a run's outputs from scratch to
<durable_root>/results/<run_id>/ after the command exits 0, verifies each copy, and a failed copy
reads `sync_failed` (never `succeeded`) in launch_detached, tail_logs and list_runs. Through a
real MCP client, on LocalHost and over the test sshd, with both engines."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.conftest import error_text, structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until

MAKE_OUTPUTS = "mkdir -p out/sub && printf 'weights' > out/best.pth && printf '{\"acc\": 0.9}' > 'out/sub/m 1.json'"


async def launch(client, box: Box, **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "workdir": str(box.work), "probe_s": 20, **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return outcome["launch"]


async def finished(client, run_id: str) -> dict:
    async def ended() -> dict | None:
        t = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run_id}))
        return t if t["state"]["status"] not in ("running", "queued") else None

    return await until(ended, timeout=30, interval=0.2, what=f"run {run_id} to end")


async def listed(client, run_id: str) -> dict:
    res = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    return next(r for r in res["outcomes"][0]["runs"]["runs"] if r["run_id"] == run_id)


@pytest.mark.parametrize("backend", ["shell", "tmux"])
async def test_exit_0_with_an_unwritable_durable_root_reads_sync_failed_everywhere(
        durable_box: Box, client, backend: str) -> None:
    # A regular file where the results directory belongs: no user, root included, can create it.
    (durable_box.durable / "results").write_text("not a directory")
    run = await launch(client, durable_box, command=MAKE_OUTPUTS, sync_to_durable=["out/*.pth"], backend=backend)
    tail = await finished(client, run["run_id"])
    for state in (tail["state"], run["state"]) if run["outcome"] == "exited_early" else (tail["state"],):
        assert state["status"] == "sync_failed" and state["exit_code"] == 0
        assert "cannot create" in state["sync"] and "best.pth" in state["sync"]
    row = await listed(client, run["run_id"])
    assert row["status"] == "sync_failed" and row["exit_code"] == 0 and "cannot create" in row["sync"]
    run_dir = Path(run["run_dir"])
    assert (run_dir / "exit_code").read_text() == "0\n"  # the command's own code is kept
    assert (run_dir / "sync_status").read_text().startswith("failed ")
    assert "sync_to_durable: failed" in tail["text"]
    assert (durable_box.work / "out" / "best.pth").read_bytes() == b"weights"  # scratch is untouched


async def test_a_good_sync_copies_each_output_and_verifies_it(durable_box: Box, client) -> None:
    run = await launch(client, durable_box, command=MAKE_OUTPUTS, sync_to_durable=["out/*.pth", "out/**/*.json"])
    tail = await finished(client, run["run_id"])
    assert tail["state"]["status"] == "succeeded" and "2 file(s)" in tail["state"]["sync"]
    dest = durable_box.durable / "results" / run["run_id"]
    assert (dest / "out" / "best.pth").read_bytes() == b"weights"
    assert (dest / "out" / "sub" / "m 1.json").read_bytes() == b'{"acc": 0.9}'
    assert not list(dest.rglob(".rgt-tmp*"))  # no temporary copy left behind
    recorded = {line.split("\t")[2]: line.split("\t")[0]
                for line in (Path(run["run_dir"]) / "sync_files").read_text().splitlines()}
    assert recorded == {p: hashlib.sha256((durable_box.work / p).read_bytes()).hexdigest()
                        for p in ("out/best.pth", "out/sub/m 1.json")}
    assert (await listed(client, run["run_id"]))["status"] == "succeeded"


async def test_a_glob_that_matches_nothing_is_sync_failed_and_named(durable_box: Box, client) -> None:
    run = await launch(client, durable_box, command=MAKE_OUTPUTS,
                       sync_to_durable=["out/*.pth", "out/best_metrics.json"])
    state = (await finished(client, run["run_id"]))["state"]
    assert state["status"] == "sync_failed"
    assert "glob 'out/best_metrics.json' matched no file" in state["sync"]
    assert (durable_box.durable / "results" / run["run_id"] / "out" / "best.pth").exists()  # the rest was copied


async def test_a_failing_command_is_failed_and_copies_nothing(durable_box: Box, client) -> None:
    run = await launch(client, durable_box, command=MAKE_OUTPUTS + " && exit 4", sync_to_durable=["out/*.pth"])
    state = (await finished(client, run["run_id"]))["state"]
    assert (state["status"], state["exit_code"], state["sync"]) == ("failed", 4, None)
    assert not (durable_box.durable / "results").exists()


async def test_the_source_root_is_the_output_root_and_the_job_knows_its_run_id(durable_box: Box, client) -> None:
    scratch = durable_box.work / "runs"
    write = 'mkdir -p "runs/$RGT_RUN_ID" && echo x > "runs/$RGT_RUN_ID/best.pth"'
    run = await launch(client, durable_box, command=write, output_root=str(scratch),
                       sync_to_durable=["{run_id}/best.pth"])
    state = (await finished(client, run["run_id"]))["state"]
    assert state["status"] == "succeeded", state
    assert (durable_box.durable / "results" / run["run_id"] / run["run_id"] / "best.pth").read_text() == "x\n"


@pytest.mark.parametrize("pattern", ["/etc/passwd", "../up/*.pth", "~/x"])
async def test_sync_globs_outside_the_source_root_are_refused(durable_box: Box, client, pattern: str) -> None:
    text = error_text(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "true", "sync_to_durable": [pattern]}))
    assert "[BAD_INPUT]" in text and ("relative to the root" in text or "climbs out" in text)
    assert not (durable_box.durable / ".rgt").exists()  # refused before anything touched the box


async def test_a_copy_whose_hash_differs_is_sync_failed_and_never_lands(durable_box: Box, client, tmp_path) -> None:
    # A cp that flips the first byte of its copy (a bad disk, a racing writer); the job's PATH
    # reaches the wrapper's copy step through env.sh.
    fake = tmp_path / "fakecp"
    fake.mkdir()
    (fake / "cp").write_text('#!/bin/sh\n/bin/cp "$@" || exit 1\nfor last; do :; done\n'
                             "printf X | dd of=\"$last\" bs=1 count=1 conv=notrunc 2>/dev/null\n")
    (fake / "cp").chmod(0o755)
    run = await launch(client, durable_box, command=MAKE_OUTPUTS, sync_to_durable=["out/*.pth"],
                       env={"PATH": f"{fake}:/usr/local/bin:/usr/bin:/bin"})
    state = (await finished(client, run["run_id"]))["state"]
    assert state["status"] == "sync_failed" and "sha256 differs after the copy" in state["sync"]
    dest = durable_box.durable / "results" / run["run_id"] / "out"
    assert not (dest / "best.pth").exists() and not list(dest.glob(".rgt-tmp*"))


async def test_a_run_that_asked_for_a_copy_but_recorded_no_outcome_is_sync_failed(durable_box: Box, client) -> None:
    run_dir = durable_box.durable / ".rgt" / "runs" / "by-hand-1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text('{"run_id": "by-hand-1", "command": "x"}')
    (run_dir / "sync_spec").write_text("/x\n/y\nbest.pth\n")
    (run_dir / "exit_code").write_text("0\n")
    (run_dir / "log").write_text("")
    state = (await finished(client, "by-hand-1"))["state"]
    assert state["status"] == "sync_failed" and "no sync_status was recorded" in state["sync"]
