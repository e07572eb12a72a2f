"""Whose state folder the path policy keeps out of reach: the settings of the server handling the
call, else the environment's. A process may serve with settings other than its environment's (the
demo keeps its own state in its own folder, which may lie under the user's $RGT_HOME), so the
policy must not read the environment when a server told it what it serves with."""

from __future__ import annotations

from contextvars import ContextVar, Token

from mcp_server.settings import Settings

_SERVING: ContextVar[Settings | None] = ContextVar("rgt_serving_settings", default=None)


def serve_with(settings: Settings) -> Token[Settings | None]:
    """Called in a server's lifespan, the task its calls are handled under: they inherit it, and
    nothing outside that server does (an App made directly, as tests do, keeps the environment's)."""
    return _SERVING.set(settings)


def stop_serving(token: Token[Settings | None]) -> None:
    _SERVING.reset(token)


def current_settings() -> Settings:
    return _SERVING.get() or Settings.from_env()
