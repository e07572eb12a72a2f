"""The one way a tool adapter turns its Context into a progress `Report` for the domain."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from mcp_server.progress import Monotone


def reporter(ctx: Context[Any, Any]) -> Monotone:
    """Progress to the client, monotone; a no-op when the client sent no progress token."""
    return Monotone(ctx.report_progress)
