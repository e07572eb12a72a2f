"""push_code through the real MCP client, on this machine and over the test sshd: .gitignore and
excludes respected, oversized files refused by name, the same tree sends nothing, a one-line
change sends one file into a new snapshot while a run in the old one keeps its bytes, an
interrupted push leaves no half snapshot and resumes, git provenance reaches the run record."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_text, structured


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project with code, a config, an ignored data/ and an untracked notes file."""
    root = tmp_path / "bert-ft"
    (root / "src").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "src/train.py").write_text("import sys\nprint('train', sys.argv)\n")
    (root / "run.sh").write_text("#!/bin/sh\npython src/train.py\n")
    (root / "run.sh").chmod(0o755)
    (root / "configs").mkdir()
    (root / "configs/a.yaml").write_text("lr: 0.001\n")
    (root / ".gitignore").write_text("data/\n*.ckpt\n")
    (root / "data/train.bin").write_bytes(os.urandom(4096))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    (root / "notes.md").write_text("untracked but not ignored\n")
    return root


@pytest.fixture
def target(durable_box: Any) -> Path:
    """The durable root of `gpu1` (this machine, or the test sshd)."""
    return Path(durable_box.durable)


async def push(client: Any, source: Path, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("push_code", {"host": "gpu1", "source": str(source), **args}))


def tree(d: Path) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and ".rgt" not in p.parts}


async def test_a_push_lands_the_git_tree_and_nothing_ignored(client: Any, project: Path, target: Path) -> None:
    r = await push(client, project)
    assert r["outcome"] == "sealed" and r["files"] == 5
    snap = target / "code/bert-ft" / r["snapshot_id"]
    pushed = {".gitignore", "configs/a.yaml", "notes.md", "run.sh", "src/train.py"}
    assert tree(snap) == {k: v for k, v in tree(project).items() if k in pushed}, "byte for byte, nothing else"
    assert os.access(snap / "run.sh", os.X_OK), "the executable bit travels"
    assert (snap / "src/train.py").stat().st_mode & 0o222 == 0, "a sealed snapshot's files are read-only"
    prov = json.loads((snap / ".rgt/provenance.json").read_text())
    assert prov["git_commit"] and prov["git_dirty"] is True and prov["untracked"] == ["notes.md"]
    assert (target / "code/bert-ft/latest").resolve() == snap.resolve()


async def test_the_same_tree_sends_nothing_and_a_changed_line_sends_one_file(
        client: Any, project: Path, target: Path) -> None:
    first = await push(client, project)
    again = await push(client, project)
    assert again["outcome"] == "already_there" and again["bytes_sent"] == 0
    assert again["snapshot_id"] == first["snapshot_id"]
    old = target / "code/bert-ft" / first["snapshot_id"]
    before = tree(old)
    live = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "sleep 30", "code": f"bert-ft/{first['snapshot_id']}", "probe_s": 0}))
    (project / "configs/a.yaml").write_text("lr: 0.0003\n")
    changed = await push(client, project)
    assert changed["snapshot_id"] != first["snapshot_id"]
    assert changed["files_sent"] == 1 and changed["files_reused"] == 4
    assert tree(old) == before, "the old snapshot (a live run's code) keeps its exact bytes"
    await client.call_tool("cancel_run", {"host": "gpu1", "run_id": live["outcomes"][0]["launch"]["run_id"]})
    assert (target / "code/bert-ft" / changed["snapshot_id"] / "configs/a.yaml").read_text() == "lr: 0.0003\n"


async def test_an_oversized_file_is_refused_by_name_and_nothing_is_sent(client: Any, project: Path,
                                                                      target: Path) -> None:
    with (project / "weights.bin").open("wb") as f:
        f.truncate(200 * 2**20)
    text = error_text(await client.call_tool("push_code", {"host": "gpu1", "source": str(project)}))
    assert "weights.bin (200.0 MiB)" in text and "max_file_mb=20" in text and "exclude" in text
    assert not (target / "code").exists() or not any((target / "code/bert-ft").glob("[0-9a-f]*"))
    r = await push(client, project, exclude=["weights.bin"])
    assert r["outcome"] == "sealed" and "weights.bin" not in tree(target / "code/bert-ft" / r["snapshot_id"])


