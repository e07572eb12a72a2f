"""MCP adapter layer: the only package (with server.py and __main__.py) that imports mcp.

Every public module here defines `register(server)`; register_all finds them by iterating
the package, so adding a tool module never means editing a central list."""

from __future__ import annotations

import importlib
import pkgutil

from mcp.server import MCPServer

from mcp_server.tools._index import TOOL_MODULES


def register_all(server: MCPServer, only_tool: str | None = None) -> None:
    """Every tool, resource and prompt; with `only_tool` (a name _index knows), just the module
    that registers that tool (a one-call CLI server)."""
    if only_tool in TOOL_MODULES:
        importlib.import_module(f"{__name__}.{TOOL_MODULES[only_tool]}").register(server)
        importlib.import_module(f"{__name__}.surface").register(server)  # the result's reading, as for any client
        importlib.import_module(f"{__name__}.arguments").register(server)  # unknown argument names refused
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(server)
