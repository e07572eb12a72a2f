"""The search index cache: built once and reused across processes, keyed by the knowledge files
and the search code, written atomically, rebuilt when corrupt or foreign, skipped when it
cannot be written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_server import search
from mcp_server.search import SearchIndex, load_index


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def ranks(index: SearchIndex, query: str) -> list[tuple[str, float]]:
    return [(s.uri, round(score, 4)) for s, score in index.rank(query, 5)]


def only_entry(root: Path) -> Path:
    (entry,) = list(root.iterdir())
    return entry


def test_a_cached_index_answers_exactly_like_a_fresh_one(cache: Path) -> None:
    fresh = load_index(None)
    load_index(cache)  # builds and writes
    cached = load_index(cache)  # reads
    for q in ("stopped pod still charging", "hf_transfer hangs", "释放实例", "U7"):
        assert ranks(cached, q) == ranks(fresh, q)


def test_a_second_load_reads_the_cache_instead_of_indexing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_index(cache)

    def no_indexing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the corpus was indexed again")

    monkeypatch.setattr(search.bm25s.BM25, "index", no_indexing)
    assert ranks(load_index(cache), "Xid 79")[0][0] == "references://run-remote/gotchas#u22"


def test_the_cache_is_written_whole_and_only_one_version_is_kept(cache: Path) -> None:
    load_index(cache)
    entry = only_entry(cache)
    assert {"sections.json", "params.index.json", "vocab.index.json"} <= {p.name for p in entry.iterdir()}
    stale = cache / ("0" * 24)
    stale.mkdir()
    (stale / "sections.json").write_text("[]")
    entry_files = {p.name for p in entry.iterdir()}
    shutil.rmtree(entry)
    load_index(cache)
    assert only_entry(cache).name == entry.name, "an index for other knowledge files is pruned"
    assert {p.name for p in only_entry(cache).iterdir()} == entry_files


@pytest.mark.parametrize("damage", ["truncate", "foreign", "garbage-json", "missing-file"])
def test_a_corrupt_cache_is_rebuilt_not_trusted(cache: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    load_index(cache)
    entry = only_entry(cache)
    if damage == "truncate":
        (entry / "data.csc.index.npy").write_bytes(b"\x93NUMPY")
    elif damage == "foreign":
        (entry / "sections.json").write_text('["references://other#x"]')
    elif damage == "garbage-json":
        (entry / "vocab.index.json").write_text("{not json")
    else:
        (entry / "params.index.json").unlink()
    index = load_index(cache)
    assert ranks(index, "Xid 79")[0][0] == "references://run-remote/gotchas#u22"
    assert "rebuilding" in caplog.text
    assert ranks(load_index(cache), "Xid 79") == ranks(index, "Xid 79"), "the rebuilt cache is good again"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_an_unwritable_cache_directory_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o500)
    try:
        assert ranks(load_index(root), "U7")[0][0] == "references://run-remote/gotchas#u7"
    finally:
        root.chmod(0o700)


def test_a_cache_path_that_cannot_be_a_directory_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert ranks(load_index(blocker), "U7")[0][0] == "references://run-remote/gotchas#u7"


def test_the_key_changes_with_the_knowledge_and_not_between_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, key = search._inputs()
    assert search._inputs()[2] == key
    real = search.docs

    def edited(kind: str) -> tuple[object, ...]:
        pages = real(kind)  # type: ignore[arg-type]
        if kind != "references":
            return pages
        first = pages[0]
        return (type(first)(kind=first.kind, path=first.path, text=first.text + "\nedited\n"), *pages[1:])

    monkeypatch.setattr(search, "docs", edited)
    assert search._inputs()[2] != key


def test_the_server_process_uses_the_cache_under_rgt_home(tmp_path: Path) -> None:
    env = {**os.environ, "RGT_HOME": str(tmp_path / "home")}
    code = "from mcp_server.search import default_index; print(default_index().rank('U7', 1)[0][0].uri)"
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "references://run-remote/gotchas#u7"
    root = tmp_path / "home" / "cache" / "search-index"
    assert len(list(root.iterdir())) == 1 and not list(root.glob(".tmp-*"))
