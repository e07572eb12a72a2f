"""The README stays true: every `call TOOL '<json>'` example it shows is valid JSON naming only
arguments its tool takes (the server refuses unknown names), the examples that need no box run,
and the outputs the README quotes for them are what the tool prints today. Through a real MCP
client, this machine only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcp_server.tools.arguments import refusal
from tests.tools.test_input_limits import _full_schemas

ROOT = Path(__file__).resolve().parents[1]
CALL = re.compile(r"remote-gpu-trainer-mcp call (\w+) '(\{.*?\})'(?=\s|$|`)", re.M)


def readme_calls() -> list[tuple[str, str]]:
    return CALL.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def test_every_call_example_in_the_readme_names_only_arguments_its_tool_takes(client: Any) -> None:
    calls = readme_calls()
    assert len(calls) >= 25
    async with client.session() as c:
        schemas = await _full_schemas(c)
    wrong = []
    for tool, raw in calls:
        arguments = json.loads(raw.replace("…", "x"))
        if tool not in schemas:
            wrong.append(f"{tool}: no such tool")
        elif (error := refusal(tool, arguments, schemas[tool])) is not None:
            wrong.append(str(error)[:200])
    assert wrong == []


async def test_the_readme_examples_that_need_no_box_run_and_print_what_the_readme_quotes(client: Any) -> None:
    boxless = [(t, json.loads(raw)) for t, raw in readme_calls() if t == "run_probe" and '"host"' not in raw]
    assert len(boxless) >= 4
    quoted = {  # what the README says next to each example
        "seed_variance": ["+6.49", "+2.72", "-0.18", "noise"],
        "mde": ["7.75", "underpowered"],
    }
    async with client.session() as c:
        for tool, arguments in boxless:
            result = await c.call_tool(tool, arguments)
            text = _text(result) + json.dumps(result.structured_content or {})
            assert not result.is_error, text[:300]
            for expected in quoted.get(arguments["inputs"]["probe"], []):
                assert expected in text, (arguments["inputs"]["probe"], expected, text[:600])
