"""The original reconciler's own test behaviours (kept), and each of its known false
alarms and misses as a regression test that we do NOT reproduce it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.deliver.project import Project, blocking, check, entry, found, one_row_project, row


# The original's three tests (one claim C1, one row psnr_set5 = 31.42) ------------------
async def test_original_a_drift_is_detected_with_the_full_metric_key(tmp_path: Path) -> None:
    report = await check(one_row_project(tmp_path),
                         {"paper.md": "Our model reaches a PSNR of 31.50 on Set5 in Table 2.\n"})
    (stale,) = blocking(report)
    assert (stale.file, stale.metric, stale.evidence_value, stale.reported) == ("paper.md", "psnr_set5", 31.42, 31.5)


async def test_original_the_correct_value_is_no_drift_and_set5_and_c1_are_not_numbers(tmp_path: Path) -> None:
    report = await check(one_row_project(tmp_path), {"README.md": "PSNR 31.42 on Set5 (see EVIDENCE.json, claim C1)\n"})
    assert blocking(report) == []
    assert [f.text for f in found(report, "match")] == ["31.42"]


async def test_original_a_clean_and_a_dirty_document_give_one_drift_in_the_dirty_one(tmp_path: Path) -> None:
    report = await check(one_row_project(tmp_path),
                         {"README.md": "PSNR 31.42 on Set5.\n", "paper.md": "PSNR 31.50 on Set5.\n"})
    assert [f.file for f in blocking(report)] == ["paper.md"]


# The two behaviours the original added later (deliver-head.md) ------------------------
async def test_later_original_a_band_n_and_table_reference_after_the_value_are_no_drift(tmp_path: Path) -> None:
    report = await check(one_row_project(tmp_path), {"a.md": "PSNR 31.42 ± 0.08, n=100 (Table 2)\n"})
    assert blocking(report) == []


async def test_later_original_aliases_keep_two_datasets_apart(tmp_path: Path) -> None:
    ev = {"claims": [
        {"id": "C1", "paper_anchor": "T2", "repo_implementation": "a.py:1",
         "evidence": [{"metric": "psnr_set5", "value": 31.42, "aliases": ["PSNR/Set5"]}]},
        {"id": "C2", "paper_anchor": "T2", "repo_implementation": "a.py:1",
         "evidence": [{"metric": "psnr_set14", "value": 28.10, "aliases": ["PSNR/Set14"]}]},
    ]}
    report = await check(Project(tmp_path, evidence=ev, results={}, figures=False),
                         {"a.md": "PSNR/Set5 31.42; PSNR/Set14 28.10.\n"})
    assert blocking(report) == [] and len(found(report, "match")) == 2


# False alarms of the original: none of them is reproduced ------------------------------
FALSE_ALARMS = [
    ("band and n", "PSNR 31.42 ± 0.08 (n=100)"),
    ("the gate's own recommended caption", "PSNR 31.42 dB (test, n=100, ±0.08 over 3 seeds)"),
    ("a glued +- band", "PSNR 31.42+-0.08"),
    ("a bracketed citation", "PSNR [12] 31.42"),
    ("a year in parentheses", "PSNR (2026) 31.42"),
    ("a section reference", "PSNR (Sec. 4.2) 31.42"),
    ("a scale factor before the value", "PSNR at 2x scale 31.42"),
    ("a gain before the value", "PSNR gains of 1.2 dB, reaching 31.42"),
    ("the anchor twice", "PSNR/psnr 31.42"),
    ("a neighbouring metric's value", "PSNR 31.42, SSIM 0.912"),
    ("a number at the window edge", "PSNR" + " " * 57 + "31.42"),
    ("a model name with a number", "PSNR 31.42 with a ResNet-50 backbone"),
    ("a version string", "PSNR 31.42 (code v1.2.3, Python 3.11)"),
    ("a date", "PSNR 31.42 as of 2026-07-10"),
]


@pytest.mark.parametrize("text", [t for _, t in FALSE_ALARMS], ids=[n for n, _ in FALSE_ALARMS])
async def test_the_originals_false_alarm_is_not_reproduced(tmp_path: Path, text: str) -> None:
    report = await check(one_row_project(tmp_path), {"a.md": text + "\n"})
    assert blocking(report) == [], [(f.category, f.text) for f in blocking(report)]
    assert [f.text for f in found(report, "match", kind=None)] == ["31.42"]


async def test_a_second_row_with_the_same_keyword_is_not_a_cross_row_drift(tmp_path: Path) -> None:
    ev = {"claims": [{"id": "C1", "paper_anchor": "T", "repo_implementation": "a.py:1", "evidence": [
        {"exp_id": "ours", "metric": "PSNR", "value": 31.42}, {"exp_id": "base", "metric": "PSNR", "value": 29.95}]}]}
    report = await check(Project(tmp_path, evidence=ev, results={}, figures=False), {"a.md": "PSNR 31.42\n"})
    assert blocking(report) == [] and [f.exp_id for f in found(report, "match")] == ["ours"]


async def test_rows_of_two_datasets_without_aliases_are_not_cross_compared(tmp_path: Path) -> None:
    ev = {"claims": [{"id": "C1", "paper_anchor": "T", "repo_implementation": "a.py:1", "evidence": [
        {"metric": "psnr_set5", "value": 31.42}, {"metric": "psnr_set14", "value": 28.10}]}]}
    report = await check(Project(tmp_path, evidence=ev, results={}, figures=False),
                         {"a.md": "PSNR on Set5: 31.42\n\nPSNR on Set14: 28.10\n"})
    assert blocking(report) == []
    assert [f.metric for f in found(report, "match")] == ["psnr_set5", "psnr_set14"]


async def test_a_percent_printed_for_a_fraction_is_not_a_drift(tmp_path: Path) -> None:
    report = await check(Project(tmp_path), {"a.md": "top1 acc 76.12%\n"})
    assert blocking(report) == [] and found(report, "scaled_match")


async def test_a_metric_inside_a_longer_word_is_not_an_anchor(tmp_path: Path) -> None:
    report = await check(one_row_project(tmp_path), {"a.md": "fpsnr 31.50\n"})
    # The fixture reads through a `selected` symlink: the legacy layout, noted once.
    assert [f.category for f in report.findings] == ["claim_missing", "legacy_layout"]


async def test_true_and_nan_values_are_rejected_not_coerced(tmp_path: Path) -> None:
    ev: dict[str, Any] = {"claims": [
        {"id": "C1", "evidence": [{"metric": "psnr", "value": True}]},
        {"id": "C2", "evidence": [{"metric": "psnr", "value": 31.42}]}]}
    p = Project(tmp_path, evidence=ev, results={}, figures=False)
    report = await check(p, {"a.md": "PSNR 31.42\n"})
    assert [pr.json_path for pr in report.problems] == ["$.claims[0].evidence[0].value"]
    assert found(report, "match", claim_id="C2")
    p.evidence_path.write_text('{"claims": [{"id": "C1", "evidence": [{"metric": "psnr", "value": NaN}]}]}')
    report = await check(p, documents=["a.md"])
    (problem,) = report.problems
    assert problem.code == "invalid_json" and "NaN" in problem.message


# Misses of the original: each is caught --------------------------------------------------
async def test_a_number_before_its_keyword_is_checked(tmp_path: Path) -> None:
    report = await check(one_row_project(tmp_path), {"a.md": "Our model reaches 31.50 dB PSNR.\n"})
    assert [(f.category, f.text) for f in blocking(report)] == [("stale", "31.50")]


async def test_a_markdown_table_with_the_metric_only_in_its_header_is_checked(tmp_path: Path) -> None:
    report = await check(Project(tmp_path), {"a.md": "| Method | PSNR | Top-1 acc |\n|---|---|---|\n"
                                                     "| Ours | 31.42 | 0.7612 |\n| Baseline | 29.90 | — |\n"})
    assert [(f.category, f.text, f.exp_id) for f in blocking(report)] == [("stale", "29.90", "baseline")]
    assert {(f.text, f.metric) for f in found(report, "match")} == {("31.42", "PSNR"), ("0.7612", "top1_acc")}


async def test_a_csv_with_the_metric_in_its_header_is_checked(tmp_path: Path) -> None:
    report = await check(Project(tmp_path), {"r.csv": "method,psnr\nours-full,31.42\nbaseline,29.90\n"})
    assert [(f.category, f.line, f.column, f.exp_id) for f in blocking(report)] == [("stale", 3, 10, "baseline")]


async def test_a_latex_table_with_the_metric_in_its_header_column_is_checked(tmp_path: Path) -> None:
    tex = ("\\begin{tabular}{lcc}\n\\toprule\n & Ours & Baseline \\\\\n\\midrule\n"
           "PSNR (dB) & \\textbf{31.42} & 29.90 \\\\\n\\bottomrule\n\\end{tabular}\n")
    report = await check(Project(tmp_path), {"t.tex": tex})
    assert [(f.category, f.line, f.text, f.exp_id) for f in blocking(report)] == [("stale", 5, "29.90", "baseline")]
    assert [f.exp_id for f in found(report, "match", file="t.tex")] == ["ours-full"]


async def test_a_latex_table_with_the_metric_in_its_header_row_is_checked(tmp_path: Path) -> None:
    tex = ("\\begin{table}\\caption{Results}\n\\begin{tabular}{l|cc}\n\\hline\nMethod & PSNR $\\uparrow$ & "
           "\\multicolumn{1}{c}{Top-1 (\\%)} \\\\\n\\hline\nOurs & 31.42 & 76.12 \\\\\nBaseline & 29.95 & -- \\\\\n"
           "\\hline\n\\end{tabular}\n\\end{table}\n")
    report = await check(Project(tmp_path), {"t.tex": tex})
    assert blocking(report) == []
    got = {(f.text, f.category) for f in report.findings if f.file == "t.tex"}
    assert got == {("31.42", "match"), ("29.95", "match"), ("76.12", "scaled_match")}


async def test_a_folder_of_documents_is_expanded_instead_of_crashing(tmp_path: Path) -> None:
    p = one_row_project(tmp_path)
    p.doc("docs/a.md", "PSNR 31.42\n")
    p.doc("docs/sub/b.tex", "PSNR 31.50\n")
    p.doc("docs/c.json", '{"psnr": 31.50}')
    report = await check(p, documents=["docs"])
    assert report.summary.documents == 2
    assert [(f.file, f.category) for f in blocking(report)] == [("docs/sub/b.tex", "stale")]


async def test_a_shared_metric_window_does_not_make_the_neighbour_a_drift(tmp_path: Path) -> None:
    p = Project(tmp_path, evidence={"claims": [{"id": "C1", "evidence": [row("ours-full", "PSNR", 31.42)]}]},
                results={"ours-full": [entry("PSNR", 31.42), entry("SSIM", 0.912)]}, figures=False)
    report = await check(p, {"a.md": "Ours PSNR 31.42, SSIM 0.95\n"})
    assert blocking(report) == []
    (unbacked,) = found(report, "unbacked_number")
    assert unbacked.text == "0.95" and unbacked.evidence_value == 0.912


PARAGRAPH = """# Results

