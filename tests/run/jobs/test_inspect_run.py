"""inspect_run on a real job on the test box (over sshd): CPU-bound worker processes that grow
their memory steadily, while a fake nvidia-smi reports an idle GPU with little VRAM used (the
values of the captured idle H100 row in tests/fixtures/nvidia-smi-samples.txt, in this query's
column order: there is no GPU here). The verdicts: data-bound, spare VRAM, RAM creep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_server.run.jobs.inspect import Sample, judge
from tests.conftest import error_text, structured

JOB = """python3 - <<'PY'
import multiprocessing as mp, time
def burn():
    end = time.time() + 60
    while time.time() < end:
        sum(range(10000))
def grow():
    keep, end = [], time.time() + 60
    while time.time() < end:
        keep.append(bytearray(4_000_000)); time.sleep(0.1)
workers = [mp.Process(target=burn) for _ in range({n})] + [mp.Process(target=grow)]
[w.start() for w in workers]; [w.join() for w in workers]
PY"""


@pytest.fixture
def job_box(env, box, tmp_path) -> Path:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "profile": "generic-ssh", "durable_root": str(durable)}})
    fake = box.fakebin / "nvidia-smi"
    fake.write_text('#!/bin/sh\ncase "$*" in *utilization.memory*) echo "0, 0, 0, 1024, 81559, 69.87";;'
                    ' *) exit 2;; esac\n')
    fake.chmod(0o755)
    yield durable
    fake.unlink(missing_ok=True)


async def test_a_cpu_bound_job_on_an_idle_gpu_reads_data_bound_with_spare_vram_and_ram_creep(job_box, client) -> None:
    launched = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": JOB.format(n=(os.cpu_count() or 1) + 1), "probe_s": 2}))
    run_id = launched["outcomes"][0]["launch"]["run_id"]
    try:
        res = structured(await client.call_tool("inspect_run", {"host": "gpu1", "run_id": run_id, "window_s": 8,
                                                                "image": False}))
        kinds = {v["kind"]: v for v in res["verdicts"]}
        assert len(res["samples"]) == 8 and res["samples"][-1]["procs"] >= 3
        assert {"data_bound", "spare_vram", "ram_creep"} <= set(kinds), res["verdicts"]
        assert kinds["data_bound"]["route"] == "references://training/throughput-profiling"
        assert res["samples"][-1]["rss_mib"] > res["samples"][0]["rss_mib"] + 50
        assert res["samples"][-1]["vram_total_mib"] == 81559
        drawn = await client.call_tool("inspect_run", {"host": "gpu1", "run_id": run_id, "window_s": 2})
        assert [c.mime_type for c in drawn.content if getattr(c, "type", "") == "image"] == ["image/png"]
    finally:
        await client.call_tool("cancel_run", {"host": "gpu1", "run_id": run_id, "grace_s": 1})


async def test_an_ended_run_is_refused_with_the_next_step(job_box, client) -> None:
    launched = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true",
                                                                      "probe_s": 2}))
    run_id = launched["outcomes"][0]["launch"]["run_id"]
    res = await client.call_tool("inspect_run", {"host": "gpu1", "run_id": run_id, "window_s": 2})
    assert res.is_error and "not live" in error_text(res) and "tail_logs" in error_text(res)


def sample(t: float, rss: float, avail: float | None = None, cg: float | None = None) -> Sample:
    return Sample(t=t, cpu_pct=50.0, rss_mib=rss, procs=2, cgroup_mib=cg, avail_gib=avail, inodes_free=None,
                  gpu_util_pct=95.0, gpu_mem_util_pct=40.0, vram_used_mib=70000.0, vram_total_mib=81559.0,
                  power_w=650.0)


def test_near_the_memory_limit_and_a_disk_that_fills_within_hours() -> None:
    samples = [sample(i, rss=7500.0, cg=7600.0, avail=10.0 - 0.01 * i) for i in range(10)]
    kinds = {v.kind: v for v in judge(samples, cpus=8, limit_mib=8192.0, billed=True)}
    assert set(kinds) == {"memory_wall", "disk_filling"}
    assert "7600 MiB of a 8192 MiB limit" in kinds["memory_wall"].evidence
    assert "gone in about" in kinds["disk_filling"].evidence


def test_a_busy_healthy_run_gets_nothing_to_act_on() -> None:
    samples = [sample(i, rss=3000.0, avail=500.0) for i in range(10)]
    assert [v.kind for v in judge(samples, cpus=8, limit_mib=64000.0, billed=True)] == ["healthy"]
