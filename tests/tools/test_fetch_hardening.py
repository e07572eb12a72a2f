"""Security: fetch_data hardening (issue #30), through the real MCP client on this machine and
over the test sshd, against a local HTTP server. Where a download lands is decided on the box on
the resolved path (symlinks followed): never into the server's control files (.rgt/, a run's
exit_code, code snapshots), never out of the roots through a symlink. A URL is fetched
literally (no curl globbing), a failure that cannot succeed later is not retried and is named,
every name-like argument is checked, and no error quotes the value it refuses."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_server import scripts
from mcp_server.paths import policy
from tests.conftest import error_text, structured
from tests.run.jobs.conftest import durable_box
from tests.support.http_files import Files

__all__ = ["durable_box"]
MARK = "Zq9vMARK"  # planted in refused values: no error may quote it back


class Server(Files):
    """Files, plus answers a CDN or an attacker gives: a redirect, and statuses before the file."""

    def __init__(self) -> None:
        super().__init__()
        self.redirects: dict[str, str] = {}
        self.fail_first: dict[str, list[int]] = {}
        outer, base = self, self.server.RequestHandlerClass

        class Handler(base):  # type: ignore[misc,valid-type]  # a class from the server
            def do_GET(self) -> None:
                if self.path in outer.redirects or outer.fail_first.get(self.path):
                    outer.gets.append(self.path)
                    target = outer.redirects.get(self.path)
                    self.send_response(302 if target else outer.fail_first[self.path].pop(0))
                    if target:
                        self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                super().do_GET()

        self.server.RequestHandlerClass = Handler


@pytest.fixture
def http() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


async def call(client: Any, **args: Any) -> Any:
    return await client.call_tool("fetch_data", {"host": "gpu1", **args})


async def ended(client: Any, run_id: str, within_s: float) -> dict[str, Any]:
    """The run's end, or a failure when it has not ended within `within_s` (a retry loop still going)."""
    deadline = time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        r = structured(await client.call_tool("wait_for_run", {"host": "gpu1", "run_id": run_id,
                                                               "timeout_s": max(1, int(left))}))
        if r["ended"]:
            return r
    raise AssertionError(f"the fetch had not ended after {within_s}s")


async def log_of(client: Any, run_id: str) -> str:
    return str(structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run_id}))["text"])


# --- where it lands --------------------------------------------------------------------------

async def test_security_dest_on_the_box_env_file_is_refused_and_the_file_is_unchanged(
        client: Any, http: Server, durable_box: Any) -> None:
    http.files["/payload.sh"] = b"touch /tmp/pwned\n"
    env_file = Path(durable_box.durable) / ".rgt/box.env"
    env_file.parent.mkdir(parents=True)
    env_file.write_text("export HF_HOME=/data/hf\n")
    text = error_text(await call(client, url=http.url("/payload.sh"), dest=str(env_file)))
    assert "[BAD_INPUT]" in text and "server's own .rgt/ folder" in text, text
    assert env_file.read_text() == "export HF_HOME=/data/hf\n"
    assert http.gets == []


async def test_security_a_symlinked_folder_under_the_root_pointing_outside_is_refused(
        client: Any, http: Server, durable_box: Any, tmp_path: Path) -> None:
    http.files["/x.bin"] = b"x" * 100
    outside = tmp_path / "outside"
    outside.mkdir()
    (Path(durable_box.durable) / "data").symlink_to(outside)
    text = error_text(await call(client, url=http.url("/x.bin"), dest=f"{durable_box.durable}/data/sub/x.bin"))
    assert "[BAD_INPUT]" in text and "dest must lie under" in text and "every symlink followed" in text, text
    assert list(outside.iterdir()) == [], "nothing was created outside the roots"
    assert http.gets == []


