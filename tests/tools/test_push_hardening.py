"""Security (issue #30): what push_code must never send, read or reuse, through a real MCP client,
on this machine and over the test sshd. A source inside the server's state or a credential folder
is refused by rule; shell histories, gh's token file, the server's state files and files holding
a key or token never reach the box, each named with its reason, and allow_secrets_in lets exactly
the files it names through (recorded in the ledger); a tracked file under a folder since replaced
by a symlink is never read through it; a file edited inside an older snapshot on the box is sent
fresh instead of reused, an edited sealed snapshot is never reported as there; a sealed
snapshot's folders are read-only too."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_server.ledger import Ledger
from mcp_server.settings import Settings
from tests.conftest import error_text, structured
from tests.run.jobs.conftest import durable_box

__all__ = ["durable_box"]

GH_TOKEN = "ghp_" + "Zq7" * 12  # the shape of a classic GitHub token, valid for no account
STATE_FILES = ("http-token", "ledger.sqlite", "known_hosts")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


def openssh_key(path: Path) -> bytes:
    """A real OpenSSH private key (made for this test), under a name no file-name rule knows."""
    made = path.parent / "made-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(made)], check=True)
    made.rename(path)
    Path(f"{made}.pub").unlink()
    return path.read_bytes()


async def push(client: Any, source: Path, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("push_code", {"host": "gpu1", "source": str(source), **args}))


def snapshot(box: Any, result: dict[str, Any]) -> Path:
    return Path(box.durable) / "code" / result["project"] / result["snapshot_id"]


def box_bytes(box: Any) -> bytes:
    """Every byte of every file under the box's code dir."""
    code = Path(box.durable) / "code"
    return b"".join(p.read_bytes() for p in sorted(code.rglob("*")) if p.is_file() and not p.is_symlink())


def files_of(snap: Path) -> set[str]:
    return {p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file() and ".rgt" not in p.parts}


def reasons(result: dict[str, Any]) -> dict[str, str]:
    return {s["path"]: s["reason"] for s in result["skipped"]}


@pytest.fixture
def secrets_tree(tmp_path: Path) -> Path:
    """A folder (no git) with code beside a shell history, gh's token file, an OpenSSH private key
    under an innocent name and a note holding a GitHub token."""
    root = tmp_path / "homeish"
    (root / "src").mkdir(parents=True)
    (root / "src/train.py").write_text("print('train')\n")
    (root / ".bash_history").write_text(f"export GH_TOKEN={GH_TOKEN}\nls\n")
    (root / ".config/gh").mkdir(parents=True)
    (root / ".config/gh/hosts.yml").write_text(f"github.com:\n    oauth_token: {GH_TOKEN}\n")
    (root / "keys").mkdir()
    openssh_key(root / "keys/deploy_key")
    (root / "notes.txt").write_text(f"remember the token {GH_TOKEN}\n")
    return root


async def test_a_source_inside_the_state_dir_or_a_credential_folder_is_refused_by_rule(
        client: Any, durable_box: Any, env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await client.call_tool("list_runs", {"host": "gpu1"})  # the server's state exists: ledger and all
    (env.home / "http-token").write_text("t0ken-not-for-the-box\n")
    home = tmp_path / "user-home"
    (home / ".ssh").mkdir(parents=True)
    openssh_key(home / ".ssh/id_work")
    (home / ".ssh/config").write_text("Host x\n")
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "innocent").symlink_to(home / ".ssh")
    for source, rule in ((env.home, "the server's own state folder ($RGT_HOME)"),
                         (tmp_path / "innocent", "~/.ssh"),
                         (env.home / "pulls", "the server's own state folder ($RGT_HOME)"),
                         (home / ".ssh", "~/.ssh"), (Path("/etc"), "/etc")):
        (env.home / "pulls").mkdir(exist_ok=True)
        text = error_text(await client.call_tool("push_code", {"host": "gpu1", "source": str(source),
                                                               "allow_secrets_in": ["http-token"]}))
        assert "BAD_INPUT" in text and rule in text and "never sends from" in text, text
        assert "t0ken" not in text and "PRIVATE" not in text
    assert not (Path(durable_box.durable) / "code").exists(), "nothing reached the box"


async def test_a_copy_of_the_state_dir_sends_none_of_its_files(client: Any, durable_box: Any, env: Any,
                                                               tmp_path: Path) -> None:
    await client.call_tool("list_runs", {"host": "gpu1"})
    copy = tmp_path / "state-copy"
    copy.mkdir()
    for name in STATE_FILES:
        (copy / name).write_bytes(b"state of the server\n")
    text = error_text(await client.call_tool("push_code", {"host": "gpu1", "source": str(copy)}))
    assert "nothing to push" in text and "this server's own state" in text, text
    (copy / "train.py").write_text("print(1)\n")
    r = await push(client, copy)
    assert files_of(snapshot(durable_box, r)) == {"train.py"}
    assert set(reasons(r)) == set(STATE_FILES)
    assert all("this server's own state" in why for why in reasons(r).values())


