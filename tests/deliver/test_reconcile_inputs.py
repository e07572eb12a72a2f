"""Bad input gives one clear problem per input, and the rest of the report is still
produced: invalid JSON, schema violations (with their JSON path), missing results, binary,
huge and unreadable documents, globs that match nothing. Also the documents' own quirks:
CRLF, bad bytes, globs and folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fixtures.deliver.project import RUN, Project, blocking, check, entry, found, record


async def test_missing_evidence_is_one_problem_and_documents_are_still_read(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.evidence_path.unlink()
    report = await check(p, {"a.md": "PSNR 31.42\n"}, documents=["a.md", "missing.md"])
    codes = [(pr.input, pr.code) for pr in report.problems]
    assert codes == [("evidence", "not_found"), ("document", "not_found")]
    assert report.problems[0].message.startswith("evidence not found")
    assert not report.clean and report.summary.documents == 1


async def test_invalid_json_says_where(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.evidence_path.write_text('{"claims": [\n  {"id": "C1",}\n]}')
    report = await check(p, {"a.md": "PSNR 31.42\n"})
    (problem,) = report.problems
    assert problem.code == "invalid_json" and "line 2" in problem.message
    assert not report.clean


async def test_claims_that_are_not_a_list_are_a_schema_error_at_that_path(tmp_path: Path) -> None:
    p = Project(tmp_path, evidence={"claims": {"C1": {}}}, results={}, figures=False)
    report = await check(p, {"a.md": "PSNR 31.42\n"})
    (problem,) = report.problems
    assert (problem.code, problem.json_path, problem.expected) == ("schema", "$.claims", "type array")
    assert problem.resource == "references://delivering/evidence-manifest-schema#evidence-fields"


async def test_a_bad_claim_is_skipped_with_its_path_and_the_other_claims_are_reconciled(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    p.evidence["claims"][1]["evidence"][0]["split"] = "holdout"
    p.write_evidence()
    report = await check(p, {"a.md": "Ours PSNR 31.42\n"})
    (problem,) = report.problems
    assert problem.json_path == "$.claims[1].evidence[0].split" and problem.expected == 'one of "val", "test"'
    assert found(report, "match", claim_id="C1")


async def test_only_non_numeric_values_mean_nothing_to_reconcile(tmp_path: Path) -> None:
    p = Project(tmp_path, evidence={"claims": [{"id": "C1", "evidence": [{"metric": "psnr", "value": "high"}]}]},
                results={}, figures=False)
    report = await check(p, {"a.md": "PSNR 31.42\n"})
    assert [pr.code for pr in report.problems] == ["not_scalar", "no_scalar_rows"]


async def test_a_duplicate_claim_id_is_reported_and_the_second_skipped(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    p.evidence["claims"][2]["id"] = "C1"
    p.write_evidence()
    report = await check(p, {"a.md": "Ours PSNR 31.42\n"})
    assert [(pr.code, pr.json_path) for pr in report.problems] == [("duplicate_claim", "$.claims[2].id")]


async def test_a_missing_results_file_is_one_problem_and_the_evidence_copy_is_used(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    (p.run_dir("baseline") / "results.json").unlink()
    report = await check(p, {"a.md": "Baseline PSNR 29.95\n"}, view="numbers")
    (problem,) = report.problems
    assert (problem.input, problem.code) == ("results", "not_found") and problem.path.endswith("results.json")
    rec = record(report, "C1", "baseline")
    assert rec.value_source == "evidence" and rec.reconciled == "clean"
    assert any(d.startswith("evidence_source_missing") for d in rec.disclosures)


async def test_a_results_file_that_breaks_its_schema_names_the_path(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    (p.run_dir("baseline") / "results.json").write_text(json.dumps({"metrics": [{"metric": "PSNR", "value": "x"}]}))
    report = await check(p, {"a.md": "Baseline PSNR 29.95\n"})
    assert [(pr.input, pr.json_path) for pr in report.problems] == [("results", "$.metrics[0].value")]


async def test_a_provenance_file_that_breaks_its_schema_is_one_problem(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    prov = p.run_dir("baseline") / "provenance.json"
    data = json.loads(prov.read_text())
    data["provenance_hash"] = "md5:abc"
    prov.write_text(json.dumps(data))
    report = await check(p, {"a.md": "Baseline PSNR 29.95\n"})
    assert [(pr.input, pr.json_path) for pr in report.problems] == [("provenance", "$.provenance_hash")]
    assert found(report, "match", exp_id="baseline")


async def test_binary_huge_and_unreadable_documents_are_problems_and_the_rest_is_reconciled(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.doc("good.md", "Ours PSNR 31.50\n")
    p.doc("blob.md", b"\x89PNG\x00\x00binary")
    p.doc("huge.txt", "PSNR 31.42\n" * 900_000)
    os.mkfifo(tmp_path / "pipe.md")
    report = await check(p, documents=["good.md", "blob.md", "huge.txt", "pipe.md", "nope/*.tex"])
    problems = {pr.path: pr.code for pr in report.problems}
    assert problems == {"blob.md": "binary", "huge.txt": "bad_input", "pipe.md": "not_found", "nope/*.tex": "not_found"}
    assert "over the" in next(pr.message for pr in report.problems if pr.path == "huge.txt")
    assert [(f.file, f.category) for f in blocking(report)] == [("good.md", "stale")]
    assert not report.clean


async def test_crlf_line_ends_and_a_bad_byte_keep_line_numbers(tmp_path: Path) -> None:
    p = Project(tmp_path)
    report = await check(p, {"a.md": b"intro\r\n\r\ncaf\xe9 Ours PSNR 31.50\r\n"})
    (stale,) = blocking(report)
    assert (stale.line, stale.column, stale.text) == (3, 16, "31.50")


async def test_globs_and_folders_expand_and_skip_results_and_figure_data(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.doc("paper/main.tex", "Ours PSNR 31.42\n")
    p.doc("paper/sections/exp.tex", "Ours PSNR 31.42\n")
    p.doc("paper/notes.md", "Ours PSNR 31.42\n")
    p.doc("results/ours-full/notes.md", "Ours PSNR 99.99\n")
    by_glob = await check(p, documents=["paper/**/*.tex"])
    assert sorted({f.file for f in found(by_glob, "match")}) == ["paper/main.tex", "paper/sections/exp.tex"]
    whole = await check(p, documents=["."])
    files = {f.file for f in whole.findings if f.file}
    assert "results/ours-full/notes.md" not in files
    assert not any(f.endswith("source_data.csv") for f in files)
    assert whole.summary.documents == 3


async def test_the_light_tier_with_only_the_selected_run_on_disk_has_no_run_findings(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    report = await check(p, {"a.md": "Ours PSNR 31.42\n"})
    assert found(report, "evidence_out_of_date") == [] and report.problems == []


async def test_a_named_run_that_is_not_on_disk_is_disclosed_as_offloaded(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    r = p.evidence["claims"][1]["evidence"][0]
    r["run"] = "2026-01-01T00-00-00Z-old"
    r["results_json"] = "results/ours-no-aux/runs/2026-01-01T00-00-00Z-old/results.json"
    p.write_evidence()
    report = await check(p, {"a.md": "w/o aux: PSNR 30.81 (single seed)\n"}, view="numbers")
    assert report.problems == []
    assert any(d.startswith("run_offloaded") for d in record(report, "C2").disclosures)


async def test_an_evidence_folder_is_accepted_for_its_evidence_json(tmp_path: Path) -> None:
    from mcp_server.deliver.reconcile import reconcile
    from mcp_server.hosts.local import LocalHost

    p = Project(tmp_path, figures=False)
    p.doc("a.md", "Ours PSNR 31.42\n")
    report = await reconcile(LocalHost(), str(tmp_path), ["a.md"])
    assert report.evidence == str(p.evidence_path) and report.clean


async def test_a_row_whose_results_lack_the_metric_is_out_of_date(tmp_path: Path) -> None:
    p = Project(tmp_path, figures=False)
    p.run("baseline", RUN, [entry("SSIM", 0.88)])
    report = await check(p, {"a.md": "Baseline PSNR 29.95\n"})
    (missing,) = found(report, "evidence_out_of_date")
    assert missing.kind == "metric_missing_from_results" and missing.exp_id == "baseline"


def test_every_resource_a_finding_or_problem_names_exists() -> None:
    from mcp_server.deliver.models import PRINCIPLES, RESOURCE, SCHEMA_RESOURCE
    from mcp_server.knowledge import resolve

    for uri in {*RESOURCE.values(), SCHEMA_RESOURCE, PRINCIPLES}:
        page, section = resolve(uri)
        assert page is not None and ("#" not in uri or section is not None), uri


def test_the_schemas_ship_as_package_data_and_are_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    from mcp_server.deliver.evidence.schema import SCHEMAS, schema

    for name in SCHEMAS:
        s = schema(name)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(s)
