"""The packed pull (Puller.run(..., packed=True)), for real on LocalHost and over the test sshd:
the box packs the manifest's small files into one deterministic tar, the tar is pulled and
hashed, and every member is checked against the manifest before it is moved into place."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tarfile
import time
from pathlib import Path

import pytest

from mcp_server.hosts.base import Host
from mcp_server.hosts.local import LocalHost
from mcp_server.verify.artifacts import pull
from mcp_server.verify.artifacts.manifest import ManifestFile, list_root, poll_hashing, start_hashing
from mcp_server.verify.artifacts.pull import Puller
from mcp_server.verify.artifacts.roster import resolve
from mcp_server.verify.artifacts.state import PullState, state_dir
from mcp_server.verify.artifacts.tar_box import PackDone, PackerChoice, clean_pack, poll_pack, start_pack
from mcp_server.verify.artifacts.tar_local import PackedTransfer, load_packed, local_tar, save_packed
from tests.conftest import Caller
from tests.support.wait import until
from tests.verify.artifacts.pulls import until_done

LONG = "a-name-longer-than-the-hundred-bytes-a-plain-tar-header-holds/" + "x" * 80 + ".json"


def tree(root: Path, n: int = 300, sizes: tuple[int, int] = (1000, 4000)) -> dict[str, bytes]:
    """`n` small files in nested folders, plus names that need care: a space, a leading dash, a long
    path, a backslash, non-ASCII."""
    rng = random.Random(n)
    files = {f"d{i % 7}/sub{i % 3}/f{i:04d}.bin": rng.randbytes(rng.randint(*sizes)) for i in range(n)}
    files |= {"sp ace/metrics.json": b'{"psnr": 31.4}', "-dash.txt": b"not an option", LONG: b"{}", "empty.txt": b"",
              "back\\tslash.txt": b"not a tab", "r\u00e9sum\u00e9.txt": b"utf-8"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


async def manifest(host: Host, root: Path) -> tuple[str, list[ManifestFile]]:
    """The manifest the box builds for everything under `root`, as verify_artifacts builds it."""
    facts, entries = await list_root(host, str(root))
    job = await start_hashing(host, facts, resolve(["**"], entries).files)

    async def hashed() -> dict[str, tuple[int | None, str]] | None:
        done, got, _ = await poll_hashing(host, facts.abs_root, job)
        return got if done else None

    got = await until(hashed, what="the box to hash the tree")
    for leftover in (root / f".rgt-hash-{job}").iterdir():
        leftover.unlink()
    (root / f".rgt-hash-{job}").rmdir()
    return facts.abs_root, [ManifestFile(path=p, bytes=n or 0, sha256=d) for p, (n, d) in sorted(got.items())]


def puller(host: Host, abs_root: str, dest: Path, packer: PackerChoice = "auto") -> Puller:
    state = PullState(round=1, phase="pulling", host="gpu1", root=abs_root, roster=["**"], run_id=None)
    p = Puller(host, abs_root, dest, state, time.monotonic() + 60, None)
    p.packer = packer
    return p


def next_call(prev: Puller) -> Puller:
    """A later tool call: a new Puller on the same saved state."""
    return Puller(prev.host, prev.abs_root, prev.dest, prev.state, time.monotonic() + 60, None)


def digests(dest: Path) -> dict[str, str]:
    return {p.relative_to(dest).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in dest.rglob("*") if p.is_file() and ".rgt-pull" not in p.parts}


@pytest.mark.parametrize("packer", ["gnu", "python"])
async def test_a_packed_pull_of_hundreds_of_small_files_verifies_every_member(
        any_host: Host, tmp_path: Path, packer: PackerChoice) -> None:
    files = tree(tmp_path / "results")
    abs_root, mfs = await manifest(any_host, tmp_path / "results")
    p = puller(any_host, abs_root, tmp_path / "dest", packer)
    assert await p.run(mfs, packed=True)
    assert p.findings == []
    assert {path: rec.status for path, rec in p.state.files.items()} == dict.fromkeys(files, "done")
    assert digests(tmp_path / "dest") == {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}
    assert not (tmp_path / "results" / ".rgt-pull").exists(), "the box's pack is cleaned up"
    assert sorted(os.listdir(state_dir(tmp_path / "dest"))) == ["partial", "state.json"]


async def test_the_packed_result_equals_the_file_by_file_result(
        any_host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree(tmp_path / "results", n=120)
    monkeypatch.setattr(pull, "PACK_MAX_FILE", 8000)
    (tmp_path / "results" / "big.pth").write_bytes(os.urandom(20_000))  # above the limit: pulled on its own
    abs_root, mfs = await manifest(any_host, tmp_path / "results")
    packed, plain = puller(any_host, abs_root, tmp_path / "packed"), puller(any_host, abs_root, tmp_path / "plain")
    assert await packed.run(mfs, packed=True) and await plain.run(mfs)
    assert digests(tmp_path / "packed") == digests(tmp_path / "plain")
    assert len(digests(tmp_path / "plain")) == len(mfs)

    def summary(p: Puller) -> dict[str, tuple[str, str, int]]:
        return {path: (rec.status, rec.sha256, rec.size) for path, rec in p.state.files.items()}

    assert summary(packed) == summary(plain)


@pytest.mark.parametrize("packer", ["gnu", "python"])
async def test_files_changed_on_the_box_after_hashing_are_caught_and_named(
        any_host: Host, tmp_path: Path, packer: PackerChoice) -> None:
    root = tmp_path / "results"
    tree(root, n=60)
    abs_root, mfs = await manifest(any_host, root)
    edited, grown, linked, gone = "d0/sub0/f0000.bin", "d1/sub1/f0001.bin", "d2/sub2/f0002.bin", "d3/sub0/f0003.bin"
    data = (root / edited).read_bytes()
    (root / edited).write_bytes(bytes([data[0] ^ 1]) + data[1:])
    with (root / grown).open("ab") as f:
        f.write(b"more")
    (root / linked).unlink()
    (root / linked).symlink_to("/etc/hostname")
    (root / gone).unlink()
    p = puller(any_host, abs_root, tmp_path / "dest", packer)
    assert await p.run(mfs, packed=True)
    kinds = {f.path: f.kind for f in p.findings}
    assert kinds[edited] == "hash_mismatch" and kinds[grown] == "size_mismatch"
    assert kinds[linked] in {"changed", "missing"} and kinds[gone] == "missing"
    assert "No such file" in next(f.message for f in p.findings if f.path == gone)
    assert all(f.blocking for f in p.findings)
    bad = {edited, grown, linked, gone}
    assert {path for path, rec in p.state.files.items() if rec.status == "failed"} == bad
    assert set(digests(tmp_path / "dest")) == {mf.path for mf in mfs} - bad


async def test_an_interrupted_packed_pull_resumes_without_packing_again_or_resending_bytes(
        any_host: Host, tmp_path: Path) -> None:
    files = tree(tmp_path / "results", n=400, sizes=(3000, 4000))
    abs_root, mfs = await manifest(any_host, tmp_path / "results")
    first = puller(any_host, abs_root, tmp_path / "dest")

    async def stop_after_first_chunk(done: int, total: int, label: str) -> None:
        first.deadline = 0

    first.progress = stop_after_first_chunk
    assert not await first.run(mfs, packed=True)
    packed = load_packed(tmp_path / "dest")
    assert packed is not None and packed.phase == "pulling" and packed.tar_bytes
    assert 0 < first.transferred < packed.tar_bytes and not first.state.files

    second = next_call(first)

    async def stop_when_received(done: int, total: int, label: str) -> None:
        if done == total:
            second.deadline = 0

    second.progress = stop_when_received
    assert not await second.run(mfs, packed=True)
    resumed = load_packed(tmp_path / "dest")
    assert resumed is not None and resumed.phase == "unpacking" and resumed.job == packed.job
    assert first.transferred + second.transferred == packed.tar_bytes, "no byte is sent twice"
    assert 1 <= len(second.state.files) < len(files), "a short budget still unpacks at least one member"

    third = next_call(second)
    assert await third.run(mfs, packed=True)
    assert third.transferred == 0 and load_packed(tmp_path / "dest") is None
    assert len(digests(tmp_path / "dest")) == len(files) and third.findings == []


async def test_a_pack_lost_on_the_box_is_packed_again_and_the_received_part_is_kept(
        any_host: Host, tmp_path: Path) -> None:
    tree(tmp_path / "results", n=400, sizes=(3000, 4000))
    abs_root, mfs = await manifest(any_host, tmp_path / "results")
    first = puller(any_host, abs_root, tmp_path / "dest")

    async def stop(done: int, total: int, label: str) -> None:
        first.deadline = 0

    first.progress = stop
    assert not await first.run(mfs, packed=True)
    lost = load_packed(tmp_path / "dest")
    assert lost is not None and lost.tar_bytes
    await clean_pack(any_host, lost.box_dir)
    second = next_call(first)
    assert await second.run(mfs, packed=True)
    assert first.transferred + second.transferred == lost.tar_bytes, "the same bytes again: the part held is kept"
    assert len(digests(tmp_path / "dest")) == len(mfs)


@pytest.mark.parametrize("packer", ["gnu", "python"])
async def test_the_box_packs_exactly_the_names_given_the_same_bytes_every_time(
        any_host: Host, tmp_path: Path, packer: PackerChoice) -> None:
    root = tmp_path / "results"
    files = tree(root, n=30)
    names = sorted(files)
    (root / "unlisted").mkdir()
    (root / "unlisted" / "secret.txt").write_text("never asked for")
    digest = []
    for job in ("job1", "job2"):
        started = await start_pack(any_host, str(root), job, [*names, "unlisted"], packer)  # a directory
        assert started is not None and started.packer == packer

        async def finished(box_dir: str = started.box_dir) -> PackDone | None:
            got = await poll_pack(any_host, box_dir)
            return got if isinstance(got, PackDone) else None

        done = await until(finished, what="the box to pack")
        assert done.usable
        with tarfile.open(Path(started.box_dir) / "pack.tar") as tar:
            members = tar.getmembers()
        regular = [m for m in members if m.isreg()]
        assert [m.name for m in regular] == names, "in the order given, nothing else"
        assert not any(m.name.startswith("unlisted/") for m in members), "a directory's contents are never packed"
        assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in regular} == {(0, 0, 0, "", "")}
        digest.append(done.sha256)
        await clean_pack(any_host, started.box_dir)
    assert digest[0] == digest[1]
    assert not (root / ".rgt-pull").exists()


def _hostile_tar(good: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        def add(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, link, len(data)
            tar.addfile(info, io.BytesIO(data))

        add("../escape.txt", b"up")
        add("/tmp/rgt-absolute-escape.txt", b"abs")
        add("sub/../../climb.txt", b"climb")
        add("ok.txt", good)
        add("link.txt", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add("hard.txt", kind=tarfile.LNKTYPE, link="ok.txt")
        add("dir.txt", kind=tarfile.DIRTYPE)
        add("ok.txt", b"second copy")
        add("not-asked.txt", b"extra")
    return buf.getvalue()


def _unpacking(dest: Path, blob: bytes, wanted: list[ManifestFile]) -> None:
    """A packed transfer whose tar (`blob`) has been received and awaits unpacking."""
    sha = hashlib.sha256(blob).hexdigest()
    local_tar(dest, sha).parent.mkdir(parents=True)
    local_tar(dest, sha).write_bytes(blob)
    save_packed(dest, PackedTransfer(job="j", phase="unpacking", files={mf.path: mf.sha256 for mf in wanted},
                                     box_dir="/nowhere", packer="gnu", tar_sha256=sha, tar_bytes=len(blob)))


async def test_a_hostile_pack_never_writes_outside_the_destination(tmp_path: Path) -> None:
    dest = tmp_path / "box" / "dest"
    good = b"the real bytes"
    wanted = [ManifestFile(path=n, bytes=len(good), sha256=hashlib.sha256(good).hexdigest())
              for n in ("ok.txt", "link.txt", "hard.txt", "dir.txt")]
    _unpacking(dest, _hostile_tar(good), wanted)
    p = puller(LocalHost(), "/nowhere", dest)
    assert await p.run(wanted, packed=True)
    assert digests(dest) == {"ok.txt": hashlib.sha256(good).hexdigest()}
    assert sorted(os.listdir(tmp_path / "box")) == ["dest"] and not (tmp_path / "climb.txt").exists()
    assert not Path("/tmp/rgt-absolute-escape.txt").exists()
    named = {(f.path, f.kind) for f in p.findings}
    assert named == {("../escape.txt", "unsafe_name"), ("/tmp/rgt-absolute-escape.txt", "unsafe_name"),
                     ("sub/../../climb.txt", "unsafe_name"), ("link.txt", "changed"), ("hard.txt", "changed"),
                     ("dir.txt", "changed"), ("ok.txt", "extra"), ("not-asked.txt", "extra")}
    assert {path: rec.status for path, rec in p.state.files.items()} == {
        "ok.txt": "done", "link.txt": "failed", "hard.txt": "failed", "dir.txt": "failed"}



async def test_a_pack_cut_short_names_every_member_it_lacks(tmp_path: Path) -> None:
    data = {name: os.urandom(5000) for name in ("a.bin", "b.bin", "c.bin")}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, blob in data.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    wanted = [ManifestFile(path=n, bytes=len(b), sha256=hashlib.sha256(b).hexdigest()) for n, b in data.items()]
    _unpacking(tmp_path / "dest", buf.getvalue()[:9000], wanted)  # ends inside b.bin's data
    p = puller(LocalHost(), "/nowhere", tmp_path / "dest")
    assert await p.run(wanted, packed=True)
    assert {(f.path, f.kind) for f in p.findings} == {("(pack)", "load_error"), ("b.bin", "missing"),
                                                      ("c.bin", "missing")}
    assert digests(tmp_path / "dest") == {"a.bin": hashlib.sha256(data["a.bin"]).hexdigest()}

async def test_verify_artifacts_with_pack_passes_a_tree_of_small_files_through_the_tool(
        results: Path, client: Caller) -> None:
    for i in range(200):
        (results / "samples" / f"s{i:03d}.json").parent.mkdir(exist_ok=True)
        (results / "samples" / f"s{i:03d}.json").write_text(json.dumps({"i": i, "psnr": 30 + i / 100}))
    r = await until_done(client, root=str(results), roster=["seed1/*", "train.csv", "samples/*.json"], pack=True)
    assert r["passed"] is True, r["findings"]
    assert r["files_done"] == r["files_total"] == 203 and r["bytes_done"] == r["bytes_total"]
    assert r["bytes_transferred"] > r["bytes_total"], "one call moved one tar: its headers travelled too"
    expected = {p.relative_to(results).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in [*results.glob("samples/*"), *results.glob("seed1/*"), results / "train.csv"]}
    assert expected.items() <= digests(Path(r["dest"])).items()
    assert not (results / ".rgt-pull").exists()
