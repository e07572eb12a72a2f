"""Round trips per warm tool call over a far link (issue 33): every call goes through a real MCP
client to the server, which reaches the loopback sshd through a relay that holds each chunk 50 ms
each way (a box 100 ms away). A call's round trips = (its median time to the far box - to the
same box on loopback) / the link's round trip, so the server's own work is not counted.
Baseline in the same run: raw asyncssh `conn.run("true")` on an open connection through the same
relay (what one exec channel costs). Targets: tail_logs, wait_for_run (ended run), list_runs,
a second launch_detached, cancel_run (ended run) <= 2.5 RTT; verify_artifacts of one small file
<= 8 RTT. Run with RGT_SSH_COMMAND_CHANNEL=0 for the figures without the command channel.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import Bench, median_s
from mcp import Client

from mcp_server.quiet_imports import quiet_known_warnings
from mcp_server.server import build_server
from mcp_server.settings import Settings

with quiet_known_warnings():
    import asyncssh

ONE_WAY_S = 0.050
RTT = 2 * ONE_WAY_S
SAMPLES = 9


async def rtts(fn: Callable[[str], Awaitable[object]]) -> float:
    """Round trips a warm call makes: (its time to the far box - its time to the loopback box) /
    the added round-trip time, so the server's own work is not counted as round trips."""
    far = await median_s(lambda: fn("far"), SAMPLES, warmup=2)
    return (far - await median_s(lambda: fn("box0"), SAMPLES, warmup=2)) / RTT


def ok(r: Any) -> Any:
    assert not r.is_error, r.content
    return r.structured_content


async def main() -> None:
    b = Bench()
    link = await b.delayed_alias("far", ONE_WAY_S)
    small = b.durable / "out" / "metrics.json"
    small.parent.mkdir()
    small.write_text('{"acc": 0.91}\n')
    try:
        async with asyncssh.connect("127.0.0.1", link.port, username="root", client_keys=[str(b.sshd.clientkey)],
                                    known_hosts=str(b.root / "known_hosts_far")) as conn:
            far = await median_s(lambda: conn.run("true", check=True), SAMPLES, warmup=2)
        async with asyncssh.connect("127.0.0.1", b.sshd.port, username="root", client_keys=[str(b.sshd.clientkey)],
                                    known_hosts=str(b.sshd.known_hosts)) as conn:
            raw = (far - await median_s(lambda: conn.run("true", check=True), SAMPLES, warmup=2)) / RTT
        async with Client(build_server(Settings.from_env()), read_timeout_seconds=120) as c:
            async def call(name: str, args: dict[str, Any]) -> Any:
                return ok(await c.call_tool(name, args))

            runs = {}
            for host in ("box0", "far"):
                launched = await call("launch_detached", {"host": host, "command": "echo hello; sleep 0.2",
                                                          "probe_s": 0})
                runs[host] = launched["outcomes"][0]["launch"]["run_id"]
                await call("wait_for_run", {"run_id": runs[host], "host": host, "timeout_s": 20})

            def on_run(name: str) -> Callable[[str], Awaitable[object]]:
                return lambda host: call(name, {"run_id": runs[host], "host": host})
            figures = {
                "tail_logs": await rtts(on_run("tail_logs")),
                "wait_for_run (ended run)": await rtts(on_run("wait_for_run")),
                "list_runs": await rtts(lambda host: call("list_runs", {"host": host})),
                "launch_detached (second)": await rtts(lambda host: call(
                    "launch_detached", {"host": host, "command": "true", "probe_s": 0})),
                "cancel_run (ended run)": await rtts(on_run("cancel_run")),
            }
            verify = await rtts(lambda host: call("verify_artifacts", {
                "host": host, "root": str(small.parent), "roster": ["metrics.json"],
                "dest": f"pulled-{time.monotonic_ns()}"}))
        channel = os.environ.get("RGT_SSH_COMMAND_CHANNEL", "1") != "0"
        print(f"warm calls over a {RTT * 1e3:.0f} ms round-trip relay (command channel "
              f"{'on' if channel else 'off'}); raw asyncssh conn.run('true'): {raw:.1f} RTT")
        for name, value in figures.items():
            print(f"  {name:30} {value:5.1f} RTT  target <= 2.5  {'OK' if value <= 2.5 else 'MISSED'}")
        print(f"  {'verify_artifacts (one file)':30} {verify:5.1f} RTT  target <= 8    "
              f"{'OK' if verify <= 8 else 'MISSED'}")
    finally:
        await link.close()
        b.close()


if __name__ == "__main__":
    asyncio.run(main())
