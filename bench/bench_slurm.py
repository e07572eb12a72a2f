"""The Slurm engine (issue 13) on a private single-node Slurm started here (as root, like the
tests), the login node reached over the loopback sshd.

1. Status of 200 Slurm runs in one call (one squeue for the live jobs, in one round trip) vs one
   round trip per run. The issue's baseline is `sacct -j` per run; this Slurm has no accounting
   (as many small clusters), so the per-run baseline is `scontrol show job -o <id>`, which is what
   a per-run poll falls back to there. Target: >= 20x.
2. Submit latency: launch_detached's domain call with backend slurm vs a bare `sbatch --parsable`
   over the same connection. Target: <= 1.5x. A launch in a place whose facts are remembered is
   one round trip (the start: run dir + sbatch; launch_facts.py), the first one there two. Measured
   on loopback, where what the start does on the box (forks, writes) is all there is to see, and
   through a relay adding 10 ms each way (a cluster 20 ms away), where the round trips dominate as
   they do for users.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from _common import Bench, median_s, report

from mcp_server.app import App
from mcp_server.hosts.commands import quote
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.launch import LaunchRequest, launch
from mcp_server.settings import Settings
from tests.support.slurm import Slurm, missing

RUNS = 200


def submit_jobs(runs_dir: Path, n: int) -> list[str]:
    """n real pending/running jobs, each with a run dir that names it (as the engine leaves them)."""
    ids = []
    for i in range(n):
        out = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 600"], check=True,
                             capture_output=True, text=True).stdout.strip().split(";")[0]
        d = runs_dir / f"bench-{i:04d}"
        d.mkdir(parents=True)
        (d / "slurm_job_id").write_text(out + "\n")
        (d / "run.json").write_text(json.dumps({"run_id": d.name, "backend": "slurm", "started_at": time.time()}))
        ids.append(out)
    return ids


async def submit_ratio(app: App, alias: str, label: str, work: Path) -> None:
    spec = app.pool.spec(alias)
    host = await app.pool.host(spec)
    req = LaunchRequest(command="true", backend="slurm", probe_s=0, workdir=str(work))
    t_launch = await median_s(lambda: launch(host, spec, req, ledger=None, redactor=app.redactor), 10)
    t_bare = await median_s(lambda: host.run("sbatch --parsable -o /dev/null --wrap true"), 10)
    report(f"submit ({label}): launch (backend slurm) vs a bare sbatch, same connection", t_launch, t_bare,
           "<= 1.5x", t_launch <= 1.5 * t_bare)


async def main() -> None:
    why = missing()
    if why:
        print(f"skipped: {why}")
        return
    cluster = Slurm(Path(tempfile.mkdtemp(prefix="rgt-slurm-bench-")))
    cluster.start()
    os.environ["SLURM_CONF"] = str(cluster.conf)
    os.environ["RGT_SLURM_POLL"] = "0"  # measure the full query (squeue + accounting), not the run-dir-only read
    b = Bench()
    b.sshd.stop()
    config = b.sshd.root / "sshd_config"
    config.write_text(config.read_text().replace("SetEnv HOME=", f"SetEnv SLURM_CONF={cluster.conf} HOME="))
    b.sshd.start()
    link = await b.delayed_alias("wan", 0.010)
    app = App(Settings.from_env())
    try:
        spec = app.pool.spec("box0")
        host = await app.pool.host(spec)
        runs_dir = b.durable / ".rgt" / "runs"
        ids = submit_jobs(runs_dir, RUNS)
        dirs = [str(runs_dir / f"bench-{i:04d}") for i in range(RUNS)]
        engine = ENGINES["slurm"]
        states = await engine.status(host, dirs)
        assert {s.status for s in states} <= {"queued", "running"}, {s.status for s in states}

        async def one_by_one() -> None:
            for job_id in ids:
                await host.run(f"scontrol show job -o {quote(job_id)}")
        t_one = await median_s(lambda: engine.status(host, dirs), 5)
        t_each = await median_s(one_by_one, 3, warmup=1)
        report(f"status of {RUNS} Slurm runs: one call vs one scontrol per run", t_one, t_each, ">= 20x",
               t_each >= 20 * t_one)
        print(f"  one call {t_one * 1e3:.0f} ms, per-run polling {t_each * 1e3:.0f} ms: {t_each / t_one:.0f}x faster")
        subprocess.run(["scancel", "--user", "root"], check=False)
        work = b.root / "work"
        work.mkdir()
        for alias, label in (("box0", "loopback"), ("wan", "20 ms RTT")):
            await submit_ratio(app, alias, label, work)
    finally:
        subprocess.run(["scancel", "--user", "root"], check=False)
        await app.close()
        await link.close()
        b.close()
        cluster.stop()


if __name__ == "__main__":
    start = time.monotonic()
    asyncio.run(main())
    print(f"bench time {time.monotonic() - start:.0f} s")
