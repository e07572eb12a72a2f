"""The path policy itself (issue #30): one deny list for the box and this machine, decided on the
resolved path; a run's own work dir is data inside the control tree, $RGT_HOME is refused on this
machine except a root that lies in it; and the scripts that use it (inspect_run's sampler,
verify_artifacts' listing, reconcile_evidence's documents) keep to it. The shell runs under bash
and dash, the way a box runs it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_server import scripts
from mcp_server.hosts.local import LocalHost
from mcp_server.paths import deny, policy
from mcp_server.paths.local import LocalScope, check_local
from mcp_server.paths.refusal import PathRefused
from tests.conftest import structured
from tests.fixtures.deliver.project import Project
from tests.tools.conftest import local_box

__all__ = ["local_box"]

SECRET = "BEGIN-OPENSSH-PRIVATE-KEY-canary-91b0"


def confine(intent: str, path: Path | str, words: list[str], shell: str = "sh", bin_dir: Path | None = None) -> str:
    """rgt_confine's answer; `bin_dir` goes first on PATH (a box without GNU realpath)."""
    body = policy.library() + f"rgt_confine {scripts.quote(intent)} {scripts.quote(str(path))} {' '.join(words)}\n"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}") if bin_dir else None
    return subprocess.run([shell, "-c", body], capture_output=True, text=True, timeout=30, check=True,
                          env=env).stdout.strip()


@pytest.fixture(params=["gnu-realpath", "no-realpath"])
def bin_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    """The policy resolves with one GNU `realpath -m` call; without it (busybox, macOS), with
    readlink one path at a time. Both must decide the same."""
    if request.param == "gnu-realpath":
        return None
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "realpath").write_text("#!/bin/sh\necho 'realpath: unrecognized option -m' >&2\nexit 1\n")
    (shim / "realpath").chmod(0o755)
    return shim


# Paths on and off the deny list, as written (the box decides by the whole path or by its name).
DENY_TABLE = [
    "/home/u/.ssh", "/home/u/.ssh/id_work", "/srv/x/.aws/credentials", "/root/.config/gcloud/creds.db",
    "/home/u/.config/gh/hosts.yml", "/data/deploy.pem", "/data/tls.key", "/data/id_ed25519.pub", "/home/u/.netrc",
    "/home/u/.bash_history", "/home/u/.python_history", "/x/shadow", "/etc/shadow", "/etc/sudoers.d/a",
    "/proc/1/environ", "/sys/kernel/x", "/dev/mem", "/state/http-token", "/state/ledger.sqlite-wal",
    "/data/train.log", "/data/keys.json", "/data/.cache/history/x.log", "/data/id_rsa_dir/f.txt",
    "/etc/hostname", "/data/ssh/a.log", "/data/notes.key.txt",
]


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_the_box_and_this_machine_deny_exactly_the_same_paths(shell: str) -> None:
    body = policy.library() + "".join(
        f"if rgt_denied {scripts.quote(p)}; then echo 1; else echo 0; fi\n" for p in DENY_TABLE)
    out = subprocess.run([shell, "-c", body], capture_output=True, text=True, timeout=30, check=True).stdout.split()
    box = {p: o == "1" for p, o in zip(DENY_TABLE, out, strict=True)}
    assert box == {p: deny.is_credential(p) for p in DENY_TABLE}
    assert sum(box.values()) == 19, "the table covers both answers"


@pytest.fixture
def durable(tmp_path: Path) -> Path:
    d = tmp_path.resolve() / "durable"
    (d / ".rgt/runs/r1/work").mkdir(parents=True)
    (d / ".rgt/runs/r1/log").write_text("log\n")
    (d / ".rgt/runs/r1/work/out.pt").write_text("w\n")
    return d


@pytest.mark.parametrize(("intent", "rel", "answer"), [
    ("read", ".rgt/runs/r1/work/out.pt", "ok"),
    ("read", ".rgt/runs/r1/work", "ok"),
    ("write", ".rgt/runs/r1/work/new.pt", "ok"),
    ("read", ".rgt/runs/r1/log", "RGT-DENIED control .rgt"),
    ("read", ".rgt/runs/r1/work/../log", "RGT-DENIED control .rgt"),
    ("read", ".rgt/runs/work", "RGT-DENIED control .rgt"),
    ("read", ".rgt/box.env", "RGT-DENIED control .rgt"),
])
def test_a_runs_own_work_dir_is_data_and_the_rest_of_the_run_dir_is_not(durable: Path, intent: str, rel: str,
                                                                          answer: str, bin_dir: Path | None) -> None:
    words = policy.confine_words(str(durable), [str(durable)])
    got = confine(intent, f"{durable}/{rel}", words, bin_dir=bin_dir)
    assert got == (os.path.realpath(f"{durable}/{rel}") if answer == "ok" else answer)


def test_a_work_dir_replaced_by_a_symlink_opens_nothing(durable: Path, tmp_path: Path, bin_dir: Path | None) -> None:
    work = durable / ".rgt/runs/r1/work"
    (work / "out.pt").unlink()
    work.rmdir()
    work.symlink_to(durable / ".rgt")
    (durable / ".rgt/box.env").write_text(SECRET)
    got = confine("read", work / "box.env", policy.confine_words(str(durable), [str(durable)]), bin_dir=bin_dir)
    assert got == "RGT-DENIED control .rgt"


