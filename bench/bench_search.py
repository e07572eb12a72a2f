"""Benchmark search_references' index: median query latency against a plain substring scan
over the same sections, measured in the same run. Prints one line per measure.

    .venv/bin/python bench/bench_search.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_server.knowledge import all_sections
from mcp_server.search import build_index, substring_scan
from tests.test_search import SYMPTOMS


def median_ms(fn, queries: list[str], rounds: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            fn(q)
            times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=50)
    rounds = ap.parse_args().rounds
    queries = [q for q, _ in SYMPTOMS]
    t = time.perf_counter()
    index = build_index()
    build_ms = (time.perf_counter() - t) * 1000
    sections = all_sections()
    bm25 = median_ms(lambda q: index.search(q, limit=5), queries, rounds)
    scan = median_ms(lambda q: substring_scan(sections, q, limit=5), queries, rounds)
    top3 = sum(page in [h.uri.split("#")[0] for h in index.search(q, 3)] for q, page in SYMPTOMS)
    scan3 = sum(page in [f"{s.kind}://{s.path}" for s in substring_scan(sections, q, 3)] for q, page in SYMPTOMS)
    print(f"sections indexed: {len(index.sections)}; index build: {build_ms:.0f} ms (once, at start-up)")
    print(f"bm25 median query: {bm25:.3f} ms  (target < 50 ms)")
    print(f"substring-scan baseline median query: {scan:.3f} ms")
    print(f"ratio bm25 / baseline: {bm25 / scan:.2f}x")
    print(f"expected page in top 3: bm25 {top3}/{len(SYMPTOMS)}, baseline {scan3}/{len(SYMPTOMS)}")


if __name__ == "__main__":
    main()
