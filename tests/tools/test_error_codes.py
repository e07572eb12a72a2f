"""An agent can branch on why a call failed: every tool error leads with a stable code, end to
end through a real MCP client (`Error executing tool <name>: [CODE] <message>`)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

import mcp_server
from mcp_server.errors import RgtError
from tests.conftest import error_text, structured

TOOL_ERROR = re.compile(r"^Error executing tool (?P<tool>\w+): \[(?P<code>[A-Z][A-Z0-9_]*)\] ")
REFUSING_BOX = "nobody@127.0.0.1:1"  # nothing listens on port 1: the connection is refused at once


def code_of(result: Any) -> str:
    text = error_text(result)
    m = TOOL_ERROR.match(text)
    assert m, text
    return m["code"]


def all_error_classes() -> list[type[RgtError]]:
    for info in pkgutil.walk_packages(mcp_server.__path__, "mcp_server."):
        importlib.import_module(info.name)
    found, todo = [], [RgtError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_every_error_class_has_its_own_upper_snake_code() -> None:
    classes = all_error_classes()
    codes = {cls.__name__: cls.code for cls in classes}
    assert all(re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", c) for c in codes.values()), codes
    assert len(set(codes.values())) == len(classes), codes


async def test_a_box_that_refuses_the_connection_fails_with_host_unreachable(client) -> None:
    result = await client.call_tool("audit_box", {"host": REFUSING_BOX})
    assert code_of(result) == "HOST_UNREACHABLE"
    assert "127.0.0.1" in error_text(result)


async def test_a_teardown_token_that_no_plan_issued_fails_with_gate_refused(client) -> None:
    result = await client.call_tool("teardown", {"action": "none", "token": "not-from-a-plan"})
    assert code_of(result) == "GATE_REFUSED"
    assert "unknown token" in error_text(result)


async def test_an_argument_that_is_not_a_box_fails_with_bad_input(client) -> None:
    result = await client.call_tool("audit_box", {"host": "-oProxyCommand=touch /tmp/pwned"})
    assert code_of(result) == "BAD_INPUT"


async def test_audit_box_without_any_host_fails_with_bad_input(client) -> None:
    result = await client.call_tool("audit_box", {"host": None})
    assert code_of(result) == "BAD_INPUT"
    assert "give `host` or `hosts`" in error_text(result)


async def test_a_fan_out_outcome_carries_the_same_code_as_data(client) -> None:
    out = structured(await client.call_tool("audit_box", {"hosts": [REFUSING_BOX]}))
    error = out["outcomes"][0]["error"]
    assert error["code"] == "HOST_UNREACHABLE"
    assert not error["message"].startswith(f"[{error['code']}]")  # a field here, not repeated in the text


async def test_a_prompt_error_carries_its_code_in_the_text_and_as_data(client) -> None:
    async with client.session() as c:
        with pytest.raises(MCPError) as err:
            await c.get_prompt("remote_run", {"host": "local", "platform": "nosuchcloud"})
    assert err.value.error.message.startswith("[BAD_CONFIG] ")
    assert err.value.error.data == {"code": "BAD_CONFIG"}


async def test_arguments_the_sdk_refuses_are_coded_bad_input_naming_the_field_not_the_value(client) -> None:
    missing = await client.call_tool("teardown", {"action": "manual"})
    assert code_of(missing) == "BAD_INPUT"
    assert "token: Field required" in error_text(missing) and "plan_teardown" in error_text(missing)
    canary = "sk-canary-" + "x" * 40
    wrong = await client.call_tool("tail_logs", {"max_bytes": canary, "offset": -5})
    text = error_text(wrong)
    assert code_of(wrong) == "BAD_INPUT" and "max_bytes:" in text and "offset:" in text
    assert canary not in text, "the refused value is not echoed"


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("teardown", {"action": "none", "token": "tok-canary-\udcff"}, "token"),
    ("launch_detached", {"host": "local", "command": "true", "env": {"HF_HOME": "/h/canary-\ud800"}}, "env.HF_HOME"),
])
async def test_text_that_is_not_unicode_is_bad_input_naming_the_argument_not_the_value(
        client: Any, tool: str, args: dict[str, Any], field: str) -> None:
    result = await client.call_tool(tool, args)
    text = error_text(result)
    assert code_of(result) == "BAD_INPUT"
    assert f"argument {field} is not valid Unicode text" in text and "valid UTF-8 text" in text, text
    assert "canary" not in text and "surrogates not allowed" not in text, "the value is not echoed"
