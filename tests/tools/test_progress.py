"""Progress through the real MCP client's progress callback: the launch probe (run id first),
the audit fan-out (hosts done of total), reconcile (documents done) and verify_artifacts
(bytes pulled of total, in tests/verify/artifacts/test_verify_progress.py). Values are
monotone and end at the total; a client that sent no progress token gets the same result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Env, structured
from tests.fixtures.deliver.project import Project

Seen = list[tuple[float, float | None, str | None]]


def recorder() -> tuple[Seen, Any]:
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    return seen, on_progress


def assert_monotone(seen: Seen) -> None:
    values = [p for p, _, _ in seen]
    assert values and values == sorted(values), seen


async def test_the_launch_probe_reports_the_run_id_first_then_elapsed_time(env: Env, client, tmp_path: Path) -> None:
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(tmp_path / "durable")}})
    (tmp_path / "durable").mkdir()
    seen, on_progress = recorder()
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": "sleep 4", "probe_s": 2.5},
                                            progress_callback=on_progress))
    run_id = res["outcomes"][0]["launch"]["run_id"]
    assert_monotone(seen)
    assert run_id in (seen[0][2] or "") and seen[0][0] == 0 and {t for _, t, _ in seen} == {2.5}
    assert len(seen) >= 2 and all(p < 2.5 for p, _, _ in seen)


async def test_an_audit_fan_out_reports_hosts_done_of_total(env: Env, client, tmp_path: Path) -> None:
    env.write_inventory({n: {"destination": "local", "durable_root": str(tmp_path / n)} for n in ("a", "b", "c")})
    for n in ("a", "b", "c"):
        (tmp_path / n).mkdir()
    seen, on_progress = recorder()
    res = structured(await client.call_tool("audit_box", {"hosts": ["a", "b", "c"]}, progress_callback=on_progress))
    assert [o["host"] for o in res["outcomes"]] == ["a", "b", "c"]
    assert [(p, t) for p, t, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    assert {m.rsplit(": ", 1)[1] for _, _, m in seen if m} == {"a", "b", "c"}


async def test_reconcile_reports_documents_done(client, tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.doc("README.md", "Ours reaches PSNR 31.42 dB.\n")
    p.doc("slides.md", "Ours-full reaches PSNR 31.24\n")
    seen, on_progress = recorder()
    args = {"evidence": str(p.evidence_path), "documents": ["README.md", "slides.md"]}
    out = structured(await client.call_tool("reconcile_evidence", args, progress_callback=on_progress))
    assert out["summary"]["documents"] == 2
    assert_monotone(seen)
    assert [(p, t) for p, t, _ in seen] == [(1, 3), (2, 3), (3, 3)] and "numbers checked" in (seen[-1][2] or "")
    assert structured(await client.call_tool("reconcile_evidence", args))["summary"] == out["summary"]
