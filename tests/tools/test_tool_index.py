"""The tool index (tools/_index.py) names, for every tool, the module that registers it: a
one-tool server built from it has exactly that tool, and the whole server has no tool the index
misses, so `call TOOL` never answers with a different server than a client sees."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_server.server import build_server
from mcp_server.settings import Settings
from mcp_server.tools._index import TOOL_MODULES


async def _names(only: str | None = None) -> set[str]:
    async with Client(build_server(Settings.from_env(), only_tool=only)) as c:
        return {t.name for t in (await c.list_tools()).tools}


async def test_the_index_names_every_tool_of_the_server() -> None:
    assert await _names() == set(TOOL_MODULES)


@pytest.mark.parametrize("tool", sorted(TOOL_MODULES))
async def test_a_one_tool_server_has_that_tool(tool: str) -> None:
    assert tool in await _names(tool)


async def test_an_unknown_tool_gets_the_whole_server_and_its_usual_error() -> None:
    async with Client(build_server(Settings.from_env(), only_tool="no_such_tool")) as c:
        res = await c.call_tool("no_such_tool", {})
    assert res.is_error
