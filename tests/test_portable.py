"""The server on the user's own machine (issue 35, item 4): what depends on this machine's OS is
decided in mcp_server/portable.py from `portable.SYSTEM`, which these tests replace to drive the
Windows and macOS branches here on Linux. A box is always POSIX, whatever this machine is."""

from __future__ import annotations

import ast
import errno
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import threading
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import pytest

from mcp_server import portable, portable_io, scripts
from mcp_server.errors import LocalHostUnsupported
from mcp_server.hosts.commands import shell_status
from mcp_server.hosts.local import LocalHost
from mcp_server.paths import deny
from mcp_server.paths.local import LocalScope, check_local
from mcp_server.paths.refusal import PathRefused
from mcp_server.settings import APP, Settings
from mcp_server.statedir import secure_state
from mcp_server.verify.artifacts.identity import this_machine
from mcp_server.verify.artifacts.roster import RemoteEntry, resolve
from mcp_server.verify.artifacts.tar_local import safe_name
from tests.conftest import Env, error_text
from tests.test_layering import PKG, import_graph
from tests.tools.test_error_codes import code_of
from tests.verify.artifacts.pulls import until_done

REPO = PKG.parent
WIN_LOCAL_APPDATA = r"C:\Users\ana\AppData\Local"


def as_if(monkeypatch: pytest.MonkeyPatch, system: portable.System) -> None:
    monkeypatch.setattr(portable, "SYSTEM", system)


# ---- the state folder and the inventory, per OS --------------------------------------------------


