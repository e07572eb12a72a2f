"""MCP adapter layer: the only package (with server.py and __main__.py) that imports mcp.

Every public module here defines `register(server)`; register_all finds them by iterating
the package, so adding a tool module never means editing a central list."""

from __future__ import annotations

import importlib
import pkgutil

from mcp.server import MCPServer


def register_all(server: MCPServer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(server)
