"""Large files over far links (issue 33): verify_artifacts measures the link and, when it is far,
pulls a large file in pieces over parallel streams, each written at its offset and the whole
hashed in order, once. Through the real MCP client, over the test sshd: behind a relay that
delays every chunk (the link is measured far), or with every link taken as far."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_server.verify.artifacts import partial_hash, pull
from mcp_server.verify.artifacts.receive import COUNTS
from mcp_server.verify.artifacts.spans import PIECE, SpanPlan, plan_file
from mcp_server.verify.artifacts.state import state_dir
from tests.conftest import Env, error_text
from tests.support.relay import DelayedLink
from tests.support.sshd import Sshd
from tests.support.wait import until
from tests.verify.artifacts.pulls import held, until_done, verify


@pytest.fixture
async def far_box(env: Env, box: Sshd, tmp_path: Path) -> AsyncIterator[Path]:
    """Inventory host gpu1: the test sshd behind a relay that holds every chunk 25 ms each way."""
    link = DelayedLink(box.port, 0.025)
    await link.start()
    known = tmp_path / "known_hosts_far"
    known.write_text(box.known_hosts_line().replace(f":{box.port} ", f":{link.port} ", 1) + "\n")
    env.ssh_config.write_text(box.client_config("farbox", known).replace(f"Port {box.port}", f"Port {link.port}"))
    env.write_inventory({"gpu1": {"destination": "farbox", "durable_root": str(tmp_path)}})
    root = tmp_path / "export" / "run-1"
    root.mkdir(parents=True)
    yield root
    await link.close()


@pytest.fixture
def every_link_far(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback taken as a far link: large files go in pieces without a relay's delay."""
    monkeypatch.setattr(pull, "FAR_S", 0.0)


def plan_of(dest: Path, path: str) -> SpanPlan | None:
    where = plan_file(dest, state_dir(dest) / "partial" / path)
    return SpanPlan.model_validate_json(where.read_bytes()) if where.exists() else None


