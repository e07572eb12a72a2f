"""Protocol answers that clients and the conformance suite check, through the real MCP client on
both protocol generations ("legacy": the 2025-11-25 handshake; "auto": 2026-07-28): an unknown
prompt, prompt argument or tool and a cursor never issued are refused with -32602 or a coded
error naming what exists; a 2025 client subscribes to a run and hears when it ends; the logging
capability carries the server's records, secrets masked; initialize and server/discover declare
the same capabilities; the HTTP 401 offers no OAuth dead end."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import mcp.types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mcp_server.server import build_server
from mcp_server.settings import Settings
from tests.conftest import error_text, structured
from tests.support.sshd import free_port
from tests.support.wait import until
from tests.tools.test_http_auth import HEADERS, INIT, serve, wait_up

MODES = ["legacy", "auto"]
SECRET = "s3cr3t-" + "Qx7vLp2" * 3


def session(mode: str = "legacy", **kw: Any) -> Client:
    return Client(build_server(Settings.from_env()), mode=mode, read_timeout_seconds=60, **kw)


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    logged = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert logged == [], [r.getMessage() for r in logged]


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_prompt_is_invalid_params_naming_the_prompts_with_no_traceback(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async with session(mode) as c:
        with pytest.raises(MCPError) as err:
            await c.get_prompt("verify_reslt-zz9", {"run_id": "r1"})
    assert err.value.error.code == types.INVALID_PARAMS
    said = err.value.error.message
    assert said.startswith("[NOT_FOUND] ") and "Did you mean verify_result?" in said
    assert all(p in said for p in ("remote_run", "verify_result", "deliver")) and "zz9" not in said
    assert err.value.error.data == {"code": "NOT_FOUND"}
    no_traceback(caplog)


@pytest.mark.parametrize("mode", MODES)
async def test_a_missing_or_unknown_prompt_argument_is_invalid_params_naming_the_arguments(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async with session(mode) as c:
        with pytest.raises(MCPError) as missing:
            await c.get_prompt("verify_result", {"metric": "PSNR"})
        with pytest.raises(MCPError) as typo:
            await c.get_prompt("remote_run", {"hots": "gpu-box"})  # would silently render for "local"
    for err in (missing, typo):
        assert err.value.error.code == types.INVALID_PARAMS and err.value.error.data == {"code": "BAD_INPUT"}
    assert "needs the argument run_id" in missing.value.error.message
    assert "run_id (required), metric, host" in missing.value.error.message
    assert "takes no argument hots" in typo.value.error.message and "Did you mean host?" in typo.value.error.message
    assert "host, platform, run_name" in typo.value.error.message and "gpu-box" not in typo.value.error.message
    no_traceback(caplog)


@pytest.mark.parametrize("mode", MODES)
async def test_the_schemas_of_an_unknown_tool_are_not_found_as_an_unknown_run_is(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async with session(mode) as c:
        with pytest.raises(MCPError) as err:
            await c.read_resource("schemas://tools/audit_bx")
        found = await c.read_resource("schemas://tools/audit_box")
    assert err.value.error.code == types.INVALID_PARAMS
    assert err.value.error.message.startswith("[NOT_FOUND] ") and "Did you mean audit_box?" in err.value.error.message
    assert "launch_detached" in err.value.error.message and "audit_bx" not in err.value.error.message
    assert '"name": "audit_box"' in found.contents[0].text
    no_traceback(caplog)


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_tool_is_a_coded_error_with_the_tools_there_are(mode: str) -> None:
    async with session(mode) as c:
        typo = error_text(await c.call_tool("lanch_detached", {"host": "local"}))
        nothing_close = error_text(await c.call_tool("zzzz_qqqq", {}))
    assert typo.startswith("[NOT_FOUND] ") and "Did you mean launch_detached?" in typo and "lanch" not in typo
    assert all(t in typo for t in ("audit_box", "tail_logs", "teardown")) and "next: call one of these" in typo
    assert nothing_close.startswith("[NOT_FOUND] ") and "Did you mean" not in nothing_close


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["list_tools", "list_resources", "list_prompts", "list_resource_templates"])
async def test_a_cursor_this_server_never_issued_is_invalid_params(mode: str, method: str) -> None:
    async with session(mode) as c:
        whole = await getattr(c, method)()
        assert whole.next_cursor is None, "every list is one page"
        with pytest.raises(MCPError) as err:
            await getattr(c, method)(cursor="never-issued")
    assert err.value.error.code == types.INVALID_PARAMS and err.value.error.data == {"code": "BAD_INPUT"}
    assert "without a cursor" in err.value.error.message and "never-issued" not in err.value.error.message


async def test_initialize_and_server_discover_declare_the_same_capabilities() -> None:
    async with session("legacy") as old, session("auto") as new:
        assert old.protocol_version.startswith("2025-") and new.protocol_version == "2026-07-28"
        legacy, modern = old.server_capabilities, new.server_capabilities
    # `extensions` (MCP Apps) is a 2026-07-28 field: the 2025 wire has no place for it
    assert legacy == modern.model_copy(update={"extensions": None}) and modern.extensions
    assert legacy.resources is not None and legacy.resources.subscribe is True
    assert legacy.logging is not None and legacy.completions is not None


@pytest.fixture
def fast_watch(monkeypatch: pytest.MonkeyPatch, local_box: Path) -> Path:
    monkeypatch.setenv("RGT_WATCH_INTERVAL", "0.3")
    return local_box


async def _launch(c: Client, command: str, **extra: Any) -> dict[str, Any]:
    res = structured(await c.call_tool("launch_detached", {"host": "gpu1", "command": command, "probe_s": 0,
                                                           **extra}))
    launched: dict[str, Any] = res["outcomes"][0]["launch"]
    return launched


async def test_a_2025_client_subscribes_to_a_run_hears_when_it_ends_and_unsubscribing_stops_it(
        fast_watch: Path, tmp_path: Path) -> None:
    updates: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.put_nowait(str(message.params.uri))

    async def next_update() -> str:
        return await asyncio.wait_for(updates.get(), timeout=20)

    gate = {name: tmp_path / f"gate-{name}" for name in ("kept", "dropped", "later")}
    async with session("legacy", message_handler=on_message) as c:
        runs = {n: await _launch(c, f"while [ ! -e {g} ]; do sleep 0.05; done") for n, g in gate.items()}
        uri = {n: f"runs://gpu1/{r['run_id']}" for n, r in runs.items()}
        with pytest.warns(MCPDeprecationWarning):  # the 2025 method, deprecated only on 2026-07-28
            for n in gate:
                await c.subscribe_resource(uri[n])
            await c.unsubscribe_resource(uri["dropped"])
        gate["dropped"].touch()
        await until(lambda: (Path(runs["dropped"]["run_dir"]) / "exit_code").is_file(), what="the dropped run's end")
        gate["kept"].touch()
        assert await next_update() == uri["kept"]
        gate["later"].touch()
        # Updates go out in the order the watcher saw the changes: had the dropped run (ended
        # first) still been subscribed, its update would come before the later run's.
        assert await next_update() == uri["later"]
        assert updates.empty()
        view = await c.read_resource(uri["kept"])
        assert '"status": "succeeded"' in view.contents[0].text


async def test_a_subscription_to_a_box_that_is_no_host_is_refused_at_once(env: Any) -> None:
    async with session("legacy") as c:
        with pytest.raises(MCPError) as err, warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await c.subscribe_resource("runs://-oProxyCommand=x/r1")
    assert err.value.error.code == types.INVALID_PARAMS and err.value.error.data == {"code": "BAD_INPUT"}


async def test_a_2025_client_gets_the_server_log_at_its_level_with_secrets_masked(
        local_box: Path, monkeypatch: pytest.MonkeyPatch, env: Any, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("RGT_TEST_SECRET", SECRET)
    got: asyncio.Queue[types.LoggingMessageNotificationParams] = asyncio.Queue()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.put_nowait(params)

    box_log = logging.getLogger("mcp_server.run.jobs.watch")
    env.home.mkdir(parents=True, exist_ok=True)
    env.home.chmod(0o755)  # the server tightens its state dir and logs a warning when the ledger opens
    async with session("legacy", logging_callback=on_log) as c:
        with pytest.warns(MCPDeprecationWarning):
            await c.set_logging_level("warning")
        structured(await c.call_tool("list_runs", {"host": "gpu1"}))
        tightened = await asyncio.wait_for(got.get(), timeout=10)
        assert (tightened.level, tightened.logger) == ("warning", "mcp_server.statedir")
        assert "was mode 755, now 700" in str(tightened.data)
        with pytest.warns(MCPDeprecationWarning):
            await c.set_logging_level("error")
        await _launch(c, "true", secret_env=["RGT_TEST_SECRET"])  # the server learns the secret
        box_log.warning("below the level: not sent")
        box_log.error("the box answered %s", SECRET)
        said = await asyncio.wait_for(got.get(), timeout=10)
    assert (said.level, said.logger) == ("error", "mcp_server.run.jobs.watch")
    assert said.data == "the box answered [REDACTED]", "the warning before it was never sent"
    stderr = [r.getMessage() for r in caplog.records if r.name.startswith("mcp_server")]
    assert f"the box answered {SECRET}" in stderr and "below the level: not sent" in stderr, "stderr logging unchanged"


async def test_a_2026_request_that_asks_for_the_log_gets_the_records_logged_while_it_ran(env: Any) -> None:
    got: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)

    env.home.mkdir(parents=True, exist_ok=True)
    env.home.chmod(0o750)
    async with session("auto", logging_callback=on_log, log_level="warning") as c:
        structured(await c.call_tool("list_runs", {"host": "local"}))
    assert [(g.level, g.logger) for g in got] == [("warning", "mcp_server.statedir")]
    assert "was mode 750, now 700" in str(got[0].data)


@pytest.fixture
def http_url(env: Any) -> Iterator[str]:
    port = free_port()
    proc: subprocess.Popen[str] = serve(env, port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_up(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_security_the_http_401_says_where_the_token_is_and_offers_no_oauth_dead_end(http_url: str) -> None:
    refused = httpx.post(http_url, json=INIT, headers=HEADERS, timeout=5)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata" not in challenge
    assert "RGT_HTTP_TOKEN" in challenge and "$RGT_HOME/http-token" in challenge
    assert refused.json()["error_description"] in challenge
    token = (Path(os.environ["RGT_HOME"]) / "http-token").read_text().strip()
    base = http_url.removesuffix("/mcp")
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
                 "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        for headers in ({}, {"Authorization": f"Bearer {token}"}):
            assert httpx.get(base + path, headers=headers, timeout=5).status_code == 404, path
    ok = httpx.post(http_url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=5)
    assert ok.status_code == 200
