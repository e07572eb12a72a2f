"""The patrol's test bench: real run dirs driven by real shell jobs (tests/fixtures/patrol/wrapper.sh
leaves them as the launch wrapper does), the patrol itself as a subprocess with a spec file, and a
local HTTP receiver standing in for a webhook channel. Waits poll a condition with a deadline."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.run.jobs.conftest import durable_box  # noqa: F401  (a fixture the tool tests use by name)

REPO = Path(__file__).resolve().parents[3]
PATROL = REPO / "mcp_server" / "run" / "patrol" / "patrol_onbox.py"
WRAPPER = REPO / "tests" / "fixtures" / "patrol" / "wrapper.sh"
HOOK_ENV = "RGT_TEST_PATROL_HOOK"
# The job waits for a `release` file in its run dir (at most 60 s), so a test decides when it ends.
WAIT_RELEASE = ('wait_release() { i=0; until [ -e "$RGT_RUN_DIR/release" ] || [ $i -ge 1200 ]; do sleep 0.05; '
                'i=$((i+1)); done; }\n')


def until(check: Callable[[], Any], timeout: float = 20.0, what: str = "the condition") -> Any:
    """The first truthy value of `check()`, polled until `timeout` seconds have passed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout} s")


@dataclass
class Run:
    dir: Path
    proc: subprocess.Popen[bytes]

    def release(self) -> None:
        (self.dir / "release").touch()

    def note(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.dir / "patrol.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def escalations(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.note().get("escalations", []) if kind is None or e["kind"] == kind]


@dataclass
class Patrol:
    proc: subprocess.Popen[str]
    state_dir: Path
    lines: list[str] = field(default_factory=list)
    reader_done: threading.Event = field(default_factory=threading.Event)

    def status_lines(self) -> list[str]:
        """The tick lines: not the `!` escalation lines nor the `#` start and stop lines."""
        return [ln for ln in self.lines if ln.split(" ", 2)[1] not in ("!", "#")]

    def box(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.state_dir / "box.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def wait_line(self, pred: Callable[[str], bool], timeout: float = 20.0) -> str:
        found: str = until(lambda: next((ln for ln in list(self.lines) if pred(ln)), None), timeout,
                           "a matching patrol line")
        return found

    def wait_exit(self, timeout: float = 20.0) -> int:
        code = self.proc.wait(timeout=timeout)
        until(lambda: self.reader_done.is_set(), 5, "the end of the patrol's output")
        return code


class Receiver(http.server.ThreadingHTTPServer):
    posts: list[dict[str, Any]]


class _Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        assert isinstance(self.server, Receiver)
        self.server.posts.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver(("127.0.0.1", 0), _Hook)
    server.posts = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def durable(tmp_path: Path) -> Path:
    root = tmp_path / "durable"
    (root / ".rgt" / "runs").mkdir(parents=True)
    return root


@pytest.fixture
def start_run(durable: Path) -> Iterator[Callable[..., Run]]:
    runs: list[Run] = []

    def start(run_id: str, script: str, cgroup: str | None = None) -> Run:
        d = durable / ".rgt" / "runs" / run_id
        d.mkdir()
        (d / "wrapper.sh").write_text(WRAPPER.read_text())
        (d / "cmd.sh").write_text(WAIT_RELEASE + script)
        (d / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
        (d / "log").touch()
        if cgroup:
            (d / "cgroup").write_text(cgroup)
        proc = subprocess.Popen(["bash", str(d / "wrapper.sh")], start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run = Run(d, proc)
        runs.append(run)
        until(lambda: (d / "pid").exists() or proc.poll() is not None, 10, "the run's pid file")
        return run

    yield start
    for run in runs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait(timeout=10)


def base_spec(durable: Path, **over: Any) -> dict[str, Any]:
    """Fast ticks; the box-wide alarms (disk, memory) off unless a test turns one on, so a busy CI
    disk or memory cannot add an escalation to a test about something else."""
    spec: dict[str, Any] = {"host": "testbox", "durable_root": str(durable), "runs": [], "interval_s": 0.3,
                            "jitter_s": 0, "sample_s": 0.05, "lifetime_s": 60, "stall_s": 3600, "disk_pct": 0,
                            "disk_eta_h": 0, "mem_pct": 0, "channels": [], "signatures": []}
    spec.update(over)
    return spec


def hook_channel() -> dict[str, Any]:
    return {"kind": "webhook", "name": "hook", "url_env": HOOK_ENV}


@pytest.fixture
def start_patrol(tmp_path: Path) -> Iterator[Callable[..., Patrol]]:
    patrols: list[Patrol] = []

    def start(spec: dict[str, Any], env: dict[str, str] | None = None, script: Path = PATROL) -> Patrol:
        path = tmp_path / f"spec-{len(patrols)}.json"
        path.write_text(json.dumps(spec))
        state = Path(spec.get("state_dir") or Path(spec["durable_root"]) / ".rgt" / "patrol")
        proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        patrol = Patrol(proc, state)
        patrols.append(patrol)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                patrol.lines.append(line.rstrip("\n"))
            patrol.reader_done.set()

        threading.Thread(target=read, daemon=True).start()
        return patrol

    yield start
    for p in patrols:
        if p.proc.poll() is None:
            p.proc.kill()
        p.proc.wait(timeout=10)
        p.reader_done.wait(timeout=10)
        if p.proc.stdout is not None:
            p.proc.stdout.close()
