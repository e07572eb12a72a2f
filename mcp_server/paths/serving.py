"""Whose state folder the path policy keeps out of reach: the settings of the server handling the
call, else the environment's. A process may serve with settings other than its environment's (the
demo keeps its own state in its own folder, which may lie under the user's $RGT_HOME), so the
policy must not read the environment when a server told it what it serves with."""

from __future__ import annotations

from contextvars import ContextVar

from mcp_server.settings import Settings

_SERVING: ContextVar[Settings | None] = ContextVar("rgt_serving_settings", default=None)


def serve_with(settings: Settings) -> None:
    """Called where a server's state opens (App): every call it then handles inherits it."""
    _SERVING.set(settings)


def current_settings() -> Settings:
    return _SERVING.get() or Settings.from_env()
