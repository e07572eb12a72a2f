"""Black-box scenarios 10-15 of deliver.md section 7, on a real project tree: the results
are authoritative, runs and figures changed after recording, caveats that must travel, mapping
gaps, and generated macros. Scenarios 1-9 are in test_reconcile_scenarios.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fixtures.deliver.project import RUN, Project, blocking, check, entry, found, record


# 10 ------------------------------------------------------------------------------------
def _results_now(p: Project, value: float, run_id: str = RUN) -> None:
    metrics = [entry("PSNR", value, std=0.08, seeds=3), entry("top1_acc", 0.7612), entry("SSIM", 0.912)]
    p.run("ours-full", run_id, metrics)


async def test_the_results_are_authoritative_when_the_evidence_copy_is_stale(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    _results_now(p, 31.38)
    report = await check(p, {"paper.md": "Ours PSNR 31.42\n\nOurs PSNR 31.38\n"})
    (copy,) = found(report, "evidence_out_of_date")
    assert (copy.kind, copy.claim_id, copy.exp_id, copy.reported, copy.evidence_value) == (
        "evidence_value_mismatch", "C1", "ours-full", 31.42, 31.38)
    verdicts = [(f.line, f.category, f.evidence_value) for f in report.findings if f.file == "paper.md"]
    assert verdicts == [(1, "stale", 31.38), (3, "match", 31.38)]


async def test_a_re_pointed_selected_gives_the_same_verdicts_and_a_pinned_run_reports_the_move(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    p.evidence["claims"][0]["evidence"][0]["run_id"] = RUN
    p.write_evidence()
    _results_now(p, 31.38, run_id="2026-07-01T00-00-00Z-r2")
    report = await check(p, {"paper.md": "Ours PSNR 31.42\n\nOurs PSNR 31.38\n"})
    kinds = sorted(f.kind for f in found(report, "evidence_out_of_date"))
    assert kinds == ["evidence_value_mismatch", "selected_repointed"]
    assert [(f.line, f.category) for f in report.findings if f.file == "paper.md"] == [(1, "stale"), (3, "match")]


# 11 ------------------------------------------------------------------------------------
async def test_a_run_directory_changed_after_recording_is_reported_with_both_digests(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    config = p.run_dir("ours-full") / "config.resolved.yaml"
    config.write_text("model: changed\n")
    report = await check(p, {"paper.md": "Ours PSNR 31.42\n"}, view="numbers")
    assert not report.clean
    full = await check(p, documents=["paper.md"])
    (mod,) = found(full, "evidence_out_of_date", kind="run_modified")
    assert "config.resolved.yaml" in mod.note and "recorded sha256:" in mod.note and "now sha256:" in mod.note
    assert any("uncertified" in d for d in record(report, "C1", "ours-full").disclosures)


async def test_results_edited_in_place_are_caught_by_the_sealed_digest(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    p.run("ours-full", RUN, [entry("PSNR", 31.42, std=0.08, seeds=3), entry("top1_acc", 0.7612)], artifacts=True)
    results = p.run_dir("ours-full") / "results.json"
    results.write_text(results.read_text().replace("31.42", "31.45"))
    report = await check(p, {"paper.md": "Ours PSNR 31.45\n"})
    kinds = sorted(f.kind for f in found(report, "evidence_out_of_date"))
    assert kinds == ["evidence_value_mismatch", "run_modified"]
    assert any("results.json" in (f.note or "") for f in found(report, "evidence_out_of_date", kind="run_modified"))


async def test_results_edited_in_place_without_pins_show_only_as_a_value_mismatch(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    results = p.run_dir("ours-full") / "results.json"
    results.write_text(results.read_text().replace("31.42", "31.45"))
    report = await check(p, {"paper.md": "Ours PSNR 31.45\n"})
    assert [f.kind for f in found(report, "evidence_out_of_date")] == ["evidence_value_mismatch"]


async def test_edited_hash_inputs_fail_the_recomputed_provenance_hash(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    prov_path = p.run_dir("baseline") / "provenance.json"
    prov = json.loads(prov_path.read_text())
    prov["hash_inputs"]["seed"]["value"] = [7]
    prov_path.write_text(json.dumps(prov))
    report = await check(p, {"paper.md": "Baseline PSNR 29.95\n"})
    (bad,) = found(report, "evidence_out_of_date")
    assert bad.kind == "provenance_hash_mismatch" and bad.exp_id == "baseline"


async def test_pruning_qualitative_images_is_not_a_finding(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    run = p.run("ours-full", RUN, [entry("PSNR", 31.42, std=0.08, seeds=3), entry("top1_acc", 0.7612)], artifacts=True)
    (run / "qualitative" / "sr" / "set5" / "pred" / "0001.png").unlink()
    report = await check(p, {"paper.md": "Ours PSNR 31.42\n"})
    assert found(report, "evidence_out_of_date") == []


async def test_a_selected_pointer_outside_runs_is_reported(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    elsewhere = tmp_path / "elsewhere"
    os.rename(p.run_dir("ours-full"), elsewhere)
    link = tmp_path / "results" / "ours-full" / "selected"
    link.unlink()
    os.symlink(elsewhere, link)
    report = await check(p, {"paper.md": "Ours PSNR 31.42\n"})
    (bad,) = found(report, "evidence_out_of_date", kind="selected_outside_runs")
    assert bad.file == "results/ours-full/selected" and "elsewhere" in bad.note


# 12 ------------------------------------------------------------------------------------
async def test_a_figure_drawn_from_a_run_that_was_replaced_is_stale_with_the_rebuild_hint(tmp_path: Path) -> None:
    p = Project(tmp_path)
    fig = p.figure("aux-ablation-bar", ["C2"], [("ours-no-aux", "PSNR")], "exp,metric,value\nours-no-aux,PSNR,30.81\n",
                   disclosure="Single seed.", pins=True)
    p.run("ours-no-aux", "R2", [entry("PSNR", 30.95, std=0.10, seeds=1)])
    report = await check(p, {"slides.md": "w/o aux: PSNR 30.95 (single seed)\n"})
    stale = found(report, "figure_stale", file="figures/aux-ablation-bar/aux-ablation-bar.provenance")
    assert {f.kind for f in stale} == {"run_changed", "results_changed", "value_missing"}
    assert all("python _build_bar.py && python script.py" in f.note for f in stale)
    assert any(RUN in f.note and "R2" in f.note for f in stale)
    assert any("30.95" in f.note for f in stale)
    assert {s.figure: s.status for s in report.figures}["figures/aux-ablation-bar"] == "stale"
    assert (fig / "source_data.csv").exists() and (fig / "output" / "aux-ablation-bar.pdf").exists()


async def test_without_pins_a_figure_is_stale_when_its_value_is_not_in_the_source_data(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.run("ours-no-aux", "R2", [entry("PSNR", 30.95, std=0.10, seeds=1)])
    report = await check(p, {"slides.md": "w/o aux: PSNR 30.95 (single seed)\n"})
    assert [f.kind for f in found(report, "figure_stale")] == ["value_missing"]


async def test_a_figure_whose_source_did_not_change_is_fresh(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.figure("aux-ablation-bar", ["C2"], [("ours-no-aux", "PSNR")], "exp,metric,value\nours-no-aux,PSNR,30.81\n",
             disclosure="Single seed.", pins=True)
    report = await check(p, {"slides.md": "w/o aux: PSNR 30.81 (single seed)\n"})
    assert found(report, "figure_stale") == []
    assert {s.status for s in report.figures} == {"fresh"}


# 13 ------------------------------------------------------------------------------------
async def test_a_caveat_missing_beside_its_number_is_disclosed_and_never_blocks(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.figure("aux-ablation-bar", ["C2"], [("ours-no-aux", "PSNR")], "exp,metric,value\nours-no-aux,PSNR,30.81\n")
    report = await check(p, {"slides.md": "w/o aux: PSNR 30.81\n"})
    assert found(report, "match", file="slides.md", text="30.81")
    assert blocking(report) == [] and report.clean
    assert [(f.file, f.line) for f in found(report, "disclosure_missing")] == [
        ("figures/aux-ablation-bar/aux-ablation-bar.provenance", None), ("slides.md", 1)]
    numbers = await check(p, documents=["slides.md"], view="numbers")
    disclosures = record(numbers, "C2").disclosures
    assert "Single seed (seeds=1): no variance band." in disclosures
    assert any(d.startswith("single_seed") for d in disclosures)


async def test_a_caveat_printed_in_the_same_paragraph_satisfies_the_check(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"slides.md": "w/o aux: PSNR 30.81\n(single seed)\n"})
    assert found(report, "disclosure_missing", file="slides.md") == []


async def test_a_split_audit_finding_travels_with_every_number_of_that_experiment(tmp_path: Path) -> None:
    p = Project(tmp_path)
    splits = tmp_path / "results" / "ours-full" / "splits"
    splits.mkdir()
    (splits / "split_manifest.json").write_text(json.dumps({"audit": {"test_used_for_selection": True}}))
    report = await check(p, {"a.md": "Ours PSNR 31.42\n"}, view="numbers")
    for rec in report.numbers:
        has = any(d.startswith("split_audit_finding") for d in rec.disclosures)
        assert has == (rec.exp_id == "ours-full"), rec
    assert report.summary.blocking == 0


async def test_a_dirty_tree_is_disclosed_on_that_runs_numbers(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.run("baseline", RUN, [entry("PSNR", 29.95, std=0.11, seeds=3)], dirty=True)
    report = await check(p, {"a.md": "Baseline PSNR 29.95\n"}, view="numbers")
    assert any(d.startswith("dirty_tree") for d in record(report, "C1", "baseline").disclosures)
    assert not any(d.startswith("dirty_tree") for d in record(report, "C1", "ours-full").disclosures)


# 14 ------------------------------------------------------------------------------------
async def test_orphans_and_mapping_gaps_are_disclosed_not_blocking(tmp_path: Path) -> None:
    p = Project(tmp_path)
    old = tmp_path / "figures" / "old-plot"
    old.mkdir()
    (old / "plot.png").write_bytes(b"png")
    p.evidence["claims"][0]["repo_implementation"] = None
    p.write_evidence()
    report = await check(p, {"README.md": "SSIM 0.912\n"})
    assert blocking(report) == []
    (unbacked,) = found(report, "unbacked_number")
    assert (unbacked.file, unbacked.text, unbacked.metric, unbacked.exp_id) == (
        "README.md", "0.912", "SSIM", "ours-full")
    assert "C3" in {f.claim_id for f in found(report, "claim_missing")}
    assert found(report, "figure_disclosure", kind="figure_orphan", file="figures/old-plot")
    assert found(report, "claim_unmapped", claim_id="C1", kind="repo_implementation")


async def test_a_sidecar_supporting_an_unknown_claim_is_an_orphan(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.figure("main-comparison", ["C1", "C9"], [("ours-full", "PSNR")], "exp,metric,value\nours-full,PSNR,31.42\n")
    report = await check(p, {"a.md": "Ours PSNR 31.42\n"})
    assert found(report, "figure_disclosure", kind="figure_orphan", claim_id="C9")


async def test_a_claim_pointing_at_a_figure_that_does_not_list_it_is_a_one_way_binding(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.figure("main-comparison", ["C2"], [("ours-full", "PSNR")], "exp,metric,value\nours-full,PSNR,31.42\n",
             disclosure="x")
    report = await check(p, {"a.md": "Ours PSNR 31.42\n"})
    one_way = found(report, "figure_disclosure", kind="binding_one_way")
    assert {f.claim_id for f in one_way} == {"C1", "C2"}


# 15 ------------------------------------------------------------------------------------
_PAPER = ("\\begin{abstract}\nWe reach a PSNR of \\mainPSNR{} dB.\n\\end{abstract}\n"
          "\\section{Conclusion}\nOurs reaches PSNR 31.42.\n")


async def test_a_generated_macro_use_and_a_typed_literal_both_match_and_are_told_apart(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"macros.tex": "\\newcommand{\\mainPSNR}{31.42}\n", "paper.tex": _PAPER})
    got = [(f.line, f.text, f.category, f.source) for f in report.findings if f.file == "paper.tex"]
    assert got == [(2, "\\mainPSNR", "match", "generated"), (5, "31.42", "match", "typed")]
    numbers = await check(p, documents=["macros.tex", "paper.tex"], view="numbers")
    assert record(numbers, "C1", "ours-full").regenerable == "transcribed"


async def test_a_macro_generated_from_old_evidence_makes_its_uses_stale(tmp_path: Path) -> None:
    p = Project(tmp_path)
    docs = {"macros.tex": "\\newcommand{\\mainPSNR}{31.38}\n", "paper.tex": "Ours reaches a PSNR of \\mainPSNR{} dB.\n"}
    report = await check(p, docs)
    (stale,) = blocking(report)
    assert (stale.category, stale.text, stale.reported, stale.evidence_value) == ("stale", "\\mainPSNR", 31.38, 31.42)


async def test_a_stale_macro_use_that_names_no_row_is_ambiguous_and_lists_the_rows(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"macros.tex": "\\newcommand{\\mainPSNR}{31.38}\n",
                             "paper.tex": "A PSNR of \\mainPSNR{} dB.\n"})
    (amb,) = blocking(report)
    assert amb.category == "ambiguous"
    assert {(c.exp_id, c.value) for c in amb.candidates} == {
        ("ours-full", 31.42), ("baseline", 29.95), ("ours-no-aux", 30.81)}


async def test_a_band_inside_a_macro_is_checked_against_the_variance(tmp_path: Path) -> None:
    p = Project(tmp_path)
    docs = {"macros.tex": "\\newcommand{\\oursPSNR}{$31.42 \\pm 0.09$}\n",
            "paper.tex": "Ours reaches PSNR \\oursPSNR.\n"}
    report = await check(p, docs)
    assert [(f.category, f.kind, f.reported) for f in blocking(report)] == [("stale", "variance", 0.09)]


async def test_uses_of_rendered_macros_are_bound_to_their_row_without_a_keyword(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"m.tex": "\\newcommand{\\evCOneOursFullPsnrTest}{31.24}\n",
                             "paper.tex": "Our method reaches \\evCOneOursFullPsnrTest{} dB.\n"})
    got = sorted((f.file, f.category, f.exp_id) for f in blocking(report))
    assert got == [("m.tex", "stale", "ours-full"), ("paper.tex", "stale", "ours-full")]
