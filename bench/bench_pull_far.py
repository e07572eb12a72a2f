"""Pulls over a far link (issue 33, part 2): one 256 MiB file of random bytes pulled and verified
(every byte hashed, the digest compared with the box's manifest) over a relay that holds every
chunk 50 ms each way (a 100 ms round trip), in one stream (the file not cut in pieces: how every
file travelled before) against the pull as it chooses (it measures the link: far, so pieces over
parallel streams); then the same over loopback, where it chooses one stream, and with pieces
forced. Targets: over the relay, parallel >= 2x one stream; over loopback >= 0.9x one stream.
Also over the relay: the same pull in budgeted calls (verify_artifacts' budget_s=2: each call stops
at 1.5 s and the next resumes every piece) against one call, target <= 2x; and 32 small files one
at a time against several at once (no target).
Every run checks that each byte was received once and hashed once (the pull's counters).
Environment: RGT_BENCH_FAR_MIB (file size, default 256), RGT_BENCH_REPS (runs of each cheap
measurement, default 3; the slow single stream over the relay runs once)."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import Bench  # noqa: E402

from mcp_server.app import App  # noqa: E402
from mcp_server.hosts.base import Host  # noqa: E402
from mcp_server.settings import Settings  # noqa: E402
from mcp_server.verify.artifacts import partial_hash, pull, spans  # noqa: E402
from mcp_server.verify.artifacts.manifest import ManifestFile, list_root, poll_hashing, start_hashing  # noqa: E402
from mcp_server.verify.artifacts.pull import Puller  # noqa: E402
from mcp_server.verify.artifacts.receive import COUNTS  # noqa: E402
from mcp_server.verify.artifacts.roster import resolve  # noqa: E402
from mcp_server.verify.artifacts.state import PullState  # noqa: E402

MIB = 1 << 20
SIZE = int(os.environ.get("RGT_BENCH_FAR_MIB", "256")) * MIB
REPS = int(os.environ.get("RGT_BENCH_REPS", "3"))
ONE_WAY_S = 0.05
SMALL = 32  # small files pulled over the relay, one at a time and several at once
# How the pull treats the link: `auto` measures it (the product); `one` never cuts a file in
# pieces (how every file travelled before); `pieces` always does.
MODES = {"auto": pull.FAR_S, "one": float("inf"), "pieces": 0.0}
CUT: dict[str, int] = {}  # runs of each mode in which the file travelled in pieces


async def manifest(host: Host, root: Path) -> tuple[str, list[ManifestFile]]:
    facts, entries = await list_root(host, str(root))
    job = await start_hashing(host, facts, resolve(["big.bin"], entries).files)
    while not (got := await poll_hashing(host, facts.abs_root, job))[0]:
        await asyncio.sleep(0.05)
    shutil.rmtree(root / f".rgt-hash-{job}", ignore_errors=True)
    return facts.abs_root, [ManifestFile(path=p, bytes=n or 0, sha256=d) for p, (n, d) in got[1].items()]


async def pull_once(host: Host, abs_root: str, files: list[ManifestFile], dest: Path, mode: str,
                    budget_s: float = 55) -> float:
    """Seconds to pull and verify the file in calls of `budget_s` (default: verify_artifacts' largest)."""
    shutil.rmtree(dest, ignore_errors=True)
    hashed, read_back, transferred, rehashed = COUNTS.hashed, COUNTS.read_back, 0, partial_hash.REHASHED_BYTES
    state = PullState(round=1, phase="pulling", host=host.name, root=abs_root, roster=["big.bin"], run_id=None)
    pull.FAR_S = MODES[mode]
    try:
        t0 = time.perf_counter()
        while True:
            puller = Puller(host, abs_root, dest, state, time.monotonic() + budget_s, None)
            done = await puller.run(files)
            transferred += puller.transferred
            if done:
                break
        elapsed = time.perf_counter() - t0
    finally:
        pull.FAR_S = MODES["auto"]
    assert state.is_done("big.bin"), f"not verified: {puller.findings}"
    assert transferred == SIZE and COUNTS.hashed - hashed == SIZE, "each byte received once and hashed once"
    assert rehashed == partial_hash.REHASHED_BYTES, "a resumed call hashed again what an earlier one had hashed"
    CUT[mode] = CUT.get(mode, 0) + (COUNTS.read_back > read_back)  # pieces ran ahead of the hash: it was cut
    return elapsed


async def rates(host: Host, abs_root: str, files: list[ManifestFile], dest: Path,
                runs: dict[str, int]) -> dict[str, float]:
    """MB/s of each mode's median run, the modes' runs interleaved (a noisy machine slows them alike)."""
    times: dict[str, list[float]] = {mode: [] for mode in runs}
    for i in range(max(runs.values())):
        for mode, n in runs.items():
            if i < n:
                times[mode].append(await pull_once(host, abs_root, files, dest, mode))
    return {mode: SIZE / statistics.median(t) / 1e6 for mode, t in times.items()}


def line(what: str, single: float, other: float, other_name: str, target: float | None) -> None:
    ratio = other / single
    verdict = ("no target: what a near link would cost in pieces" if target is None
               else f"target >= {target:.1f}  {'OK' if ratio >= target else 'MISSED'}")
    print(f"pull + verify {SIZE // MIB} MiB {what:24} one stream {single:6.1f} MB/s  {other_name:21} {other:6.1f} MB/s"
          f"  ratio {ratio:5.2f}  {verdict}", flush=True)


async def small_files(host: Host, root: Path, dest: Path, n: int) -> dict[int, float]:
    """Seconds to pull and verify `n` small files one at a time against several at once."""
    root.mkdir()
    for i in range(n):
        (root / f"m{i:03d}.json").write_bytes(os.urandom(64 * 1024))
    facts, entries = await list_root(host, str(root))
    job = await start_hashing(host, facts, resolve(["m*.json"], entries).files)
    while not (got := await poll_hashing(host, facts.abs_root, job))[0]:
        await asyncio.sleep(0.05)
    shutil.rmtree(root / f".rgt-hash-{job}", ignore_errors=True)
    files = [ManifestFile(path=p, bytes=b or 0, sha256=d) for p, (b, d) in sorted(got[1].items())]
    seconds = {}
    for streams in (1, spans.STREAMS):
        shutil.rmtree(dest, ignore_errors=True)
        state = PullState(round=1, phase="pulling", host=host.name, root=facts.abs_root, roster=["m*"], run_id=None)
        pull.STREAMS = streams
        try:
            t0 = time.perf_counter()
            assert await Puller(host, facts.abs_root, dest, state, time.monotonic() + 55, None).run(files)
            seconds[streams] = time.perf_counter() - t0
        finally:
            pull.STREAMS = spans.STREAMS
        assert all(state.is_done(mf.path) for mf in files)
    return seconds


async def main() -> None:
    b = Bench()
    try:
        root = b.durable / "far"
        root.mkdir()
        with (root / "big.bin").open("wb") as f:  # random bytes: sparse zeros would flatter the hashing
            for _ in range(SIZE // MIB):
                f.write(os.urandom(MIB))
        link = await b.delayed_alias("far", ONE_WAY_S)
        app = App(Settings.from_env())
        try:
            host = await app.pool.host(app.pool.spec("far"))
            abs_root, files = await manifest(host, root)
            far = await rates(host, abs_root, files, b.root / "pulled-far", {"auto": REPS, "one": 1})
            line(f"over a {2 * ONE_WAY_S * 1e3:.0f} ms round trip", far["one"], far["auto"],
                 f"auto: {CUT.pop('auto', 0)}/{REPS} in pieces", 2.0)
            short = await pull_once(host, abs_root, files, b.root / "pulled-far", "auto", budget_s=1.5)
            CUT.pop("auto", None)
            one_call = SIZE / far["auto"] / 1e6
            print(f"pull + verify {SIZE // MIB} MiB over the relay in calls of 1.5 s (budget_s=2): {short:5.1f} s vs "
                  f"one call {one_call:5.1f} s: ratio {short / one_call:4.2f} (target <= 2.0) "
                  f"{'OK' if short <= 2 * one_call else 'MISSED'}; nothing received or hashed twice", flush=True)
            t = await small_files(host, b.durable / "small", b.root / "pulled-small", SMALL)
            many = t[spans.STREAMS]
            print(f"pull + verify {SMALL} files of 64 KiB over the relay: one at a time {t[1]:5.2f} s, "
                  f"{spans.STREAMS} at once {many:5.2f} s: {t[1] / many:4.2f}x faster", flush=True)
            host = await app.pool.host(app.pool.spec("box0"))
            abs_root, files = await manifest(host, root)
            runs = {"auto": REPS, "one": REPS, "pieces": REPS}
            near = await rates(host, abs_root, files, b.root / "pulled-near", runs)
            line("over loopback", near["one"], near["auto"], f"auto: {CUT.pop('auto', 0)}/{REPS} in pieces", 0.9)
            line("over loopback", near["one"], near["pieces"], f"{spans.STREAMS} streams, forced", None)
            print(f"bytes hashed from disk (pieces received ahead of the hash): {COUNTS.read_back / MIB:.0f} MiB "
                  f"in all; streams asked again: {COUNTS.retries}")
        finally:
            await app.close()
            await link.close()
    finally:
        b.close()


if __name__ == "__main__":
    asyncio.run(main())
