"""Start-up as an MCP client sees it (issues 19 and 33): spawn -> initialize reply and spawn ->
tools/list reply over stdio, against a minimal server on the same SDK (bench/minimal_server.py:
MCPServer, one tool, served over stdio) measured in the same run, the two started in turn so the
machine's noise falls on both. Target: spawn -> initialize <= 1.2x the minimal server's. Also
printed: the old absolute figure (target <= 1.0 s) and the SDK's import alone.

    .venv/bin/python bench/bench_start.py [--runs 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import report

SERVER = [str(Path(sys.executable).with_name("remote-gpu-trainer-mcp"))]
MINIMAL = [sys.executable, str(Path(__file__).with_name("minimal_server.py"))]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}}
LIST = ({"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})


def one_start(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds from spawn to the initialize reply and to the tools/list reply, and the CPU seconds
    the process had used by then (steadier than wall time on a shared machine)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    if b'"result"' not in proc.stdout.readline():
        raise SystemExit(f"{argv[-1]} did not answer initialize")
    initialized = time.perf_counter() - started
    for msg in LIST:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    if b'"tools"' not in proc.stdout.readline():
        raise SystemExit(f"{argv[-1]} did not answer tools/list")
    listed = time.perf_counter() - started
    proc.kill()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdin.close()
    proc.stdout.close()
    return initialized, listed, usage.ru_utime + usage.ru_stime


def sdk_import() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server, mcp.types"], check=True)
    return time.perf_counter() - started


def main(n: int) -> None:
    env = dict(os.environ, RGT_HOME=tempfile.mkdtemp(prefix="rgt-bench-start-"))
    # An installed package starts from compiled bytecode; a shell with PYTHONDONTWRITEBYTECODE would
    # leave an edited tree compiling its changed modules on every start. One start each writes it
    # (and warms the page cache and the search index cache).
    compiling = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    one_start(SERVER, compiling)
    one_start(MINIMAL, compiling)
    ours, floor, imports = [], [], []
    for _ in range(n):
        ours.append(one_start(SERVER, env))
        floor.append(one_start(MINIMAL, env))
        imports.append(sdk_import())
    init, listed, cpu = (statistics.median(r[i] for r in ours) for i in (0, 1, 2))
    floor_init, floor_listed, floor_cpu = (statistics.median(r[i] for r in floor) for i in (0, 1, 2))
    sdk = statistics.median(imports)
    report("spawn -> initialize vs a minimal server on the same SDK", init, floor_init, "<= 1.2x",
           init <= 1.2 * floor_init)
    print(f"spawn -> tools/list {listed:.2f} s vs the minimal server's {floor_listed:.2f} s "
          f"(ratio {listed / floor_listed:.2f}; {len(ours)} starts each); CPU seconds to tools/list "
          f"{cpu:.2f} vs {floor_cpu:.2f} (ratio {cpu / floor_cpu:.2f})")
    print(f"spawn -> initialize {init:.2f} s (target <= 1.0 s: {'OK' if init <= 1.0 else 'MISSED'}); "
          f"spawn -> tools/list {listed:.2f} s; the MCP SDK's import alone {sdk:.2f} s "
          f"(ratio initialize / SDK import {init / sdk:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="starts of each server (the median is reported)")
    main(parser.parse_args().runs)