async def test_histories_gh_tokens_and_private_keys_never_reach_the_box_each_named_with_its_reason(
        client: Any, durable_box: Any, secrets_tree: Path) -> None:
    key = (secrets_tree / "keys/deploy_key").read_bytes()
    r = await push(client, secrets_tree)
    assert r["outcome"] == "sealed" and files_of(snapshot(durable_box, r)) == {"src/train.py"}
    why = reasons(r)
    assert "shell or REPL history" in why[".bash_history"]
    assert "GitHub CLI's token file" in why[".config/gh/hosts.yml"]
    assert "an OpenSSH private key" in why["keys/deploy_key"] and "allow_secrets_in" in why["keys/deploy_key"]
    assert "a GitHub token" in why["notes.txt"]
    assert r["skipped_total"] == 4 and r["secrets_allowed"] == []
    on_box = box_bytes(durable_box)
    assert GH_TOKEN.encode() not in on_box and key not in on_box
    assert GH_TOKEN not in str(r) and "PRIVATE" not in str(r), "reasons name the rule, never the secret"


async def test_allow_secrets_in_lets_exactly_the_named_file_through_and_the_ledger_records_it(
        client: Any, durable_box: Any, secrets_tree: Path) -> None:
    key = (secrets_tree / "keys/deploy_key").read_bytes()
    r = await push(client, secrets_tree, allow_secrets_in=["keys/deploy_key", ".bash_history"])
    snap = snapshot(durable_box, r)
    assert files_of(snap) == {"src/train.py", "keys/deploy_key"}, "a name rule is not lifted by the allow list"
    assert (snap / "keys/deploy_key").read_bytes() == key
    assert r["secrets_allowed"] == ["keys/deploy_key"] and "keys/deploy_key" not in reasons(r)
    assert GH_TOKEN.encode() not in box_bytes(durable_box)
    ledger = Ledger.open(Settings.from_env().ledger_path)
    try:
        (event,) = ledger.events("code_secret_allowed", host="gpu1")
    finally:
        ledger.close()
    assert event.data["files"] == [{"path": "keys/deploy_key", "holds": "an OpenSSH private key"}]
    assert event.data["snapshot_id"] == r["snapshot_id"]


async def test_a_tracked_file_under_a_folder_replaced_by_a_symlink_is_never_read_through_it(
        client: Any, durable_box: Any, tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    (repo / "data").mkdir(parents=True)
    (repo / "train.py").write_text("print(1)\n")
    (repo / "data/labels.txt").write_text("tracked labels\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "labels.txt").write_text("OUTSIDE THE PROJECT\n")
    (repo / "data/labels.txt").unlink()
    (repo / "data").rmdir()
    (repo / "data").symlink_to(outside)
    r = await push(client, repo)
    assert files_of(snapshot(durable_box, r)) == {"train.py"}
    assert r["symlinks_skipped"] == ["data"]
    assert reasons(r) == {"data/labels.txt": "its folder data is a symlink: never read through"}
    assert b"OUTSIDE THE PROJECT" not in box_bytes(durable_box)


async def test_a_file_edited_inside_an_older_snapshot_is_sent_fresh_not_reused(
        client: Any, durable_box: Any, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("print('as pushed')\n")
    (root / "b.py").write_text("print('b')\n")
    first = await push(client, root)
    old = snapshot(durable_box, first)
    subprocess.run(["chmod", "-R", "u+w", str(old)], check=True)
    (old / "a.py").write_text("print('edited on the box')\n")  # in place: the same inode as any link
    (root / "b.py").write_text("print('b2')\n")
    second = await push(client, root)
    new = snapshot(durable_box, second)
    assert second["outcome"] == "sealed"
    assert (new / "a.py").read_bytes() == (root / "a.py").read_bytes()
    assert (new / "a.py").stat().st_ino != (old / "a.py").stat().st_ino
    assert second["box_changed"] == [f"snapshot {first['snapshot_id']}'s a.py was changed on the box after it "
                                     "was sealed: sent fresh, not reused"]
    assert second["files_sent"] == 2


async def test_a_sealed_snapshot_is_read_only_folders_included_and_an_edited_one_is_never_there(
        client: Any, durable_box: Any, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "pkg/sub").mkdir(parents=True)
    (root / "pkg/sub/m.py").write_text("x = 1\n")
    (root / "run.py").write_text("import pkg\n")
    r = await push(client, root)
    snap = snapshot(durable_box, r)
    assert r["read_only"] is True
    for p in [snap, *snap.rglob("*")]:
        assert p.stat().st_mode & 0o222 == 0, p
    again = await push(client, root)
    assert again["outcome"] == "already_there" and again["read_only"] is True
    subprocess.run(["chmod", "-R", "u+w", str(snap)], check=True)
    (snap / "pkg/sub/m.py").write_text("x = 2\n")
    (snap / "pkg/sitecustomize.py").write_text("import os\n")
    text = error_text(await client.call_tool("push_code", {"host": "gpu1", "source": str(root)}))
    assert "GATE_REFUSED" in text and "edited after it was sealed" in text
    assert "pkg/sub/m.py (changed or removed)" in text and "pkg/sitecustomize.py (added)" in text
    assert (snap / "pkg/sub/m.py").read_text() == "x = 2\n", "a refusal changes nothing on the box"
