"""The streamable HTTP transport, served by the real CLI in a subprocess: every request needs the
bearer token (401 without it or with a wrong one; the real MCP client with it); the token is
generated into RGT_HOME 0600 and shown once; a non-loopback address is refused without the flag;
a Host or Origin the server does not answer to is refused even with the token (DNS rebinding), on a
loopback bind and on an --allow-remote one, where only the bind address and the configured names pass."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Env
from tests.support.sshd import free_port

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def serve(env, port: int, *extra: str, stderr: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mcp_server", "--transport", "http", "--port", str(port), *extra],
                            env={**os.environ}, stderr=stderr, stdout=subprocess.DEVNULL, text=True)


def wait_up(url: str) -> None:
    """Until the server answers HTTP at all (past its start, token handling included)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.post(url, json=INIT, headers=HEADERS, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


@pytest.fixture
def http_server(env) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    proc = serve(env, port)
    url = f"http://127.0.0.1:{port}/mcp"
    wait_up(url)
    yield url, proc
    proc.terminate()
    proc.wait(timeout=10)


def test_security_http_requests_without_the_bearer_token_are_refused(env, http_server) -> None:
    url, _ = http_server
    token_file = Path(os.environ["RGT_HOME"]) / "http-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert httpx.post(url, json=INIT, headers=HEADERS, timeout=5).status_code == 401
    wrong = httpx.post(url, json=INIT, headers={**HEADERS, "Authorization": "Bearer " + "x" * 43}, timeout=5)
    assert wrong.status_code == 401
    token = token_file.read_text().strip()
    ok = httpx.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=5)
    assert ok.status_code == 200


async def test_the_real_client_works_with_the_token(env, http_server) -> None:
    url, _ = http_server
    token = (Path(os.environ["RGT_HOME"]) / "http-token").read_text().strip()
    async with (httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as c):
        names = {t.name for t in (await c.list_tools()).tools}
    assert {"audit_box", "launch_detached", "plan_teardown", "teardown"} <= names


def test_the_token_is_shown_once(env) -> None:
    port = free_port()
    first = serve(env, port, stderr=subprocess.PIPE)
    wait_up(f"http://127.0.0.1:{port}/mcp")
    first.terminate()
    said = first.communicate(timeout=10)[1]
    token = (Path(os.environ["RGT_HOME"]) / "http-token").read_text().strip()
    assert f"Bearer {token}" in said
    port = free_port()
    again = serve(env, port, stderr=subprocess.PIPE)
    wait_up(f"http://127.0.0.1:{port}/mcp")
    again.terminate()
    assert token not in again.communicate(timeout=10)[1], "shown only when it was created"


def test_security_a_non_loopback_address_needs_the_explicit_flag(env) -> None:
    done = subprocess.run([sys.executable, "-m", "mcp_server", "--transport", "http", "--host", "0.0.0.0",
                           "--port", str(free_port())], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--allow-remote" in done.stderr


def bearer() -> dict[str, str]:
    token = (Path(os.environ["RGT_HOME"]) / "http-token").read_text().strip()
    return {**HEADERS, "Authorization": f"Bearer {token}"}


def status(url: str, **headers: str) -> int:
    """The status of an initialize carrying the right token and these extra headers."""
    return httpx.post(url, json=INIT, headers={**bearer(), **headers}, timeout=5).status_code


def test_security_a_forged_host_or_a_foreign_origin_is_refused_on_loopback_even_with_the_token(
        env: Env, http_server: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = http_server
    port = url.split(":")[2].split("/")[0]
    assert status(url, Host=f"attacker.example:{port}") == 421
    assert status(url, Host=f"127.0.0.1.attacker.example:{port}") == 421
    assert status(url, Origin="http://attacker.example") == 403
    assert status(url, Origin=f"http://attacker.example:{port}") == 403
    assert status(url, Origin=f"http://localhost:{port}") == 200
    assert status(url, Host=f"localhost:{port}") == 200


@pytest.mark.parametrize("bind", ["127.0.0.2", "0.0.0.0"])
def test_security_a_remote_bind_answers_only_to_its_address_and_the_configured_names(env: Env, bind: str) -> None:
    port = free_port()
    proc = serve(env, port, "--host", bind, "--allow-remote", "--allowed-host", "gpu-box.example")
    url = f"http://{'127.0.0.1' if bind == '0.0.0.0' else bind}:{port}/mcp"
    try:
        wait_up(url)
        assert status(url, Host=f"attacker.example:{port}") == 421
        assert status(url, Host="attacker.example") == 421
        assert status(url, Host=f"gpu-box.example:{port}", Origin="https://attacker.example") == 403
        assert status(url, Host=f"gpu-box.example:{port}") == 200
        assert status(url, Host="gpu-box.example", Origin="https://gpu-box.example") == 200
        assert status(url, Host=f"{bind}:{port}") == (421 if bind == "0.0.0.0" else 200)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize(("args", "says"), [
    (["--allowed-host", "gpu-box.example"], "--allowed-host needs --allow-remote"),
    (["--allow-remote", "--allowed-host", "*"], "is not a host name or address"),
    (["--allow-remote", "--allowed-host", "gpu-box.example:8765"], "is not a host name or address"),
])
def test_security_allowed_hosts_need_the_flag_and_are_never_a_wildcard(env: Env, args: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "mcp_server", "--transport", "http", "--host", "127.0.0.2",
                           "--port", str(free_port()), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and says in done.stderr
