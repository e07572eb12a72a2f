"""Run benchmarks (issue: launch_detached / tail_logs).

1. tail_logs of the last 64 KiB of a 2 GiB log vs of a 1 MiB log (target ratio <= 1.2):
   the cost must not depend on the log's size.
2. tail_logs last 64 KiB vs raw `tail -c 65536` over the same pooled connection (<= 1.5x).
3. launch_detached with probe_s=0 vs a raw `setsid -f nohup ...` over an open connection (report).
"""

from __future__ import annotations

import asyncio

from _common import Bench, median_s, report

from mcp_server.app import App
from mcp_server.hosts.commands import quote
from mcp_server.run.jobs.launch import LaunchRequest, launch
from mcp_server.run.jobs.logs import tail_logs
from mcp_server.settings import Settings

CHUNK = (b"step 1234 loss 0.4321 lr 3.0e-04 grad_norm 0.91 | 15.2 it/s\n" * 18000)[: 1 << 20]


def write_log(path, size: int) -> None:
    with open(path, "wb") as f:
        for _ in range(size // len(CHUNK)):
            f.write(CHUNK)


async def main() -> None:
    b = Bench()
    try:
        small, big = b.durable / "small.log", b.durable / "big.log"  # tail_logs reads under the roots only
        write_log(small, 1 << 20)
        write_log(big, 2 << 30)
        app = App(Settings.from_env())
        spec = app.pool.spec("box0")
        host = await app.pool.host(spec)

        def tool(p):
            return lambda: tail_logs(host, spec, redactor=app.redactor, path=str(p), max_bytes=65536)

        t_small = await median_s(tool(small), 50)
        t_big = await median_s(tool(big), 50)
        report("tail_logs 64 KiB of a 2 GiB log vs of a 1 MiB log", t_big, t_small, "<= 1.2x", t_big <= 1.2 * t_small)
        conn = await host.connection()  # type: ignore[attr-defined]
        t_raw = await median_s(lambda: conn.run(f"tail -c 65536 {quote(str(big))}"), 50)
        report("tail_logs 64 KiB (2 GiB log) vs raw tail -c 65536", t_big, t_raw, "<= 1.5x", t_big <= 1.5 * t_raw)

        req = LaunchRequest(command="sleep 0.2", probe_s=0)
        t_launch = await median_s(lambda: launch(host, spec, req, ledger=app.ledger, redactor=app.redactor), 20)
        t_rawlaunch = await median_s(lambda: conn.run(
            f"cd {quote(str(b.durable))} && setsid -f nohup sleep 0.2 </dev/null >/dev/null 2>&1"), 20)
        report("launch_detached probe_s=0 vs raw setsid -f nohup", t_launch, t_rawlaunch, "<= 3x",
               t_launch <= 3 * t_rawlaunch)
        await app.close()
    finally:
        (b.durable / "big.log").unlink(missing_ok=True)
        b.close()


if __name__ == "__main__":
    asyncio.run(main())