async def test_an_interrupted_push_leaves_no_snapshot_and_the_retry_resumes(
        client: Any, project: Path, target: Path) -> None:
    r = await push(client, project)
    sid = r["snapshot_id"]
    # Undo the seal by hand into the state a cut connection leaves: two files staged, one half.
    code = target / "code/bert-ft"
    subprocess.run(["chmod", "-R", "u+w", str(code)], check=True)
    staging = code / ".staging" / sid
    (code / sid).rename(staging)
    (code / ".meta" / f"{sid}.sha").unlink()
    (code / "latest").unlink()
    (staging / "src/train.py").write_text("import sys\npri")  # cut mid-file
    (staging / "run.sh").unlink()
    assert not (code / sid).exists(), "no half snapshot is visible under its id"
    again = await push(client, project)
    assert again["outcome"] == "sealed" and again["files_resumed"] == 3 and again["files_sent"] == 2
    assert tree(code / sid) == {k: v for k, v in tree(project).items() if not k.startswith(("data/", ".git/"))}


async def test_a_run_launched_from_a_snapshot_records_its_commit(client: Any, project: Path, target: Path) -> None:
    r = await push(client, project)
    res = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "sh run.sh", "code": f"bert-ft/{r['snapshot_id']}", "probe_s": 1}))
    launch = res["outcomes"][0]["launch"]
    record = json.loads((Path(launch["run_dir"]) / "run.json").read_text())
    assert record["code_snapshot"] == r["snapshot_id"]
    assert record["git_commit"] == r["provenance"]["git_commit"] and record["git_dirty"] is True
    assert record["workdir"].endswith(f"code/bert-ft/{r['snapshot_id']}")
    missing = error_text(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "true", "code": "bert-ft/0123456789abcdef"}))
    assert "no snapshot bert-ft/0123456789abcdef" in missing and "push_code" in missing