def box_readers(path: Path) -> list[int]:
    """Pids of the `tail` processes on the box reading `path` from past its first byte (a piece's stream)."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv[:2] == [b"tail", b"-c"] and str(path).encode() in argv and argv[2] != b"+1":
                found.append(int(proc.name))
    return found


async def test_a_large_file_over_a_far_link_travels_in_pieces_and_arrives_byte_identical(far_box, client) -> None:
    data = os.urandom(2 * PIECE + 5_000_000)
    (far_box / "big.bin").write_bytes(data)
    hashed, read_back = COUNTS.hashed, COUNTS.read_back
    r = await until_done(client, root=str(far_box), roster=["big.bin"], budget_s=55)
    assert r["passed"] is True, r["findings"]
    assert (Path(r["dest"]) / "big.bin").read_bytes() == data
    assert COUNTS.read_back > read_back, "a piece arrived ahead of the hash: the file came over several streams"
    assert COUNTS.hashed - hashed == len(data), "every byte hashed once"
    assert plan_of(Path(r["dest"]), "big.bin") is None, "the piece plan goes with the partial"


async def test_a_budget_stopped_pull_in_pieces_resumes_each_piece_and_never_receives_or_hashes_a_byte_twice(
        results, client, every_link_far) -> None:
    size = 16 * PIECE + 12345
    with (results / "big.bin").open("wb") as f:
        f.truncate(size)  # sparse: cheap to create, still every byte to move and hash
    partial_hash.PARTIAL_HASHES.clear()
    hashed, rehashed, transferred, stops = COUNTS.hashed, partial_hash.REHASHED_BYTES, 0, []
    for _ in range(100):
        r = await verify(client, root=str(results), roster=["big.bin"], budget_s=2)
        transferred += r["bytes_transferred"]
        if r["done"]:
            break
        plan = plan_of(Path(r["dest"]), "big.bin")
        if plan is not None:
            stops.append([s.held for s in plan.spans])
    assert r["passed"] is True, r["findings"]
    assert any(sum(0 < h < PIECE for h in spans) >= 2 for spans in stops), \
        f"a stop left several pieces part-held at once: {stops}"
    assert transferred == size, "a byte received before a stop was received again"
    assert COUNTS.hashed - hashed == size and rehashed == partial_hash.REHASHED_BYTES, "a byte was hashed twice"


async def test_a_piece_whose_reader_dies_on_the_box_is_asked_again_from_where_it_stopped(
        results, client, every_link_far) -> None:
    data = os.urandom(4 * PIECE)
    (results / "big.bin").write_bytes(data)
    retries = COUNTS.retries
    task = asyncio.create_task(until_done(client, root=str(results), roster=["big.bin"]))
    killed: list[int] = []

    def kill_one() -> bool:
        for pid in box_readers(results / "big.bin"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return True
        return False

    await until(kill_one, timeout=60, interval=0.005, what="a piece's reader on the box")
    r = await task
    assert r["passed"] is True, r["findings"]
    assert (Path(r["dest"]) / "big.bin").read_bytes() == data
    assert COUNTS.retries > retries, "the piece was asked for again"


async def test_a_lost_connection_mid_pieces_resumes_each_piece_without_resending_or_rehashing(results, client, box,
                                                                                 every_link_far) -> None:
    data = os.urandom(6 * PIECE)
    (results / "big.bin").write_bytes(data)
    dest = results.parent.parent / "pulled"
    task = asyncio.create_task(client.call_tool("verify_artifacts", {"host": "gpu1", "root": str(results),
                                                                      "roster": ["big.bin"], "dest": str(dest)}))
    partial = state_dir(dest) / "partial" / "big.bin"
    # Written at their offsets: the partial reaches past four pieces once a stream takes a fifth.
    await until(lambda: partial.exists() and partial.stat().st_size > 4 * PIECE, timeout=60, interval=0.005,
                what="the pieces to be under way")
    box.restart()
    first = await task
    assert first.is_error and "connection" in error_text(first).lower()
    before, rehashed = held(dest, "big.bin"), partial_hash.REHASHED_BYTES
    assert 0 < before < len(data)
    r = await until_done(client, root=str(results), roster=["big.bin"], dest=str(dest))
    assert r["passed"] is True and (dest / "big.bin").read_bytes() == data
    assert r["bytes_transferred"] == len(data) - before, "bytes a piece held were sent again"
    assert rehashed == partial_hash.REHASHED_BYTES, "the hash of the bytes held was kept across the lost connection"


async def test_a_file_changed_on_the_box_mid_pull_never_lands_and_the_next_round_pulls_it_right(
        results, client, every_link_far) -> None:
    big = results / "big.bin"
    with big.open("wb") as f:
        f.truncate(16 * PIECE)
    first = await verify(client, root=str(results), roster=["big.bin"], budget_s=2)
    while (plan := plan_of(Path(first["dest"]), "big.bin")) is None:
        assert not first["done"], "the pull must stop part-way for this test: give it a larger file"
        first = await verify(client, root=str(results), roster=["big.bin"], budget_s=2)
    untouched = next(s for s in plan.spans if s.held == 0)
    with big.open("r+b") as f:  # the run rewrites its checkpoint while it is being pulled
        f.seek(untouched.start + 100)
        f.write(b"\xff" * 4096)
    r = await until_done(client, root=str(results), roster=["big.bin"], budget_s=2)
    mismatch = [f for f in r["findings"] if f["kind"] == "hash_mismatch"]
    assert r["passed"] is False and [f["path"] for f in mismatch] == ["big.bin"]
    local = Path(r["dest"]) / "big.bin"
    assert not local.exists(), "a file whose bytes differ from the manifest was moved into place"
    assert not (state_dir(Path(r["dest"])) / "partial" / "big.bin").exists()
    assert plan_of(Path(r["dest"]), "big.bin") is None
    again = await until_done(client, root=str(results), roster=["big.bin"], budget_s=55)
    assert again["passed"] is True and local.read_bytes() == big.read_bytes()
