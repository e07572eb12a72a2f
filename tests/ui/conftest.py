"""The MCP Apps views in a real browser: headless system Chromium driven by playwright-core, a host
page on the official AppBridge, and the real server behind a real MCP client (tests/ui/driver.mjs).

The Node side starts once per session (tests/support/ui-setup.sh installs it; the tests skip, naming
what is missing, only when Node/npm or Chromium cannot be installed here). Each test gets a fresh
server in its own RGT_HOME, a fresh browser context and its recorded tool calls."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.wait import until

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SETUP = REPO / "tests" / "support" / "ui-setup.sh"
DRIVER = HERE / "driver.mjs"
CANNOT_INSTALL = 3
SCREENSHOTS = REPO / "docs" / "views"


@dataclass(frozen=True)
class UiTools:
    node: str
    chromium: str


@pytest.fixture(scope="session")
def ui_tools() -> UiTools:
    """Node and Chromium, installed by the setup script (a no-op once installed)."""
    try:
        done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        pytest.fail("tests/support/ui-setup.sh ran past 900 s (is the npm registry or the apt mirror reachable?)")
    tail = "\n".join(done.stderr.strip().splitlines()[-5:])
    if done.returncode == CANNOT_INSTALL:
        pytest.skip(f"browser tests need Node/npm and Chromium, which cannot be installed here: {tail}")
    if done.returncode != 0:
        pytest.fail(f"tests/support/ui-setup.sh failed (exit {done.returncode}):\n{tail}")
    node, chromium = done.stdout.split("\n")[:2]
    return UiTools(node, chromium)


class Driver:
    """The Node driver process: one JSON command per line in, one JSON answer per line out."""

    def __init__(self, tools: UiTools, log: Path) -> None:
        self.log = log
        self._stderr = log.open("w")
        self.proc = subprocess.Popen(
            [tools.node, str(DRIVER), f"--chromium={tools.chromium}", f"--python={sys.executable}"],
            cwd=HERE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next = 0
        self.origin = self._answer(None, timeout=60)["origin"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._answers.put(line)

    def _answer(self, want: int | None, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the browser driver gave no answer in {timeout} s; its log: {self.log}") from None
            if not line.startswith("{"):
                continue  # a library's stray stdout line, not an answer
            answer = json.loads(line)
            if answer["id"] == want:
                break  # anything else answers a command that already timed out
        if not answer["ok"]:
            raise AssertionError(f"browser driver: {answer['error']}")
        return answer["result"]

    def send(self, op: str, timeout: float = 30, **fields: Any) -> Any:
        if self.proc.poll() is not None:
            raise AssertionError(f"the browser driver exited ({self.proc.returncode}); its log: {self.log}")
        self._next += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": self._next, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return self._answer(self._next, timeout)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="session")
def ui_driver(ui_tools: UiTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    driver = Driver(ui_tools, tmp_path_factory.mktemp("ui-driver") / "driver.log")
    yield driver
    driver.close()


class AppsHost:
    """One test's host: the server in the test's environment, one view at a time, the view's DOM
    as data, its proxied tool calls, and the page's console (CSP violations included)."""

    def __init__(self, driver: Driver, shots: Path) -> None:
        self.driver = driver
        self.shots = shots

    async def send(self, op: str, timeout: float = 30, **fields: Any) -> Any:
        return await asyncio.to_thread(self.driver.send, op, timeout, **fields)

    async def open(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call `tool` as a host does and render its view with the input and the result. The view must
        declare no CSP domains: this host applies the spec's default policy, the strictest."""
        opened: dict[str, Any] = await self.send("open", timeout=60, tool=tool, arguments=arguments)
        csp = ((opened["resourceMeta"] or {}).get("ui") or {}).get("csp")
        assert not csp, f"{opened['uri']} declares CSP domains {csp}; a view must reach nothing but its host"
        return opened

    async def mount(self, html: str) -> None:
        """Render raw HTML as a view with no handshake (the harness's own checks)."""
        await self.send("mount", html=html, input={}, result={"content": []}, handshake=False)

    async def query(self, css: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self.send("query", css=css)
        return found

    async def text(self, testid: str) -> str:
        found = await self.query(f'[data-testid="{testid}"]')
        assert found, f"the view has no data-testid={testid!r} element"
        return str(found[0]["text"])

    async def wait_for(self, check: Callable[[], Any], what: str, timeout: float = 15) -> Any:
        return await until(check, timeout=timeout, interval=0.1, what=what)

    async def wait_text(self, testid: str, predicate: Callable[[str], bool], what: str, timeout: float = 15) -> str:
        async def check() -> str | None:
            found = await self.query(f'[data-testid="{testid}"]')
            return found[0]["text"] if found and predicate(found[0]["text"]) else None
        text: str = await self.wait_for(check, what=f"{testid} {what}", timeout=timeout)
        return text

    async def click(self, testid: str) -> None:
        await self.send("click", css=f'[data-testid="{testid}"]')

    async def press(self, css: str, key: str) -> None:
        await self.send("press", css=css, key=key)

    async def select(self, testid: str, value: str) -> None:
        await self.send("select", css=f'[data-testid="{testid}"]', value=value)

    async def window_global(self, name: str) -> str | None:
        """`window[name]` in the view as a string, or None when it was never set."""
        value: str | None = await self.send("global", name=name)
        return value

    async def advance(self, seconds: float) -> None:
        """Jump the page's clock (the view's timers fire as if that much time had passed)."""
        await self.send("advance", ms=int(seconds * 1000))

    async def calls(self, name: str | None = None) -> list[dict[str, Any]]:
        """The tools/call requests the view sent through the host, in order."""
        calls: list[dict[str, Any]] = await self.send("calls")
        return [c for c in calls if name is None or c["name"] == name]

    async def events(self) -> dict[str, Any]:
        events: dict[str, Any] = await self.send("events")
        return events

    async def screenshot(self, name: str) -> Path:
        """The page with the view, under the test's tmp dir; also docs/views/<name>.png when
        RGT_UPDATE_SCREENSHOTS=1 (the README's pictures)."""
        path = self.shots / f"{name}.png"
        await self.send("screenshot", path=str(path))
        if os.environ.get("RGT_UPDATE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, SCREENSHOTS / f"{name}.png")
        return path


@pytest.fixture
async def apps_host(ui_driver: Driver, env: Any, tmp_path: Path) -> AsyncIterator[AppsHost]:
    """A fresh server (this test's RGT_HOME and inventory) behind the host page."""
    await asyncio.to_thread(ui_driver.send, "session", 60, env=dict(os.environ), cwd=str(REPO))
    host = AppsHost(ui_driver, tmp_path)
    yield host
    await host.send("end")
