"""Benchmark: reconcile_evidence over a generated corpus.

Builds a project with 500 claims (one results.json per experiment, read through
`selected`) and N documents of 50 numbers each (Markdown prose, Markdown tables, LaTeX
tables, CSV), then times the whole domain call on the local host: reading, extraction,
attribution, judging, claim checks, report. Prints throughput and the time ratio of a
2x corpus (target <= 2.2) and whether the 1,000-document corpus stays under 5 s.

    .venv/bin/python bench/bench_reconcile.py [--docs 1000] [--claims 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_server.deliver.documents.tokens import clear_memo
from mcp_server.deliver.reconcile import reconcile
from mcp_server.hosts.local import LocalHost

METRICS = ["psnr", "ssim", "lpips", "fid", "top1_acc", "f1", "miou", "bleu", "wer", "rmse",
           "psnr_set5", "psnr_set14", "ssim_set5", "ssim_set14", "auc", "dice", "mae", "nll", "recall", "map"]
NUMBERS_PER_DOC = 50
RUN = "2026-01-01T00-00-00Z-bench"


def build_project(root: Path, claims: int, seed: int = 7) -> list[dict]:
    """EVIDENCE.json plus results trees; returns the rows (exp, metric, value, std, n)."""
    rng = random.Random(seed)
    exps = max(1, claims // len(METRICS))
    rows, results = [], {}
    for i in range(claims):
        exp, metric = f"model-{i // len(METRICS):03d}", METRICS[i % len(METRICS)]
        decibels = metric in ("psnr", "psnr_set5", "psnr_set14", "fid")
        value = round(rng.uniform(20, 40), 2) if decibels else round(rng.uniform(0.1, 0.99), 4)
        std = round(rng.uniform(0.01, 0.2), 2)
        rows.append({"claim": f"C{i + 1}", "exp": exp, "metric": metric, "value": value, "std": std, "n": 100})
        results.setdefault(exp, []).append({"metric": metric, "split": "test", "value": value, "n": 100,
                                            "variance": {"type": "std", "value": std, "seeds": 3}})
    for exp, metrics in results.items():
        run = root / "results" / exp / "runs" / RUN
        run.mkdir(parents=True)
        (run / "results.json").write_text(json.dumps({"exp_id": exp, "run_id": RUN, "metrics": metrics}))
        os.symlink(f"runs/{RUN}", root / "results" / exp / "selected")
    evidence = {"claims": [{
        "id": r["claim"], "statement": f"{r['exp']} on {r['metric']}", "paper_anchor": "Table 1",
        "repo_implementation": "src/model.py:10",
        "evidence": [{"exp_id": r["exp"], "run": "selected", "metric": r["metric"], "value": r["value"],
                      "split": "test", "n": r["n"], "variance": {"type": "std", "value": r["std"], "seeds": 3},
                      "results_json": f"results/{r['exp']}/selected/results.json"}]} for r in rows]}
    (root / "EVIDENCE.json").write_text(json.dumps(evidence))
    assert exps >= 1
    return rows


def _value(rng: random.Random, r: dict) -> str:
    """The printed value; one in twenty is stale (the evidence moved on, the text did not)."""
    return str(round(r["value"] * 1.05 + 0.01, 4)) if rng.random() < 0.05 else str(r["value"])


def _prose(rng: random.Random, rows: list[dict], count: int) -> list[str]:
    """`count` sentences of 4 numbers each (value, ± band, n, seeds)."""
    out = []
    for _ in range(count):
        r = rng.choice(rows)
        name = r["metric"].replace("_", " ").upper()
        out.append(f"On the test split {r['exp']} reaches {name} {_value(rng, r)} ± {r['std']} (n={r['n']}, 3 seeds).")
        out.append("")
    return out


def _md_table(rng: random.Random, rows: list[dict], cells: int) -> list[str]:
    exp = rng.choice(rows)["exp"]
    mine = [r for r in rows if r["exp"] == exp][:cells]
    lines = ["| Method | " + " | ".join(r["metric"] for r in mine) + " |", "|---" * (len(mine) + 1) + "|"]
    lines.append(f"| {exp} | " + " | ".join(_value(rng, r) for r in mine) + " |")
    return lines


def build_docs(root: Path, rows: list[dict], docs: int, seed: int = 11) -> list[str]:
    """`docs` documents with NUMBERS_PER_DOC numbers each: 5 sentences of 4 numbers and
    3 tables of 10 cells (Markdown, LaTeX), or 50 CSV rows; one value in twenty is stale."""
    rng = random.Random(seed)
    names = []
    (root / "docs").mkdir(exist_ok=True)
    for d in range(docs):
        kind = ("md", "tex", "csv", "txt")[d % 4]
        if kind == "csv":
            sample = rng.sample(rows, NUMBERS_PER_DOC)
            body = ["exp,metric,value"] + [f"{r['exp']},{r['metric']},{_value(rng, r)}" for r in sample]
        elif kind == "tex":
            body = ["\\section{Results}"] + [line.replace("±", "$\\pm$") for line in _prose(rng, rows, 5)]
            for _ in range(3):
                exp = rng.choice(rows)["exp"]
                mine = [r for r in rows if r["exp"] == exp][:10]
                body += ["\\begin{table}", "\\caption{Main results}", "\\begin{tabular}{l" + "c" * len(mine) + "}",
                         "Method & " + " & ".join(r["metric"].replace("_", "\\_") for r in mine) + " \\\\", "\\midrule",
                         exp + " & " + " & ".join(_value(rng, r) for r in mine) + " \\\\",
                         "\\end{tabular}", "\\end{table}"]
        else:
            body = ["# Results", ""] + _prose(rng, rows, 5)
            for _ in range(3):
                body += _md_table(rng, rows, 10) + [""]
        name = f"docs/doc{d:05d}.{kind}"
        (root / name).write_text("\n".join(body) + "\n")
        names.append(name)
    return names


async def one_run(root: Path, docs: int) -> tuple[float, dict]:
    clear_memo()  # cold: nothing remembered from an earlier run
    start = time.perf_counter()
    report = await reconcile(LocalHost(), str(root / "EVIDENCE.json"), ["docs"], figures=False, limit=10)
    return time.perf_counter() - start, report.summary.model_dump()


def measure(claims: int, docs: int, repeat: int) -> tuple[float, dict]:
    tmp = Path(tempfile.mkdtemp(prefix="rgt-bench-"))
    try:
        rows = build_project(tmp, claims)
        build_docs(tmp, rows, docs)
        best, summary = float("inf"), {}
        for _ in range(repeat):
            t, summary = asyncio.run(one_run(tmp, docs))
            best = min(best, t)
        return best, summary
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--claims", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t1, s1 = measure(args.claims, args.docs, args.repeat)
    t2, s2 = measure(args.claims, 2 * args.docs, args.repeat)
    ratio = t2 / t1
    print(f"corpus: {s1['documents']} documents, {s1['numbers_seen']} numbers, {s1['mentions']} judged, "
          f"{args.claims} claims on {os.cpu_count()} CPUs")
    print(f"time: {t1:.2f} s  ({s1['numbers_seen'] / t1:,.0f} numbers/s, {s1['documents'] / t1:,.0f} documents/s)")
    print(f"2x corpus: {s2['documents']} documents, {s2['numbers_seen']} numbers in {t2:.2f} s; ratio {ratio:.2f} "
          f"(target <= 2.2: {'PASS' if ratio <= 2.2 else 'FAIL'})")
    print(f"under 5 s for {args.docs} documents: {'PASS' if t1 < 5 else 'FAIL'}")
    print(f"findings: {s1['counts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
