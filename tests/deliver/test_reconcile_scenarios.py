"""Black-box scenarios 1-9 of deliver.md section 7, on a real project tree (EVIDENCE.json,
results/<exp>/runs/<id>/ with `selected` symlinks, figure folders): how printed numbers are
read, attributed and judged. Scenarios 10-15 are in test_reconcile_scenarios_evidence.py."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.deliver.project import Project, blocking, check, found, one_row_project, record, row


# 1 -------------------------------------------------------------------------------------
async def test_a_clean_corpus_across_formats_reconciles_clean_with_every_number_matched(tmp_path: Path) -> None:
    p = Project(tmp_path)
    docs = {
        "paper.tex": "\\begin{table}\n\\caption{Main}\n\\begin{tabular}{lcc}\n\\toprule\n"
                     "Metric & Ours & Baseline \\\\\n\\midrule\nPSNR & 31.42 & 29.95 \\\\\n\\bottomrule\n"
                     "\\end{tabular}\n\\end{table}\n",
        "README.md": "Ours reaches PSNR 31.42 dB; w/o aux gets PSNR 30.81 (single seed).\n",
        "notes.txt": "top1 acc 0.7612\n",
        "results.csv": "exp,metric,value\nours-full,psnr,31.42\n",
    }
    report = await check(p, docs)
    assert report.clean and blocking(report) == []
    matched = {(f.file, f.text, f.exp_id) for f in found(report, "match")}
    assert matched == {("paper.tex", "31.42", "ours-full"), ("paper.tex", "29.95", "baseline"),
                       ("README.md", "31.42", "ours-full"), ("README.md", "30.81", "ours-no-aux"),
                       ("notes.txt", "0.7612", "ours-full"), ("results.csv", "31.42", "ours-full")}
    numbers = await check(p, documents=list(docs), view="numbers")
    assert {n.regenerable for n in numbers.numbers} == {"transcribed"}
    assert all(any(d.startswith("transcribed:") for d in n.disclosures) for n in numbers.numbers)


# 2 -------------------------------------------------------------------------------------
async def test_transcription_drift_is_one_stale_finding_in_the_dirty_document_only(tmp_path: Path) -> None:
    p = one_row_project(tmp_path)
    report = await check(p, {"README.md": "PSNR 31.42 on Set5.\n", "paper.md": "PSNR 31.50 on Set5.\n"})
    (stale,) = blocking(report)
    assert (stale.category, stale.file, stale.line, stale.reported, stale.evidence_value) == (
        "stale", "paper.md", 1, 31.5, 31.42)
    assert (stale.metric, stale.claim_id, stale.text) == ("psnr_set5", "C1", "31.50")
    assert not report.clean


# 3 -------------------------------------------------------------------------------------
async def test_a_number_rounded_at_its_printed_precision_matches_and_nothing_else_does(tmp_path: Path) -> None:
    p = one_row_project(tmp_path)
    text = "PSNR 31.4\n\nPSNR 31.420\n\nPSNR 31.5\n\nPSNR 31.423\n\nPSNR 31\n"
    report = await check(p, {"a.md": text})
    verdicts = {f.text: f.category for f in report.findings if f.file == "a.md"}
    assert verdicts == {"31.4": "rounded_match", "31.420": "match", "31.5": "stale", "31.423": "stale", "31": "stale"}
    strict = await check(p, documents=["a.md"], mode="strict")
    assert {f.text: f.category for f in strict.findings if f.file == "a.md"}["31.4"] == "stale"


async def test_a_half_way_value_rounds_both_ways(tmp_path: Path) -> None:
    p = one_row_project(tmp_path, value=31.45)
    p.evidence["claims"][0]["evidence"][0]["value"] = 31.45
    p.write_evidence()
    report = await check(p, {"a.md": "PSNR 31.4\n\nPSNR 31.5\n"})
    assert [f.category for f in report.findings if f.file == "a.md"] == ["rounded_match", "rounded_match"]


# 4 -------------------------------------------------------------------------------------
async def test_a_percent_of_a_fraction_is_a_scaled_match_with_a_note(tmp_path: Path) -> None:
    p = Project(tmp_path)
    text = "top1 acc 76.12%\n\ntop1 acc 76.1%\n\ntop1 acc 0.7612\n\ntop1 acc 0.7621\n\ntop1 acc 76.12\n"
    report = await check(p, {"a.md": text})
    verdicts = {f.text: f for f in report.findings if f.file == "a.md"}
    assert verdicts["76.12%"].category == "scaled_match" and "percent of a fraction" in verdicts["76.12%"].note
    assert verdicts["76.1%"].category == "scaled_match" and "rounded" in verdicts["76.1%"].note
    assert verdicts["0.7612"].category == "match"
    assert verdicts["0.7621"].category == "stale"
    assert verdicts["76.12"].category == "unit_problem" and "cannot be decided" in verdicts["76.12"].note


async def test_a_declared_fraction_unit_makes_the_percent_a_plain_match(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.evidence["claims"][2]["evidence"][0]["unit"] = "fraction"
    p.write_evidence()
    report = await check(p, {"a.md": "top1 acc 76.12%\n\ntop1 acc 76.1%\n"})
    assert [f.category for f in report.findings if f.file == "a.md"] == ["match", "rounded_match"]


# 5 -------------------------------------------------------------------------------------
async def test_one_number_in_two_documents_with_two_values_is_stale_where_it_differs(tmp_path: Path) -> None:
    p = Project(tmp_path)
    docs = {"paper.tex": "Ours-full reaches PSNR 31.42\n", "slides.md": "Ours-full reaches PSNR 31.24\n"}
    report = await check(p, docs)
    (stale,) = blocking(report)
    assert (stale.file, stale.reported, stale.evidence_value, stale.exp_id) == ("slides.md", 31.24, 31.42, "ours-full")
    numbers = await check(p, documents=list(docs), view="numbers")
    rec = record(numbers, "C1", "ours-full")
    assert rec.reconciled == "drift"
    assert [(o.file, o.text) for o in rec.occurrences] == [("paper.tex", "31.42"), ("slides.md", "31.24")]


async def test_two_wrong_copies_are_two_stale_findings_under_the_same_row(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"paper.tex": "Ours-full reaches PSNR 31.24\n",
                             "slides.md": "Ours-full reaches PSNR 31.52\n"})
    assert [(f.file, f.reported, f.exp_id) for f in blocking(report)] == [
        ("paper.tex", 31.24, "ours-full"), ("slides.md", 31.52, "ours-full")]


# 6 -------------------------------------------------------------------------------------
async def test_the_band_n_and_seed_count_ride_along_and_are_checked(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"README.md": "Ours: PSNR 31.42 ± 0.08 (test, n=100, 3 seeds)\n"})
    got = {(f.kind, f.text, f.category) for f in report.findings if f.file == "README.md"}
    assert got == {(None, "31.42", "match"), ("variance", "0.08", "match"), ("n", "100", "match"),
                   ("seeds", "3", "match")}
    assert blocking(report) == []


async def test_a_band_that_differs_from_the_variance_is_stale(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"README.md": "Ours: PSNR 31.42 ± 0.10\n"})
    (stale,) = blocking(report)
    assert (stale.category, stale.kind, stale.reported, stale.evidence_value) == ("stale", "variance", 0.10, 0.08)


async def test_a_latex_pm_band_is_read_like_the_plain_one(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"paper.tex": "Ours: PSNR $31.42 \\pm 0.08$ (test, n=100, 3 seeds)\n"})
    assert blocking(report) == []
    assert {f.kind for f in found(report, "match", file="paper.tex")} == {None, "variance", "n", "seeds"}


# 7 -------------------------------------------------------------------------------------
async def test_two_rows_sharing_a_keyword_on_one_line_are_told_apart_by_their_aliases(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"a.md": "PSNR: Baseline 29.95 vs Ours 31.42\n"})
    matched = [(f.text, f.exp_id) for f in found(report, "match", file="a.md")]
    assert matched == [("29.95", "baseline"), ("31.42", "ours-full")]
    assert blocking(report) == []


async def test_a_wrong_number_next_to_its_alias_is_stale_against_that_row(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"a.md": "PSNR: Baseline 29.95 vs Ours 31.52\n"})
    (stale,) = blocking(report)
    assert (stale.category, stale.exp_id, stale.reported, stale.evidence_value) == ("stale", "ours-full", 31.52, 31.42)


# 8 -------------------------------------------------------------------------------------
async def test_identifiers_citations_section_numbers_and_years_are_not_reported_values(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"a.md": "PSNR on Set5 (claim C1, x4, v2, see [12], Sec. 4.2, 2026) is 31.42\n"})
    assert [(f.category, f.text) for f in report.findings if f.file == "a.md"] == [("match", "31.42")]


async def test_a_bracketed_citation_and_a_parenthesised_year_are_both_ignored(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"a.md": "Ours PSNR [12] 31.42\n\nOurs PSNR (2026) 31.42\n"})
    in_a = [(f.category, f.text) for f in report.findings if f.file == "a.md"]
    assert in_a == [("match", "31.42"), ("match", "31.42")]


# 9 -------------------------------------------------------------------------------------
def _with_nmse_and_delta(p: Project) -> None:
    rows = [row("ours-full", "NMSE", 3.2e-4, direction="lower_is_better"), row("ours-full", "delta_psnr", -0.61)]
    for r in rows:
        del r["results_json"]
    p.evidence["claims"].append({"id": "C4", "paper_anchor": "Table 4", "repo_implementation": "src/a.py:1",
                                 "evidence": rows})
    p.write_evidence()


async def test_scientific_notation_negatives_and_the_unicode_minus_are_read_exactly(tmp_path: Path) -> None:
    p = Project(tmp_path)
    _with_nmse_and_delta(p)
    docs = {"a.md": "NMSE 3.2e-4\n\nNMSE 0.00032\n\nNMSE 3.5e-4\n\n"
                    "delta PSNR -0.61\n\ndelta PSNR \u22120.61\n\ndelta PSNR 0.61\n",
            "b.tex": "NMSE $3.2\\times10^{-4}$\n"}
    report = await check(p, docs)
    verdicts = [(f.file, f.line, f.category) for f in report.findings if f.claim_id == "C4"]
    assert verdicts == [("a.md", 1, "match"), ("a.md", 3, "match"), ("a.md", 5, "stale"), ("a.md", 7, "match"),
                        ("a.md", 9, "match"), ("a.md", 11, "stale"), ("b.tex", 1, "match")]
