"""A misspelled argument name is refused, never dropped: every tool answers an unknown name with
a BAD_INPUT error that names it (names only, never a value), lists the valid ones and suggests
the closest, and the call does not run. End to end through a real MCP client."""

from __future__ import annotations

import re
from typing import Any

from mcp import Client

from mcp_server.server import build_server
from mcp_server.settings import Settings
from mcp_server.tools.arguments import MAX_NAMED
from tests.conftest import error_text, structured

TOOL_ERROR = re.compile(r"^Error executing tool (?P<tool>\w+): \[(?P<code>[A-Z][A-Z0-9_]*)\] ")


def bad_input(result: Any, tool: str) -> str:
    text = error_text(result)
    m = TOOL_ERROR.match(text)
    assert m and m["code"] == "BAD_INPUT" and m["tool"] == tool, text
    return text


async def test_every_tool_refuses_a_misspelled_argument_naming_it_and_its_real_ones_and_keeps_serving(client) -> None:
    async with client.session() as c:
        tools = (await c.list_tools()).tools
        assert len(tools) >= 20
        for tool in tools:
            names = list(tool.input_schema.get("properties", {}))
            typo = f"{names[0]}x" if names else "confrim"
            text = bad_input(await c.call_tool(tool.name, {typo: "canary-value"}), tool.name)
            assert f"unknown argument for {tool.name}: {typo}" in text, text
            assert "the call was not run" in text
            assert all(n in text for n in names), (tool.name, text)
            assert "canary-value" not in text, "a value is never quoted"
        found = structured(await c.call_tool("search_references", {"query": "CUDA out of memory"}))
    assert found, "the server keeps serving after the refusals"


async def test_a_near_miss_is_answered_with_the_name_it_meant_instead_of_running_on_the_default(client) -> None:
    result = await client.call_tool("reap_vram", {"min_age_sec": 5})
    text = bad_input(result, "reap_vram")
    assert "min_age_sec (did you mean min_age_s?)" in text
    assert "schemas://tools/reap_vram" in text, "the next step names where the argument types are"


async def test_a_misspelled_field_of_an_object_argument_is_refused_with_its_fields(client) -> None:
    result = await client.call_tool("audit_box", {"host": "local", "expect_gpu": {"nmae": "H100", "count": 1}})
    text = bad_input(result, "audit_box")
    assert "expect_gpu.nmae (did you mean expect_gpu.name?)" in text
    assert "expect_gpu takes name, count, min_memory_gib" in text
    # Clients may send an object argument as a JSON string; the same check reads it.
    again = await client.call_tool("audit_box", {"host": "local", "expect_gpu": '{"cuont": 2}'})
    assert "expect_gpu.cuont (did you mean expect_gpu.count?)" in bad_input(again, "audit_box")


async def test_a_name_with_odd_characters_is_shown_as_a_placeholder_and_many_are_counted(client) -> None:
    odd = {"x\x1b[2J": 1, "a b": 2, "k" * 200: 3, "ok_name": 4}
    odd |= {f"extra{i}": i for i in range(MAX_NAMED)}
    result = await client.call_tool("wait_for_run", {"run_id": "r1", **odd})
    text = bad_input(result, "wait_for_run")
    assert "<key>" in text and "\x1b" not in text and "a b" not in text and "k" * 100 not in text
    assert f"and {len(odd) - MAX_NAMED} more" in text, text


async def test_the_one_tool_server_of_the_cli_refuses_unknown_names_too(env: Any) -> None:
    async with Client(build_server(Settings.from_env(), only_tool="plan_teardown")) as c:
        result = await c.call_tool("plan_teardown", {"action": "stop", "alow_unverified": True})
    assert "alow_unverified (did you mean allow_unverified?)" in bad_input(result, "plan_teardown")


async def test_known_names_still_reach_the_tool_and_its_own_validation(client) -> None:
    ok = structured(await client.call_tool("search_references", {"query": "inodes full", "limit": 2}))
    assert ok
    missing = await client.call_tool("teardown", {"action": "manual"})
    assert "token: Field required" in bad_input(missing, "teardown"), "the SDK's own check still answers"