async def test_security_a_run_dirs_exit_code_is_refused_directly_and_through_a_symlink(
        client: Any, http: Server, durable_box: Any) -> None:
    http.files["/zero"] = b"0\n"
    (one,) = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": "exit 3",
                                                                   "probe_s": 0}))["outcomes"]
    run = one["launch"]
    assert (await ended(client, run["run_id"], 30))["state"]["exit_code"] == 3
    run_dir = Path(run["run_dir"])
    (Path(durable_box.durable) / "latest").symlink_to(run_dir)
    for dest in (run_dir / "exit_code", Path(durable_box.durable) / "latest/exit_code"):
        text = error_text(await call(client, url=http.url("/zero"), dest=str(dest)))
        assert "[BAD_INPUT]" in text and "server's own .rgt/ folder" in text, text
    assert (run_dir / "exit_code").read_text().strip() == "3"
    assert http.gets == []


@pytest.mark.parametrize("case", ["code snapshot", "leaf symlink", "part symlink"])
async def test_security_a_code_snapshot_or_a_planted_symlink_file_is_refused(
        client: Any, http: Server, durable_box: Any, tmp_path: Path, case: str) -> None:
    http.files["/m.bin"] = b"m" * 100
    durable, victim = Path(durable_box.durable), tmp_path / "victim"
    victim.write_text("keep")
    (durable / "data").mkdir()
    dest = {"code snapshot": durable / "code/proj/5f2a/train.py", "leaf symlink": durable / "data/m.bin",
            "part symlink": durable / "data/n.bin"}[case]
    if case == "leaf symlink":
        dest.symlink_to(victim)
    if case == "part symlink":
        Path(f"{dest}.part").symlink_to(victim)
    text = error_text(await call(client, url=http.url("/m.bin"), dest=str(dest)))
    assert "[BAD_INPUT]" in text and ("code/ folder" in text if case == "code snapshot" else "is a symlink" in text)
    assert victim.read_text() == "keep" and http.gets == []


def test_security_the_download_job_checks_the_path_again_on_the_box(tmp_path: Path, http: Server) -> None:
    """The box may change between the call's check and the job: the job resolves dest again and
    refuses a symlink planted in the meantime, writing nothing."""
    http.files["/late.bin"] = b"late"
    durable, outside = tmp_path / "durable", tmp_path / "outside"
    durable.mkdir()
    outside.mkdir()
    (durable / "data").symlink_to(outside)
    words = policy.confine_words(str(durable), [str(durable)])
    job = policy.library() + scripts.command_words(
        "fetch_url", *(scripts.quote(a) for a in (http.url("/late.bin"), f"{durable}/data/late.bin", "", "1", "",
                                                   "fp")), *words)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", job], capture_output=True, text=True, timeout=60)
    assert done.returncode == 77 and "refused" in done.stderr, done
    assert list(outside.iterdir()) == [] and http.gets == []


# --- what is fetched and how it is retried ----------------------------------------------------

async def test_security_a_url_with_glob_brackets_fetches_exactly_that_one_url_and_sizes_it(
        client: Any, http: Server, local_box: Path) -> None:
    literal = b"L" * 1000
    http.files["/g[1-3].bin"] = literal
    for i in (1, 2, 3):
        http.files[f"/g{i}.bin"] = bytes([i]) * 10
    http.claimed_length["/g3.bin"] = 2**60  # what a size gate reading the last globbed URL would see
    r = structured(await call(client, url=http.url("/g[1-3].bin"), dest=str(local_box / "data/g.bin")))
    assert r["outcome"] == "started" and r["expected_bytes"] == len(literal), r
    assert (await ended(client, r["run"]["run_id"], 30))["state"]["status"] == "succeeded"
    assert (local_box / "data/g.bin").read_bytes() == literal
    assert http.gets == ["/g[1-3].bin"]


