"""build_server(settings) -> MCPServer. The lifespan owns the App (host pool + ledger)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from mcp.server import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from mcp_server import __version__
from mcp_server.app import App
from mcp_server.settings import Settings
from mcp_server.tools import register_all
from mcp_server.tools.run_resources import watch_subscriptions

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Run deep-learning experiments on GPU boxes you own or rent, verify the numbers are real, and
deliver them from one evidence layer. Start with audit_box on the box ("local" is this machine).
Reference pages are resources (references://..., profiles://<platform>); read the one a check or
finding routes you to. Destructive actions (teardown) are two-phase: plan, then confirm with the
token the plan returned."""


def build_server(settings: Settings | None = None) -> MCPServer[App]:
    settings = settings or Settings.from_env()

    bus = InMemorySubscriptionBus()

    async def publish(uri: str) -> None:
        await bus.publish(ResourceUpdated(uri=uri))

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[App]) -> AsyncIterator[App]:
        app = App(settings, publish)
        log.info("remote-gpu-trainer %s: state in %s", __version__, settings.home)
        try:
            yield app
        finally:
            await app.close()

    server: MCPServer[App] = MCPServer(
        "remote-gpu-trainer",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=settings.log_level,
        subscriptions=bus,
    )
    register_all(server)
    server.middleware.append(watch_subscriptions)
    return server
