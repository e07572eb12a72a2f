"""Local tamper: a file deleted or changed in the local copy after a verification is named, with
what differs, before the next round pulls it again; a file only touched is neither named nor
re-sent."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from mcp_server.verify.artifacts.state import PulledFile, stamped
from mcp_server.verify.artifacts.tamper import local_changes
from tests.verify.artifacts.pulls import until_done


def _pulled(path: Path) -> PulledFile:
    data = path.read_bytes()
    return stamped(PulledFile(status="done", sha256=hashlib.sha256(data).hexdigest(), size=len(data)), path.stat())


def test_a_touched_but_identical_file_is_not_named_and_keeps_counting_as_verified(tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    f.write_text('{"a": 1}')
    files = {"a.json": _pulled(f)}
    os.utime(f, (1_000_000, 1_000_000))
    assert local_changes(tmp_path, files) == []
    assert files["a.json"].status == "done" and files["a.json"].mtime == 1_000_000


def test_each_missing_or_changed_file_is_named_with_what_differs_and_marked_for_a_new_pull(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("gone.pth", "edited.csv", "cut.bin", "same.txt"):
        (copy / name).write_bytes(b"0123456789")
    files = {p.name: _pulled(p) for p in copy.iterdir()}
    (copy / "gone.pth").unlink()
    (copy / "edited.csv").write_bytes(b"0123456780")
    (copy / "cut.bin").write_bytes(b"01234")
    found = {f.path: f for f in local_changes(copy, files)}
    assert sorted(found) == ["cut.bin", "edited.csv", "gone.pth"]
    assert "gone.pth (missing)" in found["gone.pth"].message
    assert "edited.csv (sha256 differs)" in found["edited.csv"].message
    assert "size differs: 5 bytes, verified 10" in found["cut.bin"].message
    assert all(f.kind == "local_changed" and f.message.startswith("local copy changed since verification")
               for f in found.values())
    assert {p: r.status for p, r in files.items()} == {"gone.pth": "stale", "edited.csv": "stale",
                                                       "cut.bin": "stale", "same.txt": "done"}


def test_security_a_same_size_rewrite_with_its_mtime_restored_is_caught(tmp_path: Path) -> None:
    f = tmp_path / "metrics.json"
    f.write_text('{"psnr": 31.42}')
    files = {"metrics.json": _pulled(f)}
    st = f.stat()
    f.write_text('{"psnr": 33.42}')  # same size, a better number
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime put back
    found = local_changes(tmp_path, files)
    assert [x.path for x in found] == ["metrics.json"] and "sha256 differs" in found[0].message


async def test_a_later_round_names_local_changes_then_pulls_only_those_again(results, client) -> None:
    roster = ["seed1/*", "train.csv"]
    first = await until_done(client, root=str(results), roster=roster)
    assert first["passed"]
    dest = Path(first["dest"])
    (dest / "seed1" / "metrics.json").unlink()
    csv = dest / "train.csv"
    csv.write_bytes(csv.read_bytes().replace(b"1.2", b"7.7"))  # same size, other bytes
    ckpt = dest / "seed1" / "best.pth"
    os.utime(ckpt, (1_000_000, 1_000_000))  # touched only
    again = await until_done(client, root=str(results), roster=roster)
    named = {f["path"]: f["message"] for f in again["findings"] if f["kind"] == "local_changed"}
    assert sorted(named) == ["seed1/metrics.json", "train.csv"]
    assert "seed1/metrics.json (missing)" in named["seed1/metrics.json"]
    assert "train.csv (sha256 differs)" in named["train.csv"]
    assert again["passed"] is True
    assert again["bytes_transferred"] == (results / "seed1" / "metrics.json").stat().st_size + csv.stat().st_size
    assert csv.read_bytes() == (results / "train.csv").read_bytes()
