"""teardown asks the user to confirm on both protocol generations: mid-call elicitation on the
handshake era ("legacy", 2025-11-25) and an input-required round on 2026-07-28. A yes runs exactly
the planned verb; a no changes nothing and leaves the token valid; a client that cannot be asked
keeps the token flow (the token is the confirmation). The platform is the loopback RunPod double."""

from __future__ import annotations

from typing import Any

import mcp.types as types
import pytest
from mcp import Client

from mcp_server.ledger import Ledger
from mcp_server.server import build_server
from mcp_server.settings import Settings
from tests.conftest import error_text, structured
from tests.support.platforms import Double

KEY = "rp_live_" + "Zc4mQ8v" * 3
MODES = ["legacy", "2026-07-28"]
ARGS = {"host": "pod", "action": "stop", "allow_unverified": True}


@pytest.fixture
def double(env, tmp_path, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("RGT_TEARDOWN_CONFIRM_S", "4")
    (tmp_path / "durable").mkdir()
    d = Double(KEY)
    d.add("pod-1", "RUNNING")
    env.write_inventory({"pod": {"destination": "local", "profile": "runpod", "instance_id": "pod-1",
                                 "api_base": d.base, "durable_root": str(tmp_path / "durable")}})
    yield d
    d.close()


def answering(action: str, confirm: bool | None = None, asked: list[str] | None = None) -> Any:
    async def callback(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if asked is not None:
            asked.append(params.message)
        content = None if confirm is None else {"confirm": confirm}
        return types.ElicitResult(action=action, content=content)
    return callback


def session(mode: str, callback: Any = None) -> Client:
    return Client(build_server(Settings.from_env()), mode=mode, elicitation_callback=callback,
                  read_timeout_seconds=120)


async def planned(mode: str) -> dict[str, Any]:
    async with session(mode) as c:
        p = structured(await c.call_tool("plan_teardown", ARGS))
    assert p["ready"] and p["token"], p["unmet"]
    return p


def acted(double: Double) -> list[str]:
    return [c for c in double.calls if not c.startswith("GET")]


@pytest.mark.parametrize("mode", MODES)
async def test_the_user_says_yes_and_exactly_the_planned_verb_runs(double, mode) -> None:
    p = await planned(mode)
    asked: list[str] = []
    async with session(mode, answering("accept", True, asked)) as c:
        res = structured(await c.call_tool("teardown", ARGS | {"token": p["token"]}))
    assert len(asked) == 1 and asked[0].startswith("Run stop") and "on pod?" in asked[0], asked
    assert res["executed"] and res["outcome"]["confirmed"] and res["plan"]["plan_hash"] == p["plan_hash"]
    assert acted(double) == ["POST /pods/pod-1/stop"]


@pytest.mark.parametrize(("mode", "action", "confirm"), [
    (m, a, c) for m in MODES for a, c in (("decline", None), ("cancel", None), ("accept", False))])
async def test_a_no_does_nothing_and_the_token_stays_valid(double, env, mode, action, confirm) -> None:
    p = await planned(mode)
    async with session(mode, answering(action, confirm)) as c:
        res = structured(await c.call_tool("teardown", ARGS | {"token": p["token"]}))
    assert res["executed"] is False and "declined" in res["message"] and "still valid" in res["message"]
    assert acted(double) == []
    ev = Ledger.open(env.home / "ledger.sqlite").latest("teardown_confirm", host="pod")
    assert ev.data["decision"] == "declined"
    async with session(mode) as c:  # the same token still executes once, now without a question
        again = structured(await c.call_tool("teardown", ARGS | {"token": p["token"]}))
    assert again["executed"] and acted(double) == ["POST /pods/pod-1/stop"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_be_asked_confirms_with_the_token_alone_once(double, mode) -> None:
    p = await planned(mode)
    async with session(mode) as c:
        res = structured(await c.call_tool("teardown", ARGS | {"token": p["token"]}))
        replay = error_text(await c.call_tool("teardown", ARGS | {"token": p["token"]}))
    assert res["executed"] and res["outcome"]["final_state"] == "EXITED"
    assert "already used" in replay and acted(double) == ["POST /pods/pod-1/stop"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_bad_token_is_refused_without_asking_the_user(double, mode) -> None:
    asked: list[str] = []
    async with session(mode, answering("accept", True, asked)) as c:
        text = error_text(await c.call_tool("teardown", ARGS | {"token": "0" * 32}))
    assert "[GATE_REFUSED]" in text and "unknown token" in text and "plan_teardown" in text
    assert asked == [] and acted(double) == []


async def test_plan_teardown_is_read_only_and_teardown_destructive_with_a_required_token(double) -> None:
    async with session("legacy") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    plan, down = tools["plan_teardown"], tools["teardown"]
    assert plan.annotations.read_only_hint and not plan.annotations.destructive_hint
    assert down.annotations.destructive_hint and not down.annotations.read_only_hint
    assert "token" not in plan.input_schema["properties"]
    assert set(down.input_schema["required"]) == {"action", "token"}
    assert "reply" not in down.input_schema["properties"], "the user's answer is not an argument"