@pytest.fixture
def bare_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No RGT_HOME, RGT_CONFIG or XDG folders: the defaults speak. HOME is a temp folder."""
    for name in ("RGT_HOME", "RGT_CONFIG", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WIN_PD_OVERRIDE_LOCAL_APPDATA", WIN_LOCAL_APPDATA)
    return tmp_path


def test_the_linux_default_state_and_inventory_are_where_they_were(bare_home: Path, monkeypatch) -> None:
    as_if(monkeypatch, portable.LINUX)
    s = Settings.from_env({})
    assert s.home == bare_home / ".local" / "state" / APP
    assert s.config_path == bare_home / ".config" / APP / "hosts.toml"


def test_on_macos_state_and_inventory_live_in_application_support(bare_home: Path, monkeypatch) -> None:
    as_if(monkeypatch, portable.MACOS)
    s = Settings.from_env({})
    assert s.home == bare_home / "Library" / "Application Support" / APP
    assert s.config_path == s.home / "hosts.toml"


def test_on_windows_state_and_inventory_live_in_local_appdata_without_a_doubled_name(bare_home, monkeypatch) -> None:
    as_if(monkeypatch, portable.WINDOWS)
    s = Settings.from_env({})
    assert PureWindowsPath(str(s.home)) == PureWindowsPath(WIN_LOCAL_APPDATA, APP)
    assert PureWindowsPath(str(s.config_path)) == PureWindowsPath(WIN_LOCAL_APPDATA, APP, "hosts.toml")


@pytest.mark.parametrize("system", [portable.LINUX, portable.MACOS, portable.WINDOWS], ids=lambda s: s.label)
def test_rgt_home_and_rgt_config_override_the_default_on_every_os(bare_home, monkeypatch, system) -> None:
    as_if(monkeypatch, system)
    s = Settings.from_env({"RGT_HOME": str(bare_home / "state"), "RGT_CONFIG": str(bare_home / "inv.toml")})
    assert (s.home, s.config_path) == (bare_home / "state", bare_home / "inv.toml")


def test_on_windows_the_state_folder_is_not_chmodded_and_no_mode_warning_is_logged(tmp_path, monkeypatch,
                                                                                   caplog) -> None:
    home = tmp_path / "state"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    as_if(monkeypatch, portable.WINDOWS)
    with caplog.at_level(logging.WARNING, logger="mcp_server.statedir"):
        secure_state(home, [])
    assert stat.S_IMODE(home.stat().st_mode) == 0o755, "Windows has no modes: the folder's ACL keeps it private"
    assert "was mode" not in caplog.text


# ---- the local host ------------------------------------------------------------------------------


def test_on_windows_the_local_host_is_refused_with_a_coded_error_naming_what_works(monkeypatch) -> None:
    as_if(monkeypatch, portable.WINDOWS)
    with pytest.raises(LocalHostUnsupported) as err:
        LocalHost()
    text = str(err.value)
    assert err.value.code == "LOCAL_HOST_UNSUPPORTED"
    assert "POSIX" in text and "Windows" in text and "SSH box" in text and "WSL" in text


def test_on_macos_the_local_host_still_exists(monkeypatch) -> None:
    as_if(monkeypatch, portable.MACOS)
    assert LocalHost().kind == "local"


async def test_a_tool_on_the_local_host_answers_local_host_unsupported_on_windows(client, monkeypatch) -> None:
    as_if(monkeypatch, portable.WINDOWS)
    result = await client.call_tool("audit_box", {"host": "local"})
    assert code_of(result) == "LOCAL_HOST_UNSUPPORTED"
    assert "WSL" in error_text(result)


async def test_on_windows_this_machines_identity_is_read_without_a_shell(tmp_path, monkeypatch) -> None:
    as_if(monkeypatch, portable.WINDOWS)
    monkeypatch.setenv("PATH", str(tmp_path))  # no bash, no sh: a shell could not even start
    monkeypatch.setenv("RGT_MACHINE_ID", "win-machine-7")
    me = await this_machine()
    assert (me.machine_id, me.machine_id_source, me.hostname) == ("win-machine-7", "RGT_MACHINE_ID",
                                                                  socket.gethostname())


# ---- what goes to a box is POSIX -----------------------------------------------------------------


def test_a_windows_path_below_the_source_becomes_a_posix_path_for_the_box() -> None:
    root = PureWindowsPath(r"C:\Users\ana\proj")
    assert portable.box_relpath(PureWindowsPath(r"C:\Users\ana\proj\src\models"), root) == "src/models"
    assert portable.box_relpath(root, root) == ""
    assert portable.box_relpath(PurePosixPath("/home/ana/proj/src"), PurePosixPath("/home/ana/proj")) == "src"


@pytest.mark.parametrize(("name", "number"), [("KILL", 9), ("SIGUSR1", 10), ("BUS", 7), ("usr2", 12), ("PWR", 30)])
def test_a_box_signal_is_numbered_as_on_linux_whatever_this_machine_numbers_it(name: str, number: int) -> None:
    assert portable.box_signal_number(name) == number
    assert shell_status(None, name) == 128 + number


def test_crlf_line_ends_are_made_lf_and_a_stray_carriage_return_is_refused() -> None:
    assert scripts.lf_only("set -eu\r\necho hi\r\n", "scripts/x.sh") == "set -eu\necho hi\n"
    assert scripts.lf_only("plain\n", "scripts/x.sh") == "plain\n"
    with pytest.raises(ValueError, match=r"scripts/x\.sh holds a carriage return that ends no line.*reinstall"):
        scripts.lf_only("printf 'a\rb'\n", "scripts/x.sh")


def test_a_script_checked_out_with_crlf_runs_on_a_box_once_converted(tmp_path: Path) -> None:
    crlf = scripts.load("verify_identity").replace("\n", "\r\n")
    broken = subprocess.run(["sh", "-c", crlf], capture_output=True, text=True, timeout=30, check=False)
    fixed = subprocess.run(["sh", "-c", scripts.lf_only(crlf, "scripts/verify_identity.sh")], capture_output=True,
                           text=True, timeout=30, check=False)
    assert broken.returncode != 0 or "\r" in broken.stdout, "CRLF must break the script: else this proves nothing"
    assert fixed.returncode == 0 and "hostname=" in fixed.stdout and "\r" not in fixed.stdout


def test_every_shipped_script_is_lf_only_and_git_keeps_it_so() -> None:
    names = sorted(p.stem for p in (PKG / "scripts").glob("*.sh"))
    assert names and all("\r" not in scripts.load(n) for n in names)
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "-C", str(REPO), "check-attr", "eol", "--", "mcp_server/scripts/job_wrapper.sh",
                          "scripts/test", ".ci/run"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert out.count(": eol: lf") == 3, out


# ---- names from a box on this machine ------------------------------------------------------------


@pytest.mark.parametrize("name", ["ckpt\\..\\..\\evil.pt", "step:100.pt", "logs/CON.txt", "nul", "out/run.",
                                  "out/run ", 'a"b.json', "x|y"])
def test_on_windows_a_box_name_that_cannot_be_a_file_here_is_named(name: str) -> None:
    assert portable.local_name_problem(name, portable.WINDOWS) is not None
    assert portable.local_name_problem(name, portable.LINUX) is None
    assert portable.local_name_problem(name, portable.MACOS) is None


@pytest.mark.parametrize("name", ["seed1/best.pth", "a.b/c..d/e.json", "console.log", "COM10.txt", ".hidden/x"])
def test_on_windows_ordinary_box_names_pass(name: str) -> None:
    assert portable.local_name_problem(name, portable.WINDOWS) is None


def _entries(*paths: str) -> list[RemoteEntry]:
    return [RemoteEntry(kind="f", size=1, mtime=0.0, path=p) for p in paths]


def test_on_windows_the_roster_refuses_names_windows_cannot_hold_and_keeps_the_rest(monkeypatch) -> None:
    as_if(monkeypatch, portable.WINDOWS)
    res = resolve(["*"], _entries("good.pt", "step:100.pt", "a\\b.pt"))
    assert [e.path for e in res.files] == ["good.pt"]
    assert {f.path for f in res.findings if f.kind == "unsafe_name" and f.blocking} == {"step:100.pt", "a\\b.pt"}


@pytest.mark.parametrize("system", [portable.MACOS, portable.WINDOWS], ids=lambda s: s.label)
def test_where_case_folds_two_box_files_differing_only_in_case_are_not_both_pulled(monkeypatch, system) -> None:
    as_if(monkeypatch, system)
    res = resolve(["*"], _entries("Model.pt", "model.pt", "other.pt"))
    assert [e.path for e in res.files] == ["Model.pt", "other.pt"]
    (twin,) = [f for f in res.findings if f.kind == "unsafe_name"]
    assert twin.path == "model.pt" and "Model.pt" in twin.message and system.label in twin.message


@pytest.mark.parametrize("name", ["a\\..\\..\\x.pt", "step:1.pt", "C:/x.pt", "out/aux.json"])
def test_on_windows_a_packed_member_windows_would_read_otherwise_is_not_unpacked(monkeypatch, name: str) -> None:
    as_if(monkeypatch, portable.LINUX)
    assert safe_name(name) is True  # on Linux each is an ordinary (odd) file name
    as_if(monkeypatch, portable.WINDOWS)
    assert safe_name(name) is False
    assert safe_name("seed1/best.pth") is True


def test_on_linux_names_differing_only_in_case_are_two_files(monkeypatch) -> None:
    as_if(monkeypatch, portable.LINUX)
    res = resolve(["*"], _entries("Model.pt", "model.pt"))
    assert [e.path for e in res.files] == ["Model.pt", "model.pt"] and not res.findings


def test_the_deny_list_matches_a_windows_path_and_a_folded_case() -> None:
    form = portable.deny_form(PureWindowsPath(r"C:\Users\ana\.SSH\id_ed25519"), portable.WINDOWS)
    assert form == "c:/users/ana/.ssh/id_ed25519" and deny.label_of(form) is not None
    assert portable.deny_form(PurePosixPath("/home/ana/.SSH/x"), portable.LINUX) == "/home/ana/.SSH/x"


def test_on_macos_a_credential_folder_in_other_case_is_refused_as_a_pull_dest(tmp_path, monkeypatch) -> None:
    as_if(monkeypatch, portable.MACOS)
    with pytest.raises(PathRefused, match="credential folder"):
        check_local(tmp_path / ".SSH" / "pulled", "write", LocalScope(), what="dest", done="nothing was written")


# ---- file descriptors where os lacks the POSIX call ----------------------------------------------


def test_the_seek_fallbacks_write_and_read_at_offsets_from_two_threads(tmp_path: Path) -> None:
    path = tmp_path / "partial"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | portable_io.O_BINARY, 0o600)
    try:
        def write(start: int, byte: bytes) -> None:
            for i in range(start, 4096, 2):
                portable_io.pwrite_seek(fd, byte * 16, i * 16)

        threads = [threading.Thread(target=write, args=(0, b"a")), threading.Thread(target=write, args=(1, b"b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        portable_io.datasync(fd)
        assert portable_io.pread_seek(fd, 32, 32 * 100) == b"a" * 16 + b"b" * 16
    finally:
        os.close(fd)
    assert path.read_bytes() == (b"a" * 16 + b"b" * 16) * 2048


def test_without_o_nofollow_a_symlink_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x\r\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(OSError) as err:
        portable_io.open_read_no_follow(tmp_path / "link", no_follow=0)
    assert err.value.errno == errno.ELOOP
    with os.fdopen(portable_io.open_read_no_follow(tmp_path / "real", no_follow=0), "rb") as f:
        assert f.read() == b"x\r\n"


# ---- POSIX-only modules and names stay out of what runs here -------------------------------------

POSIX_MODULES = frozenset({"fcntl", "pwd", "grp", "termios", "tty", "pty", "resource", "posix", "syslog",
                           "crypt", "spwd", "readline"})
POSIX_NAMES = {
    "os": frozenset({"getuid", "geteuid", "getgid", "getegid", "setsid", "getpgid", "killpg", "fork", "forkpty",
                     "O_NOFOLLOW", "pwrite", "pread", "fdatasync", "sync", "statvfs", "fchmod", "chown", "lchown",
                     "mkfifo", "sched_getaffinity", "getloadavg", "uname", "setpgrp", "getpgrp", "openpty"}),
    "signal": frozenset({"SIGKILL", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGALRM", "SIGCHLD", "SIGPIPE",
                         "SIGCONT", "SIGSTOP", "SIGTSTP", "alarm", "setitimer", "pthread_kill"}),
}
POSIX_KEYWORDS = frozenset({"start_new_session", "preexec_fn"})
LOCAL_HOST = frozenset({"hosts.local"})
# Known and reported, not this item's to change: ssh -G's timeout kills its process group.
KNOWN_ELSEWHERE: frozenset[str] = frozenset()


def _posix_uses(nodes: list[ast.AST]) -> list[str]:
    found = []
    for n in nodes:
        if isinstance(n, ast.Import):
            found += [f"import {a.name}" for a in n.names if a.name.split(".")[0] in POSIX_MODULES]
        elif isinstance(n, ast.ImportFrom) and not n.level and (n.module or "").split(".")[0] in POSIX_MODULES:
            found.append(f"from {n.module} import")
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                n.attr in POSIX_NAMES.get(n.value.id, ()):
            found.append(f"{n.value.id}.{n.attr}")
        elif isinstance(n, ast.keyword) and n.arg in POSIX_KEYWORDS:
            found.append(f"{n.arg}=")
    return found


def _at_import(tree: ast.AST) -> list[ast.AST]:
    """The nodes Python evaluates when it imports the module: all but function and lambda bodies
    (their decorators and default values are evaluated)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo += [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        elif isinstance(node, ast.Lambda):
            todo += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        else:
            todo += list(ast.iter_child_nodes(node))
    return out


def _imported_by_the_server() -> set[str]:
    """Every package module the server's own modules reach by imports (lazy ones included); a
    `*_onbox` module only read as text and shipped to a box is not among them."""
    graph = import_graph()
    todo = [m for m in graph if not m.endswith("_onbox")]
    seen = set(todo)
    while todo:
        for dep in graph[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def _source(module: str) -> ast.AST:
    base = PKG.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"))


def test_the_import_scan_finds_module_level_posix_only_code_and_skips_function_bodies() -> None:
    top = ast.parse("import fcntl\nimport signal\nX = signal.SIGKILL\ndef f(s=signal.SIGHUP):\n    os.killpg(1, 9)\n")
    assert sorted(_posix_uses(_at_import(top))) == ["import fcntl", "signal.SIGHUP", "signal.SIGKILL"]
    assert "os.killpg" in _posix_uses(list(ast.walk(top)))


def test_importing_the_server_touches_no_posix_only_module_or_name_outside_the_local_host() -> None:
    found = {m: uses for m in sorted(_imported_by_the_server() - LOCAL_HOST)
             if (uses := _posix_uses(_at_import(_source(m))))}
    assert found == {}, "importing these breaks the server on Windows; keep such code inside a function " \
                        "or behind the local host"


def test_posix_only_calls_that_run_on_this_machine_stay_in_the_local_host() -> None:
    here = {m for m in _imported_by_the_server() if not m.endswith("_onbox")}  # _onbox code runs on the box
    found = {m: uses for m in sorted(here - LOCAL_HOST - KNOWN_ELSEWHERE)
             if (uses := _posix_uses(list(ast.walk(_source(m)))))}
    assert found == {}, "on Windows these fail when called: route them through portable_io or the local host"


# ---- an SSH box, driven from a machine faked as Windows ------------------------------------------


async def test_from_windows_a_pull_from_an_ssh_box_verifies_and_an_impossible_name_is_a_finding(
        env: Env, box: Any, tmp_path: Path, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path)}})
    root = tmp_path / "export" / "run-1"
    (root / "seed1").mkdir(parents=True)
    (root / "seed1" / "metrics.json").write_text(json.dumps({"psnr": 31.4}))
    (root / "train.csv").write_bytes(b"epoch,loss\n0,1.2\n1,0.9\n")
    (root / "step:100.json").write_text("{}")
    as_if(monkeypatch, portable.WINDOWS)
    r = await until_done(client, root=str(root), roster=["seed1/metrics.json", "train.csv"])
    assert r["passed"] is True, r["findings"]
    assert (Path(r["dest"]) / "train.csv").read_bytes() == (root / "train.csv").read_bytes()
    verified = json.loads(Path(r["verified_path"]).read_text())
    assert verified["verifier"]["hostname"] == socket.gethostname()
    bad = await until_done(client, root=str(root), roster=["step:100.json"])
    assert bad["passed"] is False
    assert [(f["path"], f["kind"]) for f in bad["findings"] if f["blocking"]] == [("step:100.json", "unsafe_name")]