def test_the_state_folder_is_refused_on_this_machine_except_a_root_inside_it(env: Any) -> None:
    (env.home / "local/data").mkdir(parents=True)
    (env.home / "http-token").write_text(SECRET)
    (env.home / "acceptances").mkdir()
    inside = policy.box_scope(str(env.home / "local"), [str(env.home / "local")], "", this_machine=True)
    anywhere = policy.Scope(("/",), "", this_machine=True)
    assert confine("read", env.home / "local/data/x.csv", inside.words()) == str(env.home / "local/data/x.csv")
    assert confine("read", env.home / "local/../acceptances", inside.words()) == "RGT-DENIED state"
    assert confine("read", env.home / "acceptances/x", anywhere.words()) == "RGT-DENIED state"
    assert confine("read", env.home / "http-token", anywhere.words()) == "RGT-DENIED credential"


def test_this_machines_side_resolves_every_symlink_and_names_the_rule_never_the_path(env: Any,
                                                                                    tmp_path: Path) -> None:
    keys = tmp_path / "home/.ssh"
    keys.mkdir(parents=True)
    (tmp_path / "innocent").symlink_to(keys)
    (env.home / "pulls").mkdir(parents=True)
    scope = LocalScope((env.home / "pulls", tmp_path), "the test's roots")
    with pytest.raises(PathRefused) as refused:
        check_local(str(tmp_path / "innocent/id_work"), "read", scope, what="source", done="nothing was sent")
    said = str(refused.value)
    assert "source refused by the path policy (credential)" in said and "innocent" not in said
    with pytest.raises(PathRefused, match=r"dest refused by the path policy \(state\)"):
        check_local(str(env.home / "notes"), "write", scope, what="dest", done="nothing was written")
    with pytest.raises(PathRefused, match=r"dest refused by the path policy \(startup-file\)"):
        check_local(str(tmp_path / ".bashrc"), "write", scope, what="dest", done="nothing was written")
    assert check_local("run-1", "write", scope, what="dest", done="", base=env.home / "pulls") == \
        (env.home / "pulls/run-1").resolve()


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_inspect_runs_sampler_samples_no_output_root_the_policy_refuses(tmp_path: Path, shell: str) -> None:
    run = tmp_path / "durable/.rgt/runs/r1"
    run.mkdir(parents=True)
    (run / "pid").write_text(str(os.getpid()))  # this test's own process: a live run for one sample
    keys = tmp_path / "home/.ssh"
    keys.mkdir(parents=True)
    scope = policy.Scope(("/",), "", str(tmp_path / "durable"))
    for root, refused in ((keys, "RGT-DENIED credential"), (run / "work", None), (tmp_path / "results", None)):
        words = [scripts.quote(str(run)), "1", scripts.quote(str(root)), *scope.words()]
        body = policy.library() + scripts.command_words("job_inspect", *words)
        out = subprocess.run([shell, "-c", body], capture_output=True, text=True, timeout=30, check=True).stdout
        assert "live=1" in out and (f"root_refused={refused}" in out if refused else "root_refused" not in out)


async def test_verify_artifacts_never_lists_the_control_tree_inside_its_root(local_box: Path, client: Any) -> None:
    (local_box / ".rgt").mkdir()
    (local_box / ".rgt/box.env").write_text(SECRET)
    (local_box / "out.json").write_text("{}")
    args = {"host": "gpu1", "root": str(local_box), "roster": ["out.json", ".rgt/box.env"], "budget_s": 20}
    r = structured(await client.call_tool("verify_artifacts", args))
    assert r["passed"] is False and SECRET not in str(r)
    assert not any(p.name == "box.env" for p in Path(r["dest"]).rglob("*"))


async def test_a_document_symlinked_to_a_key_is_a_policy_problem_and_the_rest_is_reconciled(
        client: Any, tmp_path: Path) -> None:
    (tmp_path / "paper").mkdir()
    p = Project(tmp_path / "paper")
    p.doc("README.md", "Ours reaches PSNR 31.42 dB.\n")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh/id_rsa").write_text(SECRET)
    (tmp_path / "paper/notes.md").symlink_to(tmp_path / ".ssh/id_rsa")
    r = structured(await client.call_tool("reconcile_evidence", {"evidence": str(p.evidence_path),
                                                                 "documents": ["README.md", "notes.md"]}))
    (problem,) = [x for x in r["problems"] if x["code"] == "path_policy"]
    assert problem["path"] == "notes.md" and "documents refused by the path policy (credential)" in problem["message"]
    assert r["summary"]["documents"] == 1 and SECRET not in str(r)


async def test_a_probe_file_in_the_control_tree_is_refused(local_box: Path, client: Any) -> None:
    (local_box / ".rgt").mkdir()
    (local_box / ".rgt/metrics.csv").write_text("step,loss\n1,0.5\n")
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "direction": "lower",
        "run": {"file": {"path": str(local_box / ".rgt/metrics.csv")}, "column": "loss"}}})
    text = "\n".join(getattr(x, "text", "") for x in res.content)
    assert res.is_error and "file.path refused by the path policy (control)" in text


async def test_check_paths_answers_each_path_in_order_in_one_round_trip(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    host = LocalHost()
    got = await policy.check_paths(host, "read", [str(tmp_path / "a.txt"), "relative.txt", str(tmp_path / ".rgt/x"),
                                                  str(tmp_path / "b.key")], policy.anywhere(host),
                                   what="documents", done="")
    assert got[0] == str((tmp_path / "a.txt").resolve())
    assert [g.message.split(":")[0] for g in got[1:] if isinstance(g, PathRefused)] == [
        "documents refused by the path policy (relative)", "documents refused by the path policy (control)",
        "documents refused by the path policy (credential)"]
