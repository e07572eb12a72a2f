"""reconcile_evidence end to end: through a real MCP client, on this machine and on a box
over SSH (a real sshd), paged, recorded in the ledger, rendering to a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_server.__main__ import main
from mcp_server.ledger import Ledger
from tests.conftest import error_text, hints, structured
from tests.fixtures.deliver import flat_corpus
from tests.fixtures.deliver.project import Project


def _project(root: Path) -> Project:
    p = Project(root)
    p.doc("README.md", "Ours reaches PSNR 31.42 dB; w/o aux gets PSNR 30.81 (single seed).\n")
    p.doc("slides.md", "Ours-full reaches PSNR 31.24\n")
    return p


async def _call(client: Any, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("reconcile_evidence", args))


async def test_the_tool_reports_a_stale_number_with_where_and_what_to_read(client: Any, tmp_path: Path) -> None:
    p = _project(tmp_path)
    out = await _call(client, evidence=str(p.evidence_path), documents=["README.md", "slides.md"])
    assert out["clean"] is False and out["summary"]["counts"]["stale"] == 1 and out["summary"]["counts"]["match"] == 2
    (stale,) = [f for f in out["findings"] if f["category"] == "stale"]
    assert (stale["file"], stale["line"], stale["column"], stale["text"]) == ("slides.md", 1, 24, "31.24")
    assert stale["evidence_value"] == 31.42 and stale["resource"] == "references://verifying/methodology#vp16"
    assert all(f["category"] != "match" for f in out["findings"])


async def test_findings_are_paged_with_next_offset(client: Any, tmp_path: Path) -> None:
    p = _project(tmp_path)
    args = {"evidence": str(p.evidence_path), "documents": ["README.md", "slides.md"], "include_matches": True,
            "limit": 2}
    first = await _call(client, **args)
    assert len(first["findings"]) == 2 and first["truncated"] and first["next_offset"] == 2
    pages = [first]
    while pages[-1]["next_offset"] is not None:
        pages.append(await _call(client, **args, offset=pages[-1]["next_offset"]))
    assert not pages[-1]["truncated"] and all(p["truncated"] for p in pages[:-1])
    assert {p["total"] for p in pages} == {sum(len(p["findings"]) for p in pages)}


async def test_the_numbers_view_pages_one_record_per_evidence_row(client: Any, tmp_path: Path) -> None:
    p = _project(tmp_path)
    out = await _call(client, evidence=str(p.evidence_path), documents=["README.md", "slides.md"], view="numbers")
    assert [(n["claim_id"], n["exp_id"], n["reconciled"]) for n in out["numbers"]] == [
        ("C1", "ours-full", "drift"), ("C1", "baseline", "absent"), ("C2", "ours-no-aux", "clean"),
        ("C3", "ours-full", "absent")]
    assert out["numbers"][0]["macro"] == "\\evCOneOursFullPsnrTest"


async def test_each_reconciliation_is_recorded_in_the_ledger(client: Any, tmp_path: Path, env: Any) -> None:
    p = _project(tmp_path)
    await _call(client, evidence=str(p.evidence_path), documents=["README.md"])
    ledger = Ledger.open(env.home / "ledger.sqlite")
    try:
        event = ledger.latest("reconcile", host="local")
    finally:
        ledger.close()
    assert event is not None and event.data["clean"] is True and event.data["counts"]["match"] == 2
    assert event.summary.startswith("clean:")


async def test_render_returns_the_generated_files_and_writes_them_when_asked(client: Any, tmp_path: Path) -> None:
    p = _project(tmp_path)
    inline = await _call(client, evidence=str(p.evidence_path), documents=["README.md"], render=True)
    names = [r["name"] for r in inline["rendered"]]
    assert names == ["evidence_macros.tex", "evidence_tables.md", "evidence_tables.tex"]
    assert "\\newcommand{\\evCOneOursFullPsnrTest}{31.42}" in inline["rendered"][0]["content"]
    written = await _call(client, evidence=str(p.evidence_path), documents=["README.md"], render=True,
                          render_dir="generated")
    for r, again in zip(inline["rendered"], written["rendered"], strict=True):
        assert Path(again["path"]).read_text() == r["content"] and again["sha256"] == r["sha256"]
    check = await _call(client, evidence=str(p.evidence_path), documents=["generated"])
    assert check["clean"] is True and check["summary"]["counts"]["match"] > 10


async def test_the_tool_is_not_destructive_and_says_it_may_write(client: Any) -> None:
    async with client.session() as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert hints(tools["reconcile_evidence"].annotations)[:3] == (False, False, True)


async def test_an_unknown_host_is_a_tool_error_that_says_so(client: Any, tmp_path: Path) -> None:
    res = await client.call_tool("reconcile_evidence", {"evidence": "/x/EVIDENCE.json", "documents": ["a.md"],
                                                        "host": "-oProxyCommand=x"})
    assert "host" in error_text(res).lower()


@pytest.fixture
def remote(env: Any, box: Any) -> str:
    env.write_inventory({"box1": {"destination": "testbox"}})
    return "box1"


async def test_documents_and_evidence_on_a_box_are_read_over_ssh(client: Any, tmp_path: Path, remote: str) -> None:
    p = _project(tmp_path)
    p.doc("paper/t.tex", "\\begin{tabular}{lc}\nMethod & PSNR \\\\\nBaseline & 29.90 \\\\\n\\end{tabular}\n")
    out = await _call(client, host=remote, evidence=str(p.evidence_path), documents=["*.md", "paper"],
                      include_matches=True)
    got = sorted((f["file"], f["category"]) for f in out["findings"] if f["category"] in ("match", "stale"))
    assert got == [("README.md", "match"), ("README.md", "match"), ("paper/t.tex", "stale"), ("slides.md", "stale")]
    assert out["problems"] == [] and {f["status"] for f in out["figures"]} == {"fresh"}


async def test_a_project_in_the_layouts_users_have_is_read_over_ssh_with_every_drift_found(
        client: Any, tmp_path: Path, remote: str) -> None:
    evidence = flat_corpus.build(tmp_path, selected="link")
    out = await _call(client, host=remote, evidence=str(evidence), documents=list(flat_corpus.DOCUMENTS), limit=200)
    blocking = sorted((f["file"], f["line"], f["text"]) for f in out["findings"] if f["severity"] == "blocking")
    assert blocking == sorted((p.file, p.line, p.text) for p in flat_corpus.PLANTED)
    assert out["problems"] == [] and out["summary"]["counts"]["legacy_layout"] == 3


async def test_render_writes_onto_the_box_over_ssh(client: Any, tmp_path: Path, remote: str) -> None:
    p = _project(tmp_path)
    out = await _call(client, host=remote, evidence=str(p.evidence_path), documents=["README.md"], render=True,
                      render_dir="gen")
    assert [Path(r["path"]).exists() for r in out["rendered"]] == [True, True, True]
    assert (tmp_path / "gen" / "evidence_tables.md").read_text().startswith("<!-- @generated")


def test_the_readme_example_call_works_from_the_command_line(tmp_path: Path, capsys: Any) -> None:
    p = _project(tmp_path)
    args = json.dumps({"evidence": str(p.evidence_path), "documents": ["README.md", "slides.md"], "limit": 5})
    assert main(["call", "reconcile_evidence", args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["counts"]["stale"] == 1


@pytest.mark.parametrize("render_dir", ["/tmp/elsewhere", "../outside", "gen/../../x", "~/x"])
async def test_security_render_dir_outside_the_evidence_folder_is_refused(client: Any, tmp_path: Path,
                                                                          render_dir: str) -> None:
    p = _project(tmp_path)
    res = await client.call_tool("reconcile_evidence", {"evidence": str(p.evidence_path), "documents": ["README.md"],
                                                        "render": True, "render_dir": render_dir})
    assert "render_dir" in error_text(res) and "[BAD_INPUT]" in error_text(res)


async def test_security_a_symlinked_render_dir_cannot_lead_the_write_out(client: Any, tmp_path: Path,
                                                                       tmp_path_factory: Any) -> None:
    p = _project(tmp_path)
    outside = tmp_path_factory.mktemp("outside")
    (p.evidence_path.parent / "gen").symlink_to(outside)
    res = await client.call_tool("reconcile_evidence", {"evidence": str(p.evidence_path), "documents": ["README.md"],
                                                        "render": True, "render_dir": "gen"})
    assert "symlink" in error_text(res) and not any(outside.iterdir())
