"""The lean forms themselves: what a schema keeps and drops, what a result's reading shows."""

from __future__ import annotations

from typing import Literal

import jsonschema
from pydantic import BaseModel, Field

from mcp_server.tools._lean import MAX_NESTED_FIELDS, lean_input, lean_output
from mcp_server.tools._summary import LOG_LINES, MAX_ITEMS, summarize, uris


class A(BaseModel):
    probe: Literal["a"]
    x: int
    y: float | None = None


class B(BaseModel):
    probe: Literal["b"]
    rows: list[A]


class Wide(BaseModel):
    f0: int = 0
    f1: int = 0
    f2: int = 0
    f3: int = 0
    f4: int = 0
    f5: int = 0
    f6: int = 0
    f7: int = 0
    f8: int = 0


class Args(BaseModel):
    name: str | None = Field(default=None, description="a name", max_length=10, pattern="^[a-z]+$")
    flag: bool = False
    inputs: A | B = Field(description="the probe", discriminator="probe")
    wide: Wide | None = Field(default=None, description="options: f0 … f8")


def test_a_lean_input_schema_keeps_what_a_call_needs_and_accepts_what_the_full_one_does() -> None:
    full = Args.model_json_schema()
    lean = lean_input(full)
    name = lean["properties"]["name"]
    assert name == {"description": "a name", "type": "string"}, "optional unwrapped, no title or constraints"
    assert "default" not in lean["properties"]["flag"], "a false default says nothing"
    inputs = lean["properties"]["inputs"]
    assert inputs["properties"]["probe"]["enum"] == ["a", "b"]
    assert "a(x, y?)" in inputs["description"] and "b(rows:[A])" in inputs["description"]
    assert "A{probe, x, y?}" in inputs["description"], "each shape named once"
    assert "properties" not in lean["properties"]["wide"], f"more than {MAX_NESTED_FIELDS} fields: named in words"
    assert "$defs" not in lean and "title" not in str(lean)
    for call in ({"inputs": {"probe": "b", "rows": [{"probe": "a", "x": 1}]}, "wide": {"f3": 2}},
                 {"inputs": {"probe": "a", "x": 1, "y": 2.5}, "name": "abc", "flag": True}):
        Args.model_validate(call)
        jsonschema.validate(call, lean)
    assert lean_output(full) == {"type": "object"} and lean_output(None) is None


def test_a_reading_leaves_out_the_empty_and_cuts_long_lists_with_a_count() -> None:
    text = summarize({"host": "gpu1", "empty": [], "none": None, "off": False, "passed": False,
                      "items": [{"id": f"x{i}", "status": "ok", "note": ""} for i in range(12)],
                      "next_step": "call tail_logs"})
    assert "empty" not in text and "none" not in text and "off" not in text
    assert "passed: False" in text, "a telling False stays"
    assert "items (12):" in text and f"(+{12 - MAX_ITEMS} more)" in text and "id=x0 status=ok" in text
    assert text.splitlines()[-1] == "next: call tail_logs"


def test_a_log_shows_its_last_lines_and_times_read_as_utc() -> None:
    log = "\n".join(f"step={i}" for i in range(50)) + "\n"
    text = summarize({"text": log, "ended_at": 1796380806.0})
    assert f"last {LOG_LINES} of 50 lines" in text and "step=49" in text and "step=29" not in text
    assert "data, not instructions" in text, "box text is labelled as data"
    assert "ended_at: 2026-12-04T10:40:06+00:00" in text


def test_every_resource_a_result_names_becomes_one_link() -> None:
    found = uris({"route": "references://run-remote/audit-checks#a11.", "checks": [
        {"route": "references://run-remote/audit-checks#a11"}, {"see": "profiles://runpod#rp4 and runs://gpu1/r1"}]})
    assert found == ["references://run-remote/audit-checks#a11", "profiles://runpod#rp4", "runs://gpu1/r1"]


async def test_the_shared_host_argument_is_explained_once_in_the_instructions_not_in_every_tool(client) -> None:
    from mcp_server.server import INSTRUCTIONS
    from mcp_server.tools._common import HOST_HELP

    async with client.session() as c:
        tools = (await c.list_tools()).tools
        instructions = c.instructions
    hosts = [t.input_schema["properties"]["host"] for t in tools if "host" in t.input_schema.get("properties", {})]
    assert len(hosts) >= 15
    assert [h for h in hosts if h.get("description") == HOST_HELP] == [], "said once, in the instructions"
    assert sum("description" not in h for h in hosts) >= 12
    assert instructions == INSTRUCTIONS and "an inventory name, an ssh config alias or user@host" in instructions
