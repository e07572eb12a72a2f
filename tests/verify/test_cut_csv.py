"""A CSV whose writer stopped mid-row fails verify_artifacts (issue 30): a machine-written CSV
ends every row with a newline, so a last row without one is a cut row, named by its line, even
when its field count is right; `hand_made` accepts a file written by hand. Through a real MCP
client over the test sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server.verify.artifacts.checks import check_file
from tests.conftest import Env
from tests.support.sshd import Sshd
from tests.verify.artifacts.pulls import until_done

CUT = b"epoch,loss\n1,0.9\n2,0.5\n3,"


@pytest.fixture
def csv_root(env: Env, box: Sshd, tmp_path: Path) -> Path:
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path)}})
    root = tmp_path / "export" / "run-1"
    root.mkdir(parents=True)
    return root


def verdict(result: dict, path: str) -> dict:
    return next(v for v in result["verdicts"] if v["path"] == path)


async def test_a_csv_cut_mid_row_fails_with_a_finding_naming_its_last_line(csv_root: Path, client) -> None:
    (csv_root / "train.csv").write_bytes(CUT)
    r = await until_done(client, root=str(csv_root), roster=["train.csv"])
    assert r["passed"] is False
    v = verdict(r, "train.csv")
    assert not v["ok"] and v["finding"] == "load_error"
    assert v["detail"].startswith("line 4: the last row has no final newline") and "hand_made" in v["detail"]


async def test_a_complete_csv_still_passes(csv_root: Path, client) -> None:
    (csv_root / "train.csv").write_bytes(CUT + b"0.3\n")
    r = await until_done(client, root=str(csv_root), roster=["train.csv"])
    assert r["passed"] is True and verdict(r, "train.csv")["ok"]


async def test_a_csv_written_by_hand_without_a_final_newline_passes_when_named_in_hand_made(
        csv_root: Path, client) -> None:
    (csv_root / "table.csv").write_bytes(b"method,score\nours,0.91\nbaseline,0.88")
    (csv_root / "train.csv").write_bytes(CUT)
    r = await until_done(client, root=str(csv_root), roster=["*.csv"], hand_made=["table.csv"])
    assert verdict(r, "table.csv")["ok"] and "written by hand" in verdict(r, "table.csv")["detail"]
    assert not verdict(r, "train.csv")["ok"] and r["passed"] is False, "only the files it names"


@pytest.mark.parametrize(("data", "line"), [(b"a,b\n1,2\n3,4", 3), (b"a,b", 1), (b"a\tb\n1\t", 2)])
def test_any_last_line_without_a_newline_is_cut_in_csv_and_tsv(tmp_path: Path, data: bytes, line: int) -> None:
    rel = "t.tsv" if b"\t" in data else "t.csv"
    (tmp_path / rel).write_bytes(data)
    v = check_file(tmp_path / rel, rel)
    assert not v.ok and v.detail.startswith(f"line {line}: the last row has no final newline")