async def test_security_a_redirect_to_a_file_url_fails_at_once_and_names_the_error(
        client: Any, http: Server, local_box: Path) -> None:
    http.redirects["/r.bin"] = "file:///etc/passwd"
    r = structured(await call(client, url=http.url("/r.bin"), dest=str(local_box / "data/r.bin")))
    done = await ended(client, r["run"]["run_id"], 20)
    assert done["state"]["status"] == "failed"
    assert http.gets == ["/r.bin"], "one attempt"
    log = await log_of(client, r["run"]["run_id"])
    assert "failed on attempt 1" in log and "retrying cannot help" in log and "file" in log.lower(), log
    assert not (local_box / "data/r.bin").exists()


async def test_a_404_is_not_retried_and_is_named(client: Any, http: Server, local_box: Path) -> None:
    r = structured(await call(client, url=http.url("/missing.bin"), dest=str(local_box / "data/missing.bin"),
                              expected_gib=0.001))
    done = await ended(client, r["run"]["run_id"], 20)
    assert done["state"]["status"] == "failed" and http.gets == ["/missing.bin"]
    assert "failed on attempt 1: HTTP 404" in await log_of(client, r["run"]["run_id"])


async def test_a_503_is_retried_and_the_download_then_succeeds(client: Any, http: Server, local_box: Path) -> None:
    http.files["/flaky.bin"] = b"f" * 5000
    http.fail_first["/flaky.bin"] = [503]
    r = structured(await call(client, url=http.url("/flaky.bin"), dest=str(local_box / "data/flaky.bin")))
    assert (await ended(client, r["run"]["run_id"], 30))["state"]["status"] == "succeeded"
    assert (local_box / "data/flaky.bin").read_bytes() == b"f" * 5000 and http.gets == ["/flaky.bin"] * 2
    assert "attempt 1 of 8 failed (HTTP 503" in await log_of(client, r["run"]["run_id"])


