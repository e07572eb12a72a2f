"""The on-box scripts behind the manifest (scripts/verify_*.sh), run for real on LocalHost and
over the test sshd: the listing, each hasher, and the manifest write (one per run, replaced atomically)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.verify.artifacts.manifest import (
    build_manifest,
    list_root,
    manifest_path,
    poll_hashing,
    start_hashing,
    write_manifest,
)
from tests.support.wait import until

# What RootFacts.hasher picks from the listing's facts: python3 first, then openssl, then sha256sum.
FORCE: dict[str, dict[str, str]] = {"python-hashlib": {}, "openssl": {"python": ""},
                                    "sha256sum": {"python": "", "openssl": ""}}


def _tree(root: Path) -> dict[str, bytes]:
    root.mkdir()
    files = {"a.json": b'{"x": 1}', "sub dir/b.bin": os.urandom(3000), "sub dir/empty.txt": b""}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "link.json").symlink_to("a.json")
    return files


async def test_the_listing_names_the_root_its_tools_and_every_file_and_symlink(any_host: Host, tmp_path: Path) -> None:
    root = tmp_path / "results"
    files = _tree(root)
    facts, entries = await list_root(any_host, str(root))
    assert facts.abs_root == str(root.resolve()) and facts.nproc >= 1 and (facts.now or 0) > 0
    assert facts.python.endswith("python3") and facts.hasher == "python-hashlib"
    by = {e.path: e for e in entries}
    assert {p: e.size for p, e in by.items() if e.kind == "f"} == {p: len(d) for p, d in files.items()}
    assert by["link.json"].kind == "l" and by["link.json"].target == "a.json"


async def test_a_missing_root_is_an_input_error(any_host: Host, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        await list_root(any_host, str(tmp_path / "nope"))


@pytest.mark.parametrize("hasher", list(FORCE))
async def test_every_hasher_gives_the_sha256_of_each_file(any_host: Host, tmp_path: Path, hasher: str) -> None:
    files = _tree(tmp_path / "results")
    facts, entries = await list_root(any_host, str(tmp_path / "results"))
    regular = [e for e in entries if e.kind == "f"]
    forced = dataclasses.replace(facts, **FORCE[hasher])
    assert forced.hasher == hasher
    job = await start_hashing(any_host, forced, regular)

    async def finished() -> dict[str, tuple[int | None, str]] | None:
        done, got, err = await poll_hashing(any_host, facts.abs_root, job)
        assert err == ""
        return got if done else None

    got = await until(finished, what=f"the {hasher} hasher to finish")
    assert {p: d for p, (_, d) in got.items()} == {p: hashlib.sha256(b).hexdigest() for p, b in files.items()}
    sizes = {p: n for p, (n, _) in got.items()}
    assert sizes == ({p: len(b) for p, b in files.items()} if hasher == "python-hashlib" else dict.fromkeys(files))


async def test_a_manifest_is_kept_one_per_run_in_the_state_dir_and_replaced_atomically(any_host: Host,
                                                                                        tmp_path: Path) -> None:
    data, state = tmp_path / "data", tmp_path / "durable"
    data.mkdir()
    (data / "a.json").write_text("{}")
    paths = []
    for n in (1, 2):
        job = f"job{n}"
        (data / f".rgt-hash-{job}").mkdir()
        m = build_manifest("box", str(data), ["a.json"], "run-1", "python-hashlib", [("a.json", 2, str(n) * 64)])
        target = manifest_path(str(state), "run-1", str(data))
        paths.append(await write_manifest(any_host, str(data), job, m, target))
        assert Path(paths[-1]).read_bytes() == m.canonical()
        assert not (data / f".rgt-hash-{job}").exists(), "the job directory is cleaned up"
    assert paths == [str(state / ".rgt" / "manifests" / "run-1.json")] * 2  # the second round replaced the first
    assert sorted(p.name for p in data.iterdir()) == ["a.json"]  # nothing beside the user's data
    assert sorted(p.name for p in (state / ".rgt" / "manifests").iterdir()) == ["run-1.json"]  # no tmp left
    assert manifest_path(str(state), None, str(data)) != manifest_path(str(state), None, str(tmp_path))
    assert "/.rgt/manifests/_" in manifest_path(str(state), "../x", str(data))  # a label never escapes


async def test_security_a_tab_or_newline_in_a_name_cannot_turn_a_symlink_into_a_file(any_host: Host,
                                                                                   tmp_path: Path) -> None:
    """The attack the old tab-separated listing fell for: a sibling directory whose name holds a
    TAB shifted the fields, and a symlink out of the root was listed as a regular file."""
    root = tmp_path / "results"
    (root / "a\tf\t1\t0").mkdir(parents=True)
    (root / "a\tf\t1\t0" / "w.bin").symlink_to("/etc/passwd")
    (root / "new\nline").mkdir()
    (root / "new\nline" / "ok.txt").write_text("fine")
    _, entries = await list_root(any_host, str(root))
    by = {e.path: e for e in entries}
    assert by["a\tf\t1\t0/w.bin"].kind == "l" and by["a\tf\t1\t0/w.bin"].target == "/etc/passwd"
    assert by["new\nline/ok.txt"].kind == "f" and by["new\nline/ok.txt"].size == 4
    assert len(entries) == 2


async def test_security_a_file_swapped_for_a_symlink_after_the_listing_is_not_hashed(any_host: Host,
                                                                                    tmp_path: Path) -> None:
    """The race between listing and hashing: the listing saw regular files; before the hasher
    opens them, one becomes a symlink to a secret and a parent directory becomes a symlink. The
    Python hasher opens with O_NOFOLLOW and checks parents, so neither is read."""
    root = tmp_path / "results"
    (root / "sub").mkdir(parents=True)
    (root / "a.bin").write_bytes(b"a" * 10)
    (root / "sub" / "b.bin").write_bytes(b"b" * 10)
    (root / "c.bin").write_bytes(b"c" * 10)
    facts, entries = await list_root(any_host, str(root))
    assert facts.hasher == "python-hashlib"
    secret = tmp_path / "secret.txt"
    secret.write_text("do not hash me")
    (root / "a.bin").unlink()
    (root / "a.bin").symlink_to(secret)
    elsewhere = tmp_path / "elsewhere"
    (root / "sub").rename(elsewhere)
    (root / "sub").symlink_to(elsewhere)
    job = await start_hashing(any_host, facts, [e for e in entries if e.kind == "f"])

    async def finished() -> tuple[dict[str, tuple[int | None, str]], str] | None:
        done, got, err = await poll_hashing(any_host, facts.abs_root, job)
        return (got, err) if done else None

    got, err = await until(finished, what="the hasher to finish")
    assert set(got) == {"c.bin"}
    assert "refused a.bin" in err and "refused sub/b.bin" in err


@pytest.mark.parametrize("hasher", list(FORCE))
async def test_security_a_file_or_parent_swapped_for_a_symlink_after_the_listing_is_refused_by_every_hasher(
        any_host: Host, tmp_path: Path, hasher: str) -> None:
    """The listing→hash race: what was listed as a regular file is opened without following a
    symlink (O_NOFOLLOW: Python's os.open, or GNU dd's iflag=nofollow before openssl/sha256sum),
    and a parent directory made a symlink meanwhile is refused too."""
    root = tmp_path / "results"
    (root / "sub").mkdir(parents=True)
    (root / "a.bin").write_bytes(b"a" * 1000)
    (root / "ok.bin").write_bytes(b"fine")
    (root / "sub" / "b.bin").write_bytes(b"b" * 1000)
    secret_dir = tmp_path / "elsewhere"
    secret_dir.mkdir()
    (secret_dir / "b.bin").write_bytes(b"a secret")
    facts, entries = await list_root(any_host, str(root))
    forced = dataclasses.replace(facts, **FORCE[hasher])
    (root / "a.bin").unlink()
    (root / "a.bin").symlink_to("/etc/passwd")
    (root / "sub" / "b.bin").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(secret_dir)
    job = await start_hashing(any_host, forced, [e for e in entries if e.kind == "f"])

    async def finished() -> tuple[dict[str, tuple[int | None, str]], str] | None:
        done, got, err = await poll_hashing(any_host, facts.abs_root, job)
        return (got, err) if done else None

    got, err = await until(finished, what=f"the {hasher} hasher to finish")
    assert set(got) == {"ok.bin"}, "only the file still as listed is hashed"
    assert got["ok.bin"][1] == hashlib.sha256(b"fine").hexdigest()
    assert "refused a.bin" in err and "refused sub/b.bin" in err
