"""Every failure-signature family, matched on a realistic log excerpt, with its route."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server.run.jobs.logs import utf8_safe_len
from mcp_server.run.jobs.signatures import SIGNATURES, progress_hint, scan

EXCERPTS = {
    "vram-oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                "of 79.15 GiB of which 1.06 GiB is free. Of the allocated memory 75.20 GiB is allocated by PyTorch",
    "host-oom": "epoch 1:  37%|███▋      | 370/1000 [04:11<07:08,  1.47it/s]\nKilled",
    "scheduler-oom": "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.batch. "
                     "Some of the step tasks have been OOM Killed.",
    "nan": "step 1400 | loss nan | lr 3.0e-04 | grad_norm inf",
    "scaler-resume": "AssertionError: No inf checks were recorded for this optimizer.",
    "nccl": "[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1882, OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=1800000) ran for 1800081 milliseconds",
    "collective-mismatch": "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running ALLREDUCE",
    "port-in-use": "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                   "address. port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: Address already in use",
    "unused-params": "RuntimeError: Expected to have finished reduction in the prior iteration "
                     "before starting a new one.",
    "xid": "[Tue Dec  1 10:02:11 2026] NVRM: Xid (PCI:0000:5d:00): 79, pid=2113510, name=python, "
           "GPU has fallen off the bus.",
    "cuda-triangle": "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "cuda-error": "RuntimeError: CUDA error: device-side assert triggered\n"
                  "CUDA kernel errors might be asynchronously reported",
    "disk-full": "RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 1827454272 vs 1827454160\n"
                 "OSError: [Errno 28] No space left on device",
    "truncated-ckpt": "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
    "shm": "RuntimeError: DataLoader worker (pid 4121) is killed by signal: Bus error. It is possible that "
           "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
    "crlf": "run_queue.sh: line 2: $'\\r': command not found",
    "tracker-off": "wandb: ERROR Run initialization has timed out after 90.0 sec.",
    "traceback": "Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    main()",
    "import-error": "ModuleNotFoundError: No module named 'timm'",
    "slurm-time-limit": "slurmstepd-localhost: error: *** JOB 10 ON localhost CANCELLED AT 2026-12-04T02:34:43 DUE TO "
                        "TIME LIMIT ***",
    "slurm-preempted": "slurmstepd: error: *** JOB 42 ON gpu-07 CANCELLED AT 2024-05-02T11:02:13 DUE TO PREEMPTION ***",
    "slurm-requeued": "slurmstepd-localhost: error: *** JOB 9 ON localhost CANCELLED AT 2026-12-04T04:41:44 DUE TO JOB "
                      "REQUEUE ***",
    "slurm-node-fail": "slurmstepd: error: *** JOB 77 ON n12 CANCELLED AT 2024-05-02T11:02:13 DUE TO NODE FAILURE ***",
    "slurmstepd-error": "slurmstepd: error: execve(): train.sh: Permission denied",
}


def test_every_signature_has_an_excerpt() -> None:
    assert {s.id for s in SIGNATURES} == set(EXCERPTS)


@pytest.mark.parametrize("sid", sorted(EXCERPTS))
def test_each_family_is_matched_with_its_line_meaning_and_route(sid) -> None:
    hits = {h.id: h for h in scan("step 10 loss 2.31\n" + EXCERPTS[sid] + "\nstep 11 loss 2.29\n")}
    assert sid in hits
    hit = hits[sid]
    assert hit.line and hit.meaning and hit.route.startswith("references://")


def test_healthy_training_output_matches_nothing() -> None:
    healthy = "\n".join(f"epoch 3 step {i} loss {2.3 - i / 1000:.4f} lr 3e-4 grad_norm 0.8 | 12.1 it/s"
                        for i in range(200))
    assert scan(healthy) == []


def test_a_vram_oom_is_not_mistaken_for_a_host_oom() -> None:
    ids = {h.id for h in scan(EXCERPTS["vram-oom"])}
    assert "vram-oom" in ids and "host-oom" not in ids


def test_progress_hint_reads_epochs_steps_and_tqdm() -> None:
    assert progress_hint("Epoch 3/100 train loss 0.5") == "Epoch 3/100 train loss 0.5"
    assert "450/1000" in progress_hint(" 45%|████▌     | 450/1000 [00:30<00:36, 15.21it/s]")
    assert progress_hint("nothing here") is None


def test_a_window_never_ends_inside_a_utf8_character() -> None:
    data = "abc é ✓ 🎉".encode()
    for cut in range(len(data) + 1):
        keep = utf8_safe_len(data[:cut])
        data[:keep].decode("utf-8")  # never raises
        assert keep >= cut - 3



SLURM = Path(__file__).parents[2] / "fixtures" / "slurm"


def test_slurm_end_lines_captured_from_a_real_slurm_are_named() -> None:
    timeout = {h.id: h for h in scan((SLURM / "time-limit.out").read_text())}
    assert "slurm-time-limit" in timeout and "DUE TO TIME LIMIT" in timeout["slurm-time-limit"].line
    assert timeout["slurm-time-limit"].route == "references://run-remote/monitoring#slurm-ends"
    assert "slurmstepd-error" not in timeout, "the end line is the time-limit signature, not a generic error"
    cancelled = {h.id for h in scan((SLURM / "scancel.out").read_text())}
    assert not cancelled & {"slurm-time-limit", "slurm-preempted", "slurm-node-fail"}


# Preemption and node failure cannot be produced on one test node: these lines follow the format of
# the captured ones above, with Slurm's documented reasons.
@pytest.mark.parametrize(("line", "sid"), [
    ("slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2024-05-02T11:02:13 DUE TO PREEMPTION ***",
     "slurm-preempted"),
    ("slurmstepd: error: *** JOB 77 ON n12 CANCELLED AT 2024-05-02T11:02:13 DUE TO NODE FAILURE ***",
     "slurm-node-fail"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=1234.batch. Some of the step tasks have been "
     "OOM Killed.", "slurmstepd-error"),
])
def test_other_slurm_lines_are_named(line: str, sid: str) -> None:
    assert sid in {h.id for h in scan(line + "\n")}


def test_a_requeue_line_captured_from_a_real_slurm_is_named_and_not_a_generic_error() -> None:
    hits = {h.id: h for h in scan((SLURM / "requeue.out").read_text())}
    assert "slurm-requeued" in hits and hits["slurm-requeued"].route == "references://run-remote/slurm#requeue"
    assert "slurmstepd-error" not in hits
