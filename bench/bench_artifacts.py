"""verify_artifacts benchmarks (issue: verify_artifacts).

1. Remote hashing throughput of our on-box hasher vs `sha256sum` and vs Python hashlib on
   the same 1 GiB file (target >= 0.9x the faster of the two), and parallel across files.
2. Pull + verify of 1 GiB over loopback vs plain `scp` of the same file (target <= 1.2x:
   hashing must overlap the transfer).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import time

from _common import Bench

from mcp_server.app import App
from mcp_server.settings import Settings
from mcp_server.verify.artifacts.manifest import list_root, poll_hashing, start_hashing
from mcp_server.verify.artifacts.roster import resolve
from mcp_server.verify.artifacts.verifier import VerifyRequest, verify_artifacts

GIB = 1 << 30


def line(name: str, value: float, unit: str, base: float, target: str, ok: bool) -> None:
    print(f"{name:56} {value:8.2f} {unit} vs {base:8.2f} {unit}  ratio {value / base:5.2f}  target {target:8} "
          f"{'OK' if ok else 'MISSED'}")


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def hashlib_s(path: str) -> float:
    t0 = time.perf_counter()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return time.perf_counter() - t0


async def ours(host, root: str, roster: list[str]) -> float:
    facts, entries = await list_root(host, root)
    files = resolve(roster, entries).files
    t0 = time.perf_counter()
    job = await start_hashing(host, facts["abs"], files, facts)
    while not (await poll_hashing(host, facts["abs"], job))[0]:
        await asyncio.sleep(0.02)
    return time.perf_counter() - t0


async def main() -> None:
    b = Bench()
    try:
        data = b.root / "data"
        data.mkdir()
        big = data / "one.bin"
        with big.open("wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(1024):
                f.write(block)
        for i in range(4):
            shutil.copy(big, data / f"part{i}.bin") if i == 0 else os.link(data / "part0.bin", data / f"part{i}.bin")
        app = App(Settings.from_env())
        spec = app.pool.spec("box0")
        host = await app.pool.host(spec)
        t_sum = min(timed(["sha256sum", str(big)]) for _ in range(2))
        t_lib = min(hashlib_s(str(big)) for _ in range(2))
        t_ours = min([await ours(host, str(data), ["one.bin"]) for _ in range(2)])
        fastest = min(t_sum, t_lib)
        rates = (GIB / t / 1e9 for t in (t_sum, t_lib, t_ours))
        print("sha256sum {:.2f} GB/s, hashlib {:.2f} GB/s, ours {:.2f} GB/s".format(*rates))
        line("on-box hashing 1 GiB: ours vs the faster of sha256sum/hashlib", GIB / t_ours / 1e9, "GB/s",
             GIB / fastest / 1e9, ">= 0.9x", t_ours <= fastest / 0.9)
        t_par = await ours(host, str(data), ["part*.bin"])
        line(f"on-box hashing 4 x 1 GiB in parallel ({os.cpu_count()} cores) vs 4 x hashlib", 4 * GIB / t_par / 1e9,
             "GB/s", GIB / t_lib / 1e9, "> 1.0x", t_par < 4 * t_lib)

        dest = b.root / "pulled"
        t0 = time.perf_counter()
        done = False
        while not done:
            r = await verify_artifacts(host, spec, VerifyRequest(root=str(data), roster=["one.bin"], dest=str(dest),
                                                                 budget_s=55), pulls_dir=b.root, ledger=app.ledger)
            done = r.done
        t_pull = time.perf_counter() - t0
        assert r.passed, r.findings
        scp_dest = b.root / "scp.bin"
        t_scp = timed(["scp", "-q", "-F", str(b.ssh_config), f"box0:{big}", str(scp_dest)])
        line("pull + verify 1 GiB vs plain scp", t_pull, "s ", t_scp, "<= 1.2x", t_pull <= 1.2 * t_scp)
        await app.close()
    finally:
        b.close()


if __name__ == "__main__":
    asyncio.run(main())
