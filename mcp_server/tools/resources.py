"""Resources: every page of references/ and profiles/, registered by iterating the folders."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver.resources import FunctionResource

from ..knowledge import Doc, docs


def _reader(d: Doc):  # type: ignore[no-untyped-def]
    return lambda: d.text


def register(server: MCPServer) -> None:  # type: ignore[type-arg]
    for kind in ("references", "profiles"):
        for d in docs(kind):  # type: ignore[arg-type]
            server.add_resource(FunctionResource.from_function(
                fn=_reader(d), uri=d.uri, name=d.uri, title=d.title,
                description=f"{kind[:-1]} page {d.path}", mime_type="text/markdown",
            ))