async def test_a_hugging_face_repo_that_does_not_exist_is_not_retried(
        client: Any, local_box: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hf` cannot reach the Hub from here: a stand-in answers as the real CLI does for a missing repo."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "hf").write_text('#!/bin/sh\necho "$*" >> "$(dirname "$0")/../hf-calls"\n'
                               'echo "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error." >&2\nexit 1\n')
    (bindir / "hf").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    r = structured(await call(client, hf_repo="nobody/nothing", dest=str(local_box / "models/n"), expected_gib=1))
    assert (await ended(client, r["run"]["run_id"], 20))["state"]["status"] == "failed"
    assert len((tmp_path / "hf-calls").read_text().splitlines()) == 1
    log = await log_of(client, r["run"]["run_id"])
    assert "failed on attempt 1: 404 Client Error (exit 1; retrying cannot help)" in log, log


# --- arguments -------------------------------------------------------------------------------

async def test_security_a_revision_that_climbs_out_is_refused_before_anything_runs(
        client: Any, local_box: Path) -> None:
    text = error_text(await call(client, hf_repo="Qwen/Qwen2.5-0.5B", revision="../../../x",
                                 dest=str(local_box / "models/q"), expected_gib=1))
    assert "[BAD_INPUT] revision is not a branch, tag or commit name" in text, text
    assert not (local_box / ".rgt/runs").exists() or not any((local_box / ".rgt/runs").iterdir())


BAD_ARGS = [  # (the argument the error must name, the call's arguments)
    ("url", {"url": f"file:///etc/{MARK}"}),
    ("url", {"url": f"ftp://h.invalid/{MARK}"}),
    ("url", {"url": f"https://h.invalid/{MARK} x"}),
    ("hf_repo", {"hf_repo": f"{MARK}/../x", "expected_gib": 1}),
    ("revision", {"hf_repo": "a/b", "revision": f"../{MARK}", "expected_gib": 1}),
    ("revision", {"hf_repo": "a/b", "revision": f"{MARK}..x", "expected_gib": 1}),
    ("sha256", {"url": "https://h.invalid/x", "sha256": MARK}),
    ("token_env", {"url": "https://h.invalid/x", "token_env": f"{MARK}-TOKEN"}),
    ("expected_gib", {"url": "https://h.invalid/x", "expected_gib": 1e308}),
    ("dest", {"url": "https://h.invalid/x", "dest": f"/etc/{MARK}"}),
    ("dest", {"url": "https://h.invalid/x", "dest": f"ROOT/.rgt/{MARK}"}),
    ("dest", {"url": "https://h.invalid/x", "dest": f"ROOT/x/../{MARK}"}),
]


@pytest.mark.parametrize(("arg", "args"), BAD_ARGS, ids=[f"{a}-{i}" for i, (a, _) in enumerate(BAD_ARGS)])
async def test_security_fetch_errors_name_the_argument_and_never_quote_its_value(
        client: Any, local_box: Path, arg: str, args: dict[str, Any]) -> None:
    dest = str(args.get("dest", "ROOT/data/f")).replace("ROOT", str(local_box))
    text = error_text(await call(client, **{**args, "dest": dest}))
    assert re.search(rf"\[BAD_INPUT\] (\[host gpu1\] )?{arg}\b", text) and MARK not in text, text


# --- the policy itself, on this box's shells --------------------------------------------------

def confine(tmp: Path, intent: str, path: str, *, shell: str = "bash", fallback: bool = False) -> str:
    durable = tmp / "durable"
    words = policy.confine_words(str(durable), [str(durable), str(tmp / "scratch")])
    body = ("realpath() { return 1; }\n" if fallback else "") + policy.library() + \
        f"rgt_confine {scripts.quote(intent)} {scripts.quote(path)} {' '.join(words)}\n"
    return subprocess.run([shell, "-c", body], capture_output=True, text=True, timeout=30, check=True).stdout.strip()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    tmp_path = tmp_path.resolve()
    d = tmp_path / "durable"
    (d / ".rgt/runs/r1").mkdir(parents=True)
    (d / "data").mkdir()
    (tmp_path / "outside").mkdir()
    (d / "out").symlink_to(tmp_path / "outside")
    (d / "state").symlink_to(d / ".rgt/runs/r1")
    (d / "data/key").symlink_to(Path.home() / ".ssh/id_rsa")
    (d / "home").symlink_to(Path.home())
    return tmp_path


CASES = [
    ("write", "durable/data/new/file.bin", "durable/data/new/file.bin"),
    ("write", "scratch/a/b", "scratch/a/b"),
    ("write", "durable/out/x", "RGT-OUTSIDE"),
    ("write", "durable/state/exit_code", "RGT-DENIED control .rgt"),
    ("write", "durable/.rgt/box.env", "RGT-DENIED control .rgt"),
    ("write", "durable/x/.rgt/y", "RGT-DENIED control .rgt"),
    ("write", "durable/code/p/s/f.py", "RGT-DENIED control code"),
    ("write", "durable/data/key", "RGT-DENIED symlink"),
    ("read", "durable/data/key", "RGT-DENIED credential"),
    ("write", "durable/home/.bashrc", "RGT-DENIED startup-file"),
    ("write", "durable/data/../../x", "RGT-DENIED dotdot"),
    ("write", "durable", "RGT-OUTSIDE"),
    ("chmod", "durable/data/f", "RGT-DENIED intent"),
]


@pytest.mark.parametrize(("shell", "fallback"), [("bash", False), ("sh", False), ("bash", True)],
                         ids=["bash", "sh", "without-realpath-m"])
@pytest.mark.parametrize(("intent", "path", "answer"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_the_path_policy_decides_on_the_resolved_path(
        tree: Path, intent: str, path: str, answer: str, shell: str, fallback: bool) -> None:
    got = confine(tree, intent, str(tree / path), shell=shell, fallback=fallback)
    assert got == (answer if answer.startswith("RGT-") else str(tree / answer))


def test_every_control_tree_is_denied_by_the_script(tmp_path: Path) -> None:
    (tmp_path / "durable").mkdir()
    for tree in policy.CONTROL_TREES:
        got = confine(tmp_path, "write", str(tmp_path / "durable" / tree.name / "f"))
        assert got == f"RGT-DENIED control {tree.name}"
