"""inspect_run on a real job on the test box (over sshd): CPU-bound worker processes that grow
their memory steadily, while a fake nvidia-smi (there is no GPU here) replays, one sample per
call, a `--query-gpu ... -l 1` sequence captured on a real mostly idle GTX 1650 SUPER
(tests/fixtures/gpu/loop-530-gtx1650super-query-l1.txt). The verdicts: data-bound, spare VRAM,
RAM creep; the sampled GPU series is the capture's, in order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_server.run.jobs.inspect import Sample, disk_rates, judge
from tests.conftest import error_text, structured
from tests.support.fakegpu import capture

LOOP = capture("loop-530-gtx1650super-query-l1")
# The capture's query has no memory.used or memory.total, so those two columns are filled: total
# with the GTX 1650 SUPER's 4 GiB of VRAM (4096 MiB, as nvidia-smi prints a 4 GiB board), used
# with a constant 1024 MiB (a made-up figure: the spare-VRAM verdict rests on it, not on the
# capture). index, utilization.gpu, utilization.memory and power.draw are the capture's own.
FILLED_USED_MIB, FILLED_TOTAL_MIB = 1024, 4096


def replay_rows() -> list[str]:
    """The capture's samples in job_inspect.sh's query order, as `--format=csv,noheader,nounits` prints them."""
    header, *rows = LOOP.text.strip().splitlines()
    col = {name.split(" [")[0]: i for i, name in enumerate(header.split(", "))}
    out = []
    for row in rows:
        f = [v.split(" ")[0] for v in row.split(", ")]
        out.append(", ".join([f[col["index"]], f[col["utilization.gpu"]], f[col["utilization.memory"]],
                              str(FILLED_USED_MIB), str(FILLED_TOTAL_MIB), f[col["power.draw"]]]))
    return out


def captured(column: str) -> list[float]:
    i = {"utilization.gpu": 1, "utilization.memory": 2, "power.draw": 5}[column]
    return [float(r.split(", ")[i]) for r in replay_rows()]

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
    fake, rows, count = box.fakebin / "nvidia-smi", box.fakebin / "replay.csv", box.fakebin / "replay.n"
    rows.write_text("\n".join(replay_rows()) + "\n")
    count.write_text("0\n")
    # Each sampling call prints the next captured sample; past the last one it starts over, as a
    # steady run would keep printing the same pattern.
    fake.write_text(f'#!/bin/sh\ncase "$*" in *utilization.memory*) ;; *) exit 2;; esac\n'
                    f'n=$(cat {count}); total=$(wc -l < {rows})\n'
                    f'sed -n "$((n % total + 1))p" {rows}\necho $((n + 1)) > {count}\n')
    fake.chmod(0o755)
    yield durable
    for f in (fake, rows, count):
        f.unlink(missing_ok=True)


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
        series = [(s["gpu_util_pct"], s["gpu_mem_util_pct"], s["power_w"]) for s in res["samples"]]
        expected = list(zip(captured("utilization.gpu"), captured("utilization.memory"), captured("power.draw"),
                            strict=True))
        assert series == [expected[i % len(expected)] for i in range(8)]
        assert "memory controller" in kinds["data_bound"]["evidence"]
        assert "VRAM at most 25% used" in kinds["spare_vram"]["evidence"]
        assert res["samples"][-1]["vram_total_mib"] == FILLED_TOTAL_MIB
        assert res["disk"]["log_write_bytes_per_s"] is not None and res["disk"]["fill_bytes_per_s"] is not None
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


def sample(t: float, rss: float, avail: float | None = None, cg: float | None = None, log: int | None = None) -> Sample:
    return Sample(t=t, cpu_pct=50.0, rss_mib=rss, procs=2, cgroup_mib=cg, avail_gib=avail, inodes_free=None,
                  log_bytes=log, gpu_util_pct=95.0, gpu_mem_util_pct=40.0, vram_used_mib=70000.0,
                  vram_total_mib=81559.0, power_w=650.0)


def test_near_the_memory_limit_and_a_disk_that_fills_within_hours() -> None:
    samples = [sample(i, rss=7500.0, cg=7600.0, avail=10.0 - 0.01 * i) for i in range(10)]
    kinds = {v.kind: v for v in judge(samples, cpus=8, limit_mib=8192.0, billed=True)}
    assert set(kinds) == {"memory_wall", "disk_filling"}
    assert "7600 MiB of a 8192 MiB limit" in kinds["memory_wall"].evidence
    # 0.01 GiB/s off 9.91 GiB left at the last sample: 991 s
    assert disk_rates(samples).full_eta_s == pytest.approx(991.0)
    assert "full in about 0.3 h" in kinds["disk_filling"].evidence
    assert "10.2 MiB/s where it writes" in kinds["disk_filling"].evidence


def test_a_slow_fill_is_measured_but_not_flagged_and_the_log_rate_is_reported() -> None:
    # 1 MiB/s off 500 GiB: about 145 h, past the 6 h horizon
    samples = [sample(i, rss=3000.0, avail=500.0 - i / 1024, log=4096 * i) for i in range(10)]
    rates = disk_rates(samples)
    assert rates.fill_bytes_per_s == pytest.approx(2**20) and rates.log_write_bytes_per_s == pytest.approx(4096)
    assert rates.full_eta_s == pytest.approx((500.0 - 9 / 1024) * 1024)
    kinds = judge(samples, cpus=8, limit_mib=64000.0, billed=True)
    assert [v.kind for v in kinds] == ["healthy"] and "log written at 4 KiB/s" in kinds[0].evidence


def test_a_busy_healthy_run_gets_nothing_to_act_on() -> None:
    samples = [sample(i, rss=3000.0, avail=500.0) for i in range(10)]
    assert [v.kind for v in judge(samples, cpus=8, limit_mib=64000.0, billed=True)] == ["healthy"]
