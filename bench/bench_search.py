"""Benchmark search_references: loading the index from its disk cache against building it, the
median query against a plain substring scan, a cold `remote-gpu-trainer-mcp call
search_references` with and without a cache against a bare `python -c 'import mcp_server.server'`,
and the evaluation set's hit rates. Baselines are measured in the same run; compare ratios.

    .venv/bin/python bench/bench_search.py [--rounds 20] [--calls 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_server.knowledge import all_sections  # noqa: E402
from mcp_server.search import load_index, substring_scan  # noqa: E402

QUESTIONS = tomllib.loads((ROOT / "tests/knowledge/eval_questions.toml").read_text("utf-8"))["q"]
CLI = [str(ROOT / ".venv/bin/remote-gpu-trainer-mcp"), "call", "search_references", '{"query": "释放实例前要做什么"}']


def median_s(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run(argv: list[str], home: Path) -> None:
    out = subprocess.run(argv, env={**os.environ, "RGT_HOME": str(home)}, capture_output=True, timeout=300)
    if out.returncode:
        raise SystemExit(f"{argv[:3]} failed: {out.stderr.decode()[-400:]}")


def cold_calls(calls: int) -> tuple[float, float, float]:
    """(import-only baseline, call with a warm cache, call that must build the cache) in seconds."""
    home = Path(tempfile.mkdtemp(prefix="rgt-bench-search-"))
    try:
        imports = median_s(lambda: run([sys.executable, "-c", "import mcp_server.server"], home), calls)
        run(CLI, home)  # leaves a cache behind
        warm = median_s(lambda: run(CLI, home), calls)

        def uncached() -> None:
            shutil.rmtree(home / "cache", ignore_errors=True)
            run(CLI, home)

        cold = median_s(uncached, calls)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return imports, warm, cold


def hit_rates(index_rank: Callable[[str, int], list[str]]) -> str:
    parts = []
    for split in ("tune", "holdout"):
        qs = [q for q in QUESTIONS if q["split"] == split]
        at1 = sum(any(u in q["expect"] for u in index_rank(q["q"], 1)) for q in qs)
        at3 = sum(any(u in q["expect"] for u in index_rank(q["q"], 3)) for q in qs)
        parts.append(f"{split} hit@1 {at1}/{len(qs)} hit@3 {at3}/{len(qs)}")
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="rgt-bench-index-"))
    try:
        build = median_s(lambda: load_index(None), 3)
        load_index(cache)
        load = median_s(lambda: load_index(cache), 5)
        index = load_index(cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    queries = [q["q"] for q in QUESTIONS]
    sections = all_sections()
    bm25 = median_s(lambda: [index.rank(q, 5) for q in queries], args.rounds) / len(queries)
    scan = median_s(lambda: [substring_scan(sections, q, 5) for q in queries], args.rounds) / len(queries)
    print(f"sections indexed: {len(index.sections)}")
    print(f"index from cache {load * 1e3:.0f} ms vs built {build * 1e3:.0f} ms: ratio {load / build:.2f}")
    print(f"median query {bm25 * 1e3:.2f} ms vs substring scan {scan * 1e3:.2f} ms: ratio {bm25 / scan:.2f}")
    imports, warm, cold = cold_calls(args.calls)
    print(f"cold `call search_references`: {warm:.2f} s with the cache, {cold:.2f} s building it; "
          f"`import mcp_server.server` alone {imports:.2f} s (ratio warm/imports {warm / imports:.2f})")

    def rank(q: str, k: int) -> list[str]:
        return [s.uri if s.level > 1 else f"{s.kind}://{s.path}" for s, _ in index.rank(q, k)]

    print(f"evaluation set: {hit_rates(rank)}")


if __name__ == "__main__":
    main()