We train for 300 epochs on 4 GPUs with batch size 64 (Sec. 3.1). Table 2 compares PSNR on Set5.
Our full model (Ours) reaches 31.42 dB PSNR, a gain of 1.47 dB over the Baseline (29.95 dB).
Removing the auxiliary loss (w/o aux) drops PSNR to 30.81 dB (single seed).
PSNR is computed on the Y channel after cropping 4 pixels, following [12, 15].
The learning rate is 1e-4 (AdamW, β2=0.999), and PSNR improves by 0.4 dB with warmup.
Compared to the baseline, PSNR of Ours rises to 31.42 dB.
In Figure 3, PSNR peaks at epoch 250 with 31.6 dB on the validation split.
"""


async def test_a_realistic_results_paragraph_raises_no_false_alarm(tmp_path: Path) -> None:
    report = await check(Project(tmp_path), {"paper.md": PARAGRAPH})
    assert blocking(report) == [], [(f.line, f.text, f.category) for f in blocking(report)]
    assert [(f.line, f.text, f.exp_id) for f in found(report, "match")] == [
        (4, "31.42", "ours-full"), (4, "29.95", "baseline"), (5, "30.81", "ours-no-aux"), (8, "31.42", "ours-full")]
    (val,) = found(report, "unbacked_number")
    assert val.text == "31.6" and "val split" in val.note
