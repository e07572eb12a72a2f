"""The layouts projects have today (tests/fixtures/deliver/flat_corpus.py): flat results
files in plain `selected/` copies, a canonical run capsule, a sweep cell's best_metrics.json,
documents whose numbers are anchored by row names on either side. Every planted drift is
found and given to its row, nothing else blocks, and the layout itself raises nothing; the
legacy `selected` symlink layout gives the same verdicts plus one legacy note per link."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_server.deliver.reconcile import reconcile
from mcp_server.hosts.base import Host
from mcp_server.hosts.local import LocalHost
from tests.fixtures.deliver import flat_corpus
from tests.fixtures.deliver.flat_corpus import CAPSULE, DOCUMENTS, PLANTED


async def _reconcile(evidence: Path, documents: list[str] | None = None, **kw: Any) -> Any:
    return await reconcile(LocalHost(), str(evidence), documents or list(DOCUMENTS), include_matches=True,
                           limit=1000, **kw)


def _blocking(report: Any) -> set[tuple[str, int | None, str | None, str | None, str | None, float | None]]:
    return {(f.file, f.line, f.text, f.claim_id, f.metric, f.evidence_value)
            for f in report.findings if f.severity == "blocking"}


PLANTED_SET = {(p.file, p.line, p.text, p.claim_id, p.metric, p.evidence_value) for p in PLANTED}


async def test_every_planted_drift_in_the_flat_layout_is_found_and_nothing_else_blocks(tmp_path: Path) -> None:
    report = await _reconcile(flat_corpus.build(tmp_path))
    assert report.problems == []
    assert _blocking(report) == PLANTED_SET
    assert {f.category for f in report.findings if f.severity == "blocking"} == {"stale"}
    assert [f for f in report.findings if f.category in ("evidence_out_of_date", "legacy_layout")] == []


async def test_the_flat_layout_reads_the_same_on_this_machine_and_over_ssh(tmp_path: Path, any_host: Host) -> None:
    evidence = flat_corpus.build(tmp_path)
    report = await reconcile(any_host, str(evidence), list(DOCUMENTS), limit=1000)
    assert report.problems == [] and _blocking(report) == PLANTED_SET
    assert [f for f in report.findings if f.category in ("evidence_out_of_date", "legacy_layout")] == []


async def test_the_clean_documents_of_the_flat_layout_reconcile_clean(tmp_path: Path) -> None:
    report = await _reconcile(flat_corpus.build(tmp_path), ["README.md"])
    assert report.clean and report.problems == []
    assert sorted((f.line, f.text) for f in report.findings if f.category in ("match", "rounded_match")) == [
        (3, "100"), (3, "29.95"), (3, "31.42"), (4, "30.81"), (5, "0.7612"), (6, "28.1"), (6, "31.07"),
        (11, "0.771"), (11, "28.10"), (12, "29.95")]


async def test_every_results_file_is_authoritative_whatever_its_shape(tmp_path: Path) -> None:
    evidence = flat_corpus.build(tmp_path)
    report = await _reconcile(evidence, ["README.md"], view="numbers")
    assert {(n.claim_id, n.metric, n.value_source) for n in report.numbers} == {
        ("C1", "psnr", "results.json"), ("C2", "psnr", "results.json"), ("C3", "top1_acc", "results.json"),
        ("C4", "psnr", "results.json"), ("C4", "ssim", "results.json"), ("C5", "psnr", "results.json")}
    ours = next(n for n in report.numbers if n.claim_id == "C1" and n.exp_id == "ours-full")
    assert (ours.n, ours.variance, ours.seeds) == (100, 0.08, 3)


async def test_the_legacy_symlink_layout_gives_the_same_verdicts_and_one_note_per_link(tmp_path: Path) -> None:
    report = await _reconcile(flat_corpus.build(tmp_path, selected="link"))
    assert report.problems == [] and _blocking(report) == PLANTED_SET
    notes = [f for f in report.findings if f.category == "legacy_layout"]
    links = [f"results/{exp}/selected" for exp in ("baseline", "ours-full", "ours-no-aux")]
    assert sorted(f.file for f in notes) == links
    assert {(f.severity, f.kind) for f in notes} == {("disclose", "selected_symlink")}
    assert all(f.resource == "references://delivering/data-architecture#legacy" for f in notes)
    clean = await _reconcile(tmp_path / "EVIDENCE.json", ["README.md"])
    assert clean.clean


async def test_a_capsule_whose_run_json_names_another_run_is_out_of_date(tmp_path: Path) -> None:
    evidence = flat_corpus.build(tmp_path)
    record = tmp_path / "runs" / CAPSULE / "run.json"
    record.write_text(json.dumps({"run_id": "2026-07-01T00-00-00Z-old"}))
    report = await _reconcile(evidence, ["README.md"])
    (moved,) = [f for f in report.findings if f.category == "evidence_out_of_date"]
    assert moved.kind == "provenance_location_mismatch" and f"the folder is {CAPSULE}" in (moved.note or "")


async def test_a_run_with_no_record_at_all_says_so_on_its_numbers(tmp_path: Path) -> None:
    evidence = flat_corpus.build(tmp_path)
    (tmp_path / "runs" / CAPSULE / "run.json").unlink()
    report = await _reconcile(evidence, ["README.md"], view="numbers")
    disclosures = {(n.claim_id, d.split(":")[0]) for n in report.numbers for d in n.disclosures}
    assert ("C4", "no_provenance") in disclosures and ("C1", "no_provenance") not in disclosures


async def test_a_flat_results_file_in_no_accepted_shape_is_one_problem_naming_its_place(tmp_path: Path) -> None:
    evidence = flat_corpus.build(tmp_path)
    (tmp_path / "final_ckpts" / "ours-lr3e-4" / "best_metrics.json").write_text('{"epoch": 87, "psnr": [31.07]}')
    report = await _reconcile(evidence, ["README.md"])
    (problem,) = report.problems
    assert (problem.input, problem.code, problem.json_path) == ("results", "schema", "$.psnr")
    assert problem.path is not None and problem.path.endswith("final_ckpts/ours-lr3e-4/best_metrics.json")


def _figure(root: Path, source: str) -> None:
    d = root / "figures" / "main"
    (d / "output").mkdir(parents=True)
    (d / "output" / "main.pdf").write_bytes(b"%PDF-1.4")
    (d / "source_data.csv").write_text(source)
    built = [{"exp_id": exp, "run": "selected", "run_id": flat_corpus.LEGACY_RUN, "metric": "psnr", "split": "test",
              "results_json": f"results/{exp}/selected/results.json"} for exp in ("ours-full", "baseline")]
    (d / "main.provenance").write_text(json.dumps({
        "figure": "figures/main", "supports_claims": ["C1"], "built_from": built, "source_data": "source_data.csv",
        "build": "python build.py", "rendered": ["output/main.pdf"], "disclosure": None,
        "pixel_check": {"passed": True, "checked": "2026-08-02", "notes": ""}}))


async def test_a_figure_drawn_from_flat_results_in_plain_copies_is_fresh_or_stale_by_its_values(tmp_path: Path) -> None:
    evidence = flat_corpus.build(tmp_path)
    _figure(tmp_path, "exp,psnr\nours-full,31.42\nbaseline,29.95\n")
    fresh = await _reconcile(evidence, ["README.md"])
    assert [(f.figure, f.status) for f in fresh.figures] == [("figures/main", "fresh")]
    (tmp_path / "figures" / "main" / "source_data.csv").write_text("exp,psnr\nours-full,31.24\nbaseline,29.95\n")
    stale = await _reconcile(evidence, ["README.md"])
    (finding,) = [f for f in stale.findings if f.category == "figure_stale"]
    assert finding.kind == "value_missing" and "31.42" in (finding.note or "")