async def test_secrets_in_the_environment_never_reach_the_snapshot(
        client: Any, project: Path, target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hf_" + os.urandom(8).hex()
    monkeypatch.setenv("HF_TOKEN", secret)
    (project / ".env").write_text(f"HF_TOKEN={secret}\n")
    (project / ".gitignore").write_text("data/\n*.ckpt\n.env\n")
    r = await push(client, project)
    snap = target / "code/bert-ft" / r["snapshot_id"]
    assert not (snap / ".env").exists()
    for p in snap.rglob("*"):
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p


async def test_a_folder_inside_a_repo_follows_the_repos_gitignore_and_provenance(
        client: Any, tmp_path: Path, target: Path) -> None:
    repo = tmp_path / "mono"
    (repo / "exp/bert/cache").mkdir(parents=True)
    (repo / ".gitignore").write_text("cache/\n")
    (repo / "exp/bert/train.py").write_text("print('bert')\n")
    (repo / "exp/bert/cache/big.bin").write_bytes(b"0" * 1000)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    r = await push(client, repo / "exp/bert")
    snap = target / "code/bert" / r["snapshot_id"]
    assert set(tree(snap)) == {"train.py"}, "the repo's own .gitignore (above the folder) applies"
    assert r["provenance"]["git_commit"] and r["provenance"]["git_dirty"] is False


async def test_prune_plans_then_deletes_only_old_snapshots_no_run_names(
        client: Any, project: Path, target: Path) -> None:
    ids = []
    for lr in ("0.1", "0.2", "0.3", "0.4"):
        (project / "configs/a.yaml").write_text(f"lr: {lr}\n")
        ids.append((await push(client, project))["snapshot_id"])
    await client.call_tool("launch_detached", {"host": "gpu1", "command": "true", "code": f"bert-ft/{ids[0]}",
                                               "probe_s": 0})
    plan = structured(await client.call_tool("prune_code", {"host": "gpu1", "project": "bert-ft", "keep": 2}))["plan"]
    verdicts = {s["snapshot_id"]: s["verdict"] for s in plan["snapshots"]}
    assert verdicts[ids[0]] == "named by 1 run(s)", "the code of a recorded run stays"
    assert verdicts[ids[1]] == "candidate" and plan["candidates"] == [ids[1]]
    assert verdicts[ids[3]] == "latest"
    assert (target / "code/bert-ft" / ids[1]).exists(), "a plan deletes nothing"
    done = structured(await client.call_tool("prune_code", {"host": "gpu1", "project": "bert-ft", "keep": 2,
                                                            "token": plan["token"]}))["result"]
    assert done["pruned"] == [ids[1]] and not (target / "code/bert-ft" / ids[1]).exists()
    assert all((target / "code/bert-ft" / i).exists() for i in (ids[0], ids[2], ids[3]))
    replay = error_text(await client.call_tool("prune_code", {"host": "gpu1", "project": "bert-ft", "keep": 2,
                                                               "token": plan["token"]}))
    assert "GATE_REFUSED" in replay
    (project / "configs/a.yaml").write_text("lr: 0.2\n")
    again = await push(client, project)
    assert again["snapshot_id"] == ids[1] and again["outcome"] == "sealed", "a pruned snapshot can be pushed again"


async def test_a_push_whose_connection_drops_mid_way_leaves_no_snapshot_and_resumes(
        project: Path, box: Any, env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second batch's stream is cut half-way (what the box sees when the connection drops
    mid-transfer: a tar that ends early): the push fails, no snapshot appears under its id, and
    the next push sends only what did not arrive whole."""
    from mcp_server.app import App
    from mcp_server.errors import RgtError
    from mcp_server.run.code import push as push_mod
    from mcp_server.settings import Settings

    durable = tmp_path / "durable-drop"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(durable)}})
    for i in range(40):
        (project / f"src/mod{i:02d}.py").write_bytes(os.urandom(20_000))
    monkeypatch.setattr(push_mod, "BATCH_BYTES", 100_000)
    monkeypatch.setattr(push_mod, "SENDS_IN_FLIGHT", 1)
    app = App(Settings.from_env())
    spec = app.pool.spec("gpu1")
    real = await app.pool.host(spec)

    class CutSecondBatch:
        """The real host over the real sshd; the second batch's bytes stop half-way."""

        def __init__(self) -> None:
            self.name, self.kind, self.batches = real.name, real.kind, 0

        async def run(self, script: str, **kw: Any) -> Any:
            if "staging dir" in script:
                self.batches += 1
                if self.batches == 2:
                    kw["stdin"] = kw["stdin"][: len(kw["stdin"]) // 2]
            return await real.run(script, **kw)

    with pytest.raises(RgtError):
        await push_mod.push_code(CutSecondBatch(), spec, str(project), None,  # type: ignore[arg-type]
                                 exclude=[], max_file_mb=20, max_total_mb=200, ledger=None)
    code = durable / "code/bert-ft"
    staged = tree(code)
    await asyncio.sleep(1.5)
    assert tree(code) == staged, "no batch of the failed push arrives after it said it failed"
    assert not [p for p in code.iterdir() if len(p.name) == 16], "no half snapshot under an id"
    done = await push_mod.push_code(real, spec, str(project), None, exclude=[], max_file_mb=20, max_total_mb=200,
                                    ledger=None)
    assert done.outcome == "sealed" and done.files_resumed > 0 and done.files_sent < done.files
    snap = code / done.snapshot_id
    assert tree(snap) == {k: v for k, v in tree(project).items() if not k.startswith(("data/", ".git/"))}
    await app.close()


async def test_security_a_credential_file_in_the_tree_is_refused_by_name(client: Any, project: Path,
                                                                       target: Path) -> None:
    (project / ".env").write_text("HF_TOKEN=hf_secret\n")
    (project / "keys").mkdir()
    (project / "keys/deploy.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    text = error_text(await client.call_tool("push_code", {"host": "gpu1", "source": str(project)}))
    assert "credential files" in text and ".env" in text and "keys/deploy.pem" in text
    assert not (target / "code").exists() or not any((target / "code/bert-ft").glob("[0-9a-f]*"))
    ok = await push(client, project, exclude=[".env", "keys/"])
    assert ok["outcome"] == "sealed"
