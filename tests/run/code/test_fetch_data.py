"""fetch_data through the real MCP client, on this machine and over the test sshd, against a
local HTTP server the test starts: a download cut mid-file resumes to the right sha256 as a
detached run, a second call is a no-op, a wrong hash fails and leaves no file, a disk shortfall
refuses before any download, a token reaches the server but never argv or the run's files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_text, structured
from tests.support.http_files import Files


@pytest.fixture
def files() -> Iterator[Files]:
    f = Files()
    yield f
    f.stop()


@pytest.fixture
def durable(durable_box: Any) -> Path:
    """The durable root of `gpu1` (this machine, or the test sshd): fetches land under it."""
    return Path(durable_box.durable)


async def fetch(client: Any, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("fetch_data", {"host": "gpu1", **args}))


async def wait(client: Any, run_id: str) -> dict[str, Any]:
    for _ in range(10):
        r = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": run_id, "timeout_s": 30}))
        if r["ended"]:
            return r
    raise AssertionError("the fetch never ended")


async def test_a_cut_download_resumes_to_the_right_hash_and_a_second_call_is_a_no_op(
        client: Any, files: Files, durable: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 11)
    files.files["/shards/train-00000.tar"] = data
    files.cut_first.add("/shards/train-00000.tar")
    dest = durable / "data/train-00000.tar"
    sha = hashlib.sha256(data).hexdigest()
    r = await fetch(client, url=files.url("/shards/train-00000.tar"), dest=str(dest), sha256=sha)
    assert r["outcome"] == "started" and r["expected_bytes"] == len(data)
    done = await wait(client, r["run"]["run_id"])
    assert done["state"]["status"] == "succeeded", done
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == sha
    log = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": r["run"]["run_id"]}))["text"]
    assert "attempt 1 of 8 failed" in log and "rgt-fetch: done" in log
    assert len(files.gets) >= 2, "the second attempt asked for the rest (Range), not the whole file"
    again = await fetch(client, url=files.url("/shards/train-00000.tar"), dest=str(dest), sha256=sha)
    assert again["outcome"] == "already_there" and again["sha256"] == sha and again["run"] is None


async def test_a_wrong_hash_fails_the_run_and_leaves_no_file(client: Any, files: Files, durable: Path) -> None:
    files.files["/w.bin"] = b"x" * 1000
    dest = durable / "data/w.bin"
    r = await fetch(client, url=files.url("/w.bin"), dest=str(dest), sha256="0" * 64)
    done = await wait(client, r["run"]["run_id"])
    assert done["state"]["status"] == "failed" and done["state"]["exit_code"] == 65
    assert not dest.exists() and not Path(str(dest) + ".part").exists()


async def test_a_disk_shortfall_refuses_before_downloading(client: Any, files: Files, durable: Path) -> None:
    files.files["/huge.bin"] = b"tiny"
    files.claimed_length["/huge.bin"] = 2**60  # what the server says it is
    text = error_text(await client.call_tool("fetch_data", {"host": "gpu1", "url": files.url("/huge.bin"),
                                                            "dest": str(durable / "data/huge.bin")}))
    assert "[GATE_REFUSED]" in text and "nothing was downloaded" in text
    assert files.gets == [], "no byte was asked for"


async def test_the_token_reaches_the_server_but_never_argv_or_the_run_files(
        client: Any, files: Files, durable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "tok-" + os.urandom(8).hex()
    monkeypatch.setenv("DATA_TOKEN", token)
    files.token = token
    files.files["/gated.bin"] = b"weights" * 100
    r = await fetch(client, url=files.url("/gated.bin"), dest=str(durable / "data/gated.bin"),
                    token_env="DATA_TOKEN")
    done = await wait(client, r["run"]["run_id"])
    assert done["state"]["status"] == "succeeded"
    assert f"Bearer {token}" in files.auth_seen
    run_dir = Path(r["run"]["run_dir"])
    for p in run_dir.rglob("*"):
        if p.is_file():
            assert token.encode() not in p.read_bytes(), p
    assert token not in str(r)


async def test_dest_outside_the_roots_is_refused(client: Any, files: Files, durable: Path) -> None:
    text = error_text(await client.call_tool("fetch_data", {"host": "gpu1", "url": files.url("/x"),
                                                            "dest": "/etc/cron.d/x"}))
    assert "dest must be under the box's durable or scratch root" in text


async def test_a_different_source_into_a_fetched_dest_is_refused(client: Any, files: Files, durable: Path) -> None:
    files.files["/a.bin"] = b"a" * 100
    files.files["/b.bin"] = b"b" * 100
    dest = durable / "data/x.bin"
    r = await fetch(client, url=files.url("/a.bin"), dest=str(dest))
    assert (await wait(client, r["run"]["run_id"]))["state"]["status"] == "succeeded"
    text = error_text(await client.call_tool("fetch_data", {"host": "gpu1", "url": files.url("/b.bin"),
                                                            "dest": str(dest)}))
    assert "already holds a different fetch" in text
    assert dest.read_bytes() == b"a" * 100


async def test_a_hugging_face_repo_is_fetched_with_the_token_as_hf_token(
        client: Any, env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hf` cannot reach the Hub from here: a stand-in on PATH records its arguments and whether
    HF_TOKEN reached it (not its value), as the real CLI would read it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "hf").write_text('#!/bin/sh\nout=$(dirname "$0")/../hf-args\nprintf "%s\\n" "$*" > "$out"\n'
                               'printf "%s" "${#HF_TOKEN}" > "$out.token"\n'
                               'mkdir -p "$6" && echo weights > "$6/model.safetensors"\n')
    (bindir / "hf").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("MY_HUB_TOKEN", "hf_" + "x" * 30)
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(durable)}})
    dest = durable / "models/qwen"
    r = await fetch(client, hf_repo="Qwen/Qwen2.5-0.5B", dest=str(dest), revision="main", token_env="MY_HUB_TOKEN",
                    expected_gib=1)
    assert (await wait(client, r["run"]["run_id"]))["state"]["status"] == "succeeded"
    args = (tmp_path / "hf-args").read_text()
    assert "download Qwen/Qwen2.5-0.5B --repo-type model --local-dir" in args and "--revision main" in args
    assert (tmp_path / "hf-args.token").read_text() == "33", "the named token reached hf as HF_TOKEN"
    assert "hf_" not in args, "never in argv"
    again = await fetch(client, hf_repo="Qwen/Qwen2.5-0.5B", dest=str(dest), revision="main", expected_gib=1)
    assert again["outcome"] == "already_there"
