"""build_server(settings) -> MCPServer. The lifespan owns the App (host pool + ledger)."""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import AsyncIterator

from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
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


class StaticToken:
    """The HTTP transport's bearer token check (the SDK's TokenVerifier): one token, compared in
    constant time."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.encode(), self._token.encode()):
            return None
        return AccessToken(token="bearer", client_id="remote-gpu-trainer-http", scopes=[])


def build_server(settings: Settings | None = None, *, http_token: str | None = None,
                 http_url: str | None = None, only_tool: str | None = None) -> MCPServer[App]:
    """The server; with `http_token` (and the URL it serves at) every HTTP request must carry
    `Authorization: Bearer <token>`; with `only_tool`, a server of that one tool (the CLI's call)."""
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
        token_verifier=StaticToken(http_token) if http_token else None,
        auth=AuthSettings(issuer_url=http_url, resource_server_url=http_url) if http_token and http_url else None,
    )
    register_all(server, only_tool)
    server.middleware.append(watch_subscriptions)
    return server
