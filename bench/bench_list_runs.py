"""list_runs at scale (issue 14, item 7), over the loopback sshd.

1. list_runs (one page of 50, newest first) over 1000 run dirs: target <= 0.3 s.
2. Cost per run of the one-pass scan vs the old per-run shell loop (HEAD's job_list.sh for each
   engine plus job_status.sh over every run, fetched with `git show`), both measured here as the
   slope between 100 and 1000 runs: target <= 1/10.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

from _common import ROOT, Bench, median_s, report

from mcp_server.app import App
from mcp_server.hosts.commands import quote
from mcp_server.run.jobs.listing import list_runs
from mcp_server.run.jobs.rundir import runs_dir_path
from mcp_server.settings import Settings

OLD_REV = "4237744"  # the last commit with the per-run shell loop


def old_script(name: str) -> str:
    return subprocess.run(["git", "show", f"{OLD_REV}:mcp_server/scripts/{name}.sh"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


def craft(runs_dir, n: int) -> None:
    if runs_dir.exists():
        shutil.rmtree(runs_dir)
    runs_dir.mkdir(parents=True)
    base = 1_700_000_000.0
    for i in range(n):
        d = runs_dir / f"exp{(i * 7919) % n:04d}-{i:06x}"
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"run_id": d.name, "name": d.name[:7], "backend": "shell",
                                                "command": "python train.py", "started_at": base + i}, indent=2))
        (d / "log").write_text("step=1 loss=0.5\n")
        (d / "exit_code").write_text("0\n")
        (d / "ended_at").write_text(f"{base + i + 1:.0f}\n")


def old_loop(runs: str, n: int) -> str:
    """What list_runs ran before: each engine's listing loop, then the state of every run."""
    listing = old_script("job_list")
    lists = "".join(f"set -- {quote(runs)} {engine} shell {n}\n{listing}\n" for engine in ("shell", "tmux"))
    dirs = f'set -- "{runs}"/*/\n'
    return lists + old_script("job_state") + "\n" + dirs + old_script("job_status")


async def main() -> None:
    b = Bench()
    app = App(Settings.from_env())
    try:
        spec = app.pool.spec("box0")
        host = await app.pool.host(spec)
        runs = runs_dir_path(str(b.durable))
        timings: dict[tuple[str, int], float] = {}
        for n in (100, 1000):
            craft(b.durable / ".rgt" / "runs", n)
            timings["new", n] = await median_s(lambda: list_runs(host, spec, app.ledger, limit=50), 9)
            script = old_loop(runs, n)
            out = await host.run(script, timeout=120)
            assert out.text.count("\n") >= 2 * n, "the old loop did not see every run"
            timings["old", n] = await median_s(lambda s=script: host.run(s, timeout=120), 5, warmup=1)
        t_raw = await median_s(lambda: host.run("true"), 20)
        report("list_runs page of 50 over 1000 runs vs a bare round trip", timings["new", 1000], t_raw,
               "<= 0.3 s", timings["new", 1000] <= 0.3)
        new_per_run = (timings["new", 1000] - timings["new", 100]) / 900
        old_per_run = (timings["old", 1000] - timings["old", 100]) / 900
        report("cost per run: one-pass scan vs the old per-run loop", new_per_run, old_per_run,
               "<= 0.1x", new_per_run <= 0.1 * old_per_run)
        print(f"old loop over 1000 runs {timings['old', 1000]:.2f} s; list_runs over 1000 runs "
              f"{timings['new', 1000]:.3f} s; per run {new_per_run * 1e6:.0f} us vs {old_per_run * 1e6:.0f} us")
    finally:
        await app.close()
        b.close()


if __name__ == "__main__":
    start = time.monotonic()
    asyncio.run(main())
    print(f"bench time {time.monotonic() - start:.0f} s")
