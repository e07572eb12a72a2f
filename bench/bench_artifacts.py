"""verify_artifacts benchmarks (issue: verify_artifacts).

1. Remote hashing throughput of our on-box hasher vs `sha256sum` and vs Python hashlib on
   the same 1 GiB file (target >= 0.9x the faster of the two), and parallel across files.
2. Pull + verify of 1 GiB over loopback vs plain `scp` of the same file (target <= 1.2x:
   hashing must overlap the transfer).
3. Pull + verify (size + SHA-256 of every file against the box's manifest) of 20,000 small
   files of 1-4 KB: packed (one tar built on the box) vs file by file (target: packed >= 5x
   faster). File by file costs many minutes here, so it is timed on RGT_BENCH_FBF_FILES files
   (default 2,000; set 20000 for the full count); packed is timed on both counts so one ratio
   compares like with like. The manifest (listing + hashing on the box) is the same for both
   and timed apart. `python bench/bench_artifacts.py small` runs only this part.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import Bench

from mcp_server.app import App
from mcp_server.settings import Settings
from mcp_server.verify.artifacts.manifest import ManifestFile, list_root, poll_hashing, start_hashing
from mcp_server.verify.artifacts.pull import Puller
from mcp_server.verify.artifacts.roster import resolve
from mcp_server.verify.artifacts.state import PullState
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
    job = await start_hashing(host, facts, files)
    while not (await poll_hashing(host, facts.abs_root, job))[0]:
        await asyncio.sleep(0.02)
    return time.perf_counter() - t0


def small_files(root: Path, n: int) -> None:
    """`n` files of 1-4 KB, 500 to a folder."""
    rng = random.Random(n)
    for i in range(n):
        d = root / f"d{i // 500:03d}"
        if i % 500 == 0:
            d.mkdir(parents=True)
        (d / f"m{i:05d}.bin").write_bytes(rng.randbytes(rng.randint(1024, 4096)))


async def box_manifest(host, root: Path) -> tuple[str, list[ManifestFile], float]:
    """The manifest verify_artifacts would build (listed and hashed on the box), and its seconds."""
    t0 = time.perf_counter()
    facts, entries = await list_root(host, str(root))
    job = await start_hashing(host, facts, resolve(["**"], entries).files)
    while not (got := await poll_hashing(host, facts.abs_root, job))[0]:
        await asyncio.sleep(0.02)
    shutil.rmtree(root / f".rgt-hash-{job}")
    files = [ManifestFile(path=p, bytes=n or 0, sha256=d) for p, (n, d) in sorted(got[1].items())]
    return facts.abs_root, files, time.perf_counter() - t0


async def pull_verify(host, abs_root: str, files: list[ManifestFile], dest: Path, packed: bool) -> float:
    """Seconds to pull every file and verify its size and SHA-256 against the manifest, in
    calls of verify_artifacts' largest budget (55 s) until done."""
    state = PullState(round=1, phase="pulling", host="box0", root=abs_root, roster=["**"], run_id=None)
    t0 = time.perf_counter()
    while not await Puller(host, abs_root, dest, state, time.monotonic() + 55, None).run(files, packed=packed):
        pass
    elapsed = time.perf_counter() - t0
    assert all(state.is_done(mf.path) for mf in files), "every file verified"
    return elapsed


def rate(k: int, what: str, t: float) -> None:
    print(f"pull + verify {k:6} small files {what:13} {t:8.2f} s  ({k / t:7.0f} files/s)", flush=True)


async def many_small_files(b: Bench, host) -> None:
    n, n_fbf = 20_000, int(os.environ.get("RGT_BENCH_FBF_FILES", "2000"))
    try:
        await _many_small_files(b, host, n, n_fbf)
    finally:  # 40,000+ files: never leave them behind in /tmp
        for d in ("small20k", "small-few", "got-packed", "got-few-packed", "got-fbf"):
            shutil.rmtree(b.root / d, ignore_errors=True)


async def _many_small_files(b: Bench, host, n: int, n_fbf: int) -> None:
    big, few = b.root / "small20k", b.root / "small-few"
    small_files(big, n)
    small_files(few, n_fbf)
    abs_big, files_big, t_hash = await box_manifest(host, big)
    abs_few, files_few, _ = await box_manifest(host, few)
    print(f"manifest of {n} small files on the box (same for both modes, not in the ratios): {t_hash:.1f} s")
    t_packed = await pull_verify(host, abs_big, files_big, b.root / "got-packed", True)
    rate(n, "packed", t_packed)
    t_few = await pull_verify(host, abs_few, files_few, b.root / "got-few-packed", True)
    rate(n_fbf, "packed", t_few)
    t_fbf = await pull_verify(host, abs_few, files_few, b.root / "got-fbf", False)
    rate(n_fbf, "file by file", t_fbf)
    line(f"pull + verify {n_fbf} small files: file by file vs packed", t_fbf, "s ", t_few, ">= 5x", t_fbf >= 5 * t_few)
    if n_fbf < n:
        # An estimate: file by file costs one round trip per file, so it grows about linearly.
        per_file = t_fbf / n_fbf * n
        line(f"pull + verify {n} small files: file by file (linear est.) vs packed", per_file, "s ", t_packed,
             ">= 5x", per_file >= 5 * t_packed)
    else:
        line(f"pull + verify {n} small files: file by file vs packed", t_fbf, "s ", t_packed, ">= 5x",
             t_fbf >= 5 * t_packed)


async def main() -> None:
    b = Bench()
    try:
        if sys.argv[1:] == ["small"]:
            app = App(Settings.from_env())
            await many_small_files(b, await app.pool.host(app.pool.spec("box0")))
            await app.close()
            return
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
        await many_small_files(b, host)
        await app.close()
    finally:
        b.close()


if __name__ == "__main__":
    asyncio.run(main())
