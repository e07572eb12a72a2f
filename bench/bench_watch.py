"""Run watchers (issue 14, item 3), over the loopback sshd: 100 subscribed runs spread over 8
hosts (8 ssh aliases of the one test box, each its own host to the server).

1. Round trips per poll interval: the watchers run for a few intervals; every host-level
   command is counted. Target: <= 8 per interval (one per host), whatever the number of runs.
2. One poll cycle of the 8 hosts vs 8 bare round trips, as a ratio.
"""

from __future__ import annotations

import asyncio
import os
import time

from _common import Bench, median_s, report
from bench_list_runs import craft

from mcp_server.app import App
from mcp_server.settings import Settings

HOSTS, RUNS, INTERVAL, INTERVALS = 8, 100, 0.5, 6


async def main() -> None:
    b = Bench(aliases=HOSTS)
    published: list[str] = []

    async def publish(uri: str) -> None:
        published.append(uri)

    app = App(Settings.from_env({**os.environ, "RGT_WATCH_INTERVAL": str(INTERVAL)}), publish)
    try:
        craft(b.durable / ".rgt" / "runs", RUNS)
        run_ids = sorted(p.name for p in (b.durable / ".rgt" / "runs").iterdir())
        hosts = [await app._open_host(f"box{i}") for i in range(HOSTS)]
        counts = [0] * HOSTS
        for i, (host, _) in enumerate(hosts):
            real = host.run

            async def counted(*a, _i=i, _real=real, **k):
                counts[_i] += 1
                return await _real(*a, **k)
            host.run = counted
        uris = [f"runs://box{i % HOSTS}/{rid}" for i, rid in enumerate(run_ids)]
        app.watch.max_factor = 1.0  # no back-off here: count the busiest case
        taken = app.watch.add(uris)
        await asyncio.sleep(INTERVAL * INTERVALS + INTERVAL / 2)
        polls = max(app.watch.polls(f"box{i}") for i in range(HOSTS))
        app.watch.remove(taken)
        per_interval = sum(counts) / polls
        ok = "OK" if per_interval <= HOSTS else "MISSED"
        print(f"{f'round trips per interval, {RUNS} watched runs on {HOSTS} hosts':60}  {per_interval:8.2f} "
              f"(total {sum(counts)} over {polls} poll intervals)  target <= {HOSTS}  {ok}")
        w = app.watch
        from mcp_server.run.jobs.watch import _HostWatch

        states = [_HostWatch() for _ in range(HOSTS)]
        for i, st in enumerate(states):
            st.run_of = {u: u.rsplit("/", 1)[1] for u in uris if u.startswith(f"runs://box{i}/")}
        cycle = await median_s(lambda: asyncio.gather(*(w.poll(f"box{i}", states[i]) for i in range(HOSTS))), 9)
        bare = await median_s(lambda: asyncio.gather(*(h.run("true") for h, _ in hosts)), 9)
        report(f"one poll cycle of {HOSTS} hosts vs {HOSTS} bare round trips", cycle, bare, "(ratio)", True)
        print(f"published {len(published)} updates (runs were finished before watching: expect 0)")
    finally:
        await app.close()
        b.close()


if __name__ == "__main__":
    start = time.monotonic()
    asyncio.run(main())
    print(f"bench time {time.monotonic() - start:.0f} s")
