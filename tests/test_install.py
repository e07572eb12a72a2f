"""The locked install: the locks pin every line with hashes and name no index; the Python floor
fails fast with what to do; known third-party import warnings are filtered the same way in the
server and in pytest, and never reach a user's stderr."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from mcp_server.quiet_imports import KNOWN

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ("test.lock", "run.lock", "build.lock", "uv.lock")


def _requirements(lock: str) -> dict[str, str]:
    text = (ROOT / "requirements" / lock).read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M))
    assert pins, lock
    return pins


def test_every_lock_pins_exact_versions_with_hashes_and_names_no_index() -> None:
    for lock in LOCKS:
        text = (ROOT / "requirements" / lock).read_text()
        entries = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 2)[2])
        for entry in entries:
            assert "==" in entry and "--hash=sha256:" in entry, f"{lock}: {entry[:80]}"
        assert "://" not in text, f"{lock} names an index or URL"


def test_the_run_lock_is_the_test_lock_less_the_test_tools() -> None:
    test, run = _requirements("test.lock"), _requirements("run.lock")
    assert {"mcp", "asyncssh", "pydantic", "matplotlib"} <= set(run)
    assert "pytest" not in run
    differ = {name: (v, test.get(name)) for name, v in run.items() if test.get(name) != v}
    assert not differ, f"a user would run other versions than the tests passed on: {differ}"


def test_a_python_below_the_floor_fails_fast_and_says_what_to_do(tmp_path: Path) -> None:
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python 3.10.12' && exit 0\nexit 1\n")
    fake.chmod(0o755)
    work = tmp_path / "clone"
    (work / "scripts").mkdir(parents=True)
    (work / "scripts" / "install").write_bytes((ROOT / "scripts" / "install").read_bytes())
    (work / "scripts" / "install").chmod(0o755)
    started = time.monotonic()
    done = subprocess.run(["scripts/install"], cwd=work, env={**os.environ, "PYTHON": str(fake)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "needs Python 3.11 or newer" in done.stderr and "Python 3.10.12" in done.stderr
    assert "PYTHON=/path/to/python3.11" in done.stderr
    assert time.monotonic() - started < 10 and not (work / ".venv").exists()


def test_pytest_filters_the_same_known_warnings_as_the_server() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    filters = config["tool"]["pytest"]["ini_options"]["filterwarnings"]
    assert filters[0] == "error"
    ignored = {f for f in filters[1:] if f.startswith("ignore:")}
    assert ignored == {f"ignore:{k.message}:{k.category}:{k.module}" for k in KNOWN}
    assert all(k.reason for k in KNOWN)


def test_known_import_warnings_stay_off_stderr_and_are_logged_once_at_debug() -> None:
    code = "import mcp_server.hosts.ssh"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert quiet.stderr == ""
    debug = subprocess.run([sys.executable, "-c", "import logging; logging.basicConfig(level=logging.DEBUG); " + code],
                           capture_output=True, text=True, env=env, check=True)
    lines = [ln for ln in debug.stderr.splitlines() if "ignored a known warning" in ln]
    assert len(lines) == len(KNOWN), "each known warning once (a filter whose warning is gone is stale: remove it)"
    assert "Warning:" not in debug.stderr.replace("ignored a known warning", "")


def test_an_unknown_warning_raised_during_a_quieted_import_still_shows() -> None:
    code = ("import warnings\nfrom mcp_server.quiet_imports import quiet_known_warnings\n"
            "with quiet_known_warnings():\n    warnings.warn('something new', UserWarning)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "something new" in done.stderr
