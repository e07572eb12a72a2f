"""Host-layer benchmarks (issue: foundation).

1. Warm tool-call overhead: the lightest tool (list_runs on a box with no runs: one remote
   command that forks nothing) through an in-memory MCP client on a pooled connection, vs raw
   asyncssh `conn.run("true")` on an open connection (target <= 1.5x) and vs OpenSSH multiplexed `ssh -o ControlPath=...
   host true` (target: faster).
2. Fan-out: audit_box of 8 inventory hosts (8 aliases, 8 connections, one loopback sshd)
   vs 1 host (target <= 2x).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import asyncssh
from _common import Bench, median_s, report
from mcp import Client

from mcp_server.server import build_server
from mcp_server.settings import Settings


async def overhead(b: Bench) -> None:
    async with Client(build_server(Settings.from_env())) as c:
        async def tool() -> None:
            r = await c.call_tool("list_runs", {"host": "box0"})
            assert not r.is_error, r.content
        t_tool = await median_s(tool, 200, warmup=10)
    async with asyncssh.connect("127.0.0.1", b.sshd.port, username="root", client_keys=[str(b.sshd.clientkey)],
                                known_hosts=str(b.sshd.known_hosts)) as conn:
        t_raw = await median_s(lambda: conn.run("true", check=True), 200, warmup=10)
    ctl = b.root / "ctl-%C"
    base = ["ssh", "-F", str(b.ssh_config), "-o", "ControlMaster=auto", "-o", f"ControlPath={ctl}",
            "-o", "ControlPersist=60", "box0"]
    subprocess.run([*base, "true"], check=True)

    async def mux() -> None:
        p = await asyncio.create_subprocess_exec(*base, "true")
        assert await p.wait() == 0
    t_mux = await median_s(mux, 100, warmup=5)
    subprocess.run(["ssh", "-F", str(b.ssh_config), "-o", f"ControlPath={ctl}", "-O", "exit", "box0"],
                   capture_output=True)
    report("warm tool call vs raw asyncssh conn.run('true')", t_tool, t_raw, "<= 1.5x", t_tool <= 1.5 * t_raw)
    report("warm tool call vs OpenSSH ControlMaster 'ssh host true'", t_tool, t_mux, "< 1.0x", t_tool < t_mux)


async def fanout(n_hosts: int = 8) -> None:
    b = Bench(aliases=n_hosts)
    try:
        async def audit(hosts: list[str]) -> float:
            async with Client(build_server(Settings.from_env()), read_timeout_seconds=120) as c:
                t0 = time.perf_counter()
                r = await c.call_tool("audit_box", {"hosts": hosts})
                assert not r.is_error and all(o["audit"] for o in r.structured_content["outcomes"]), r.content
                return time.perf_counter() - t0
        one = sorted([await audit(["box0"]) for _ in range(5)])[2]
        many = sorted([await audit([f"box{i}" for i in range(n_hosts)]) for _ in range(5)])[2]
        serial = sum([await audit([f"box{i}"]) for i in range(n_hosts)])
        report(f"audit_box fan-out {n_hosts} hosts vs 1 host", many, one, "<= 2x", many <= 2 * one)
        report(f"audit_box fan-out {n_hosts} hosts vs {n_hosts} one after another", many, serial, "< 1.0x",
               many < serial)
        print(f"  note: all {n_hosts} 'boxes' are this machine ({os.cpu_count()} cores): the remote audits and "
              "SSH handshakes compete for the same CPUs, which bounds the fan-out ratio here")
    finally:
        b.close()


async def main() -> None:
    b = Bench()
    try:
        await overhead(b)
    finally:
        b.close()
    await fanout()


if __name__ == "__main__":
    asyncio.run(main())
