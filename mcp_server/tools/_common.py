"""Shared pieces of the adapter layer: annotation presets, the App from the context, the
one mapping from our errors to ToolError, and fan-out over several hosts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.errors import RgtError

T = TypeVar("T")

# Presets, set honestly. openWorld: the tool talks to boxes outside this process.
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
READ_ONLY_LOCAL = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
LAUNCH = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
WRITES_LOCAL = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)


def app_of(ctx: Context) -> App:
    return ctx.request_context.lifespan_context  # type: ignore[no-any-return]


@contextlib.contextmanager
def tool_errors(app: App) -> Iterator[None]:
    """Our errors -> ToolError (the model reads the message). Bugs stay bugs."""
    try:
        yield
    except RgtError as exc:
        raise ToolError(app.redactor.scrub(str(exc))) from exc


class HostError(BaseModel):
    """Why one host of a fan-out has no result; the others are unaffected."""

    code: str = Field(description="error class, e.g. transport, host_key, auth, timeout")
    message: str


async def fan_out(
    app: App, names: list[str], one: Callable[[str], Awaitable[T]]
) -> list[tuple[str, T | None, HostError | None]]:
    """Run `one` for each host concurrently; an error on one box never hides the others."""

    async def guarded(name: str) -> tuple[str, T | None, HostError | None]:
        try:
            return name, await one(name), None
        except RgtError as exc:
            return name, None, HostError(code=exc.code, message=app.redactor.scrub(str(exc)))

    return list(await asyncio.gather(*(guarded(n) for n in names)))
