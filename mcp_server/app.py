"""App: the state one server instance shares across tool calls (no MCP import here).

The ledger and inventory open lazily, so a corrupt ledger or a bad inventory surfaces as
a clear tool error instead of a server that will not start."""

from __future__ import annotations

import os

from mcp_server.hosts.base import Host
from mcp_server.hosts.notify_channels import box_channels
from mcp_server.hosts.pool import HostPool, HostSpec
from mcp_server.knowledge import profiles
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines import configure_engines
from mcp_server.run.jobs.watch import Publish, RunWatch
from mcp_server.settings import Settings
from mcp_server.statedir import secure_state


class App:
    def __init__(self, settings: Settings, publish: Publish | None = None) -> None:
        self.settings = settings
        configure_engines(settings)
        self.redactor = Redactor()
        self._pool: HostPool | None = None
        self._ledger: Ledger | None = None
        self._publish = publish
        self._watch: RunWatch | None = None

    @property
    def watch(self) -> RunWatch:
        """Watchers of subscribed runs (they publish resource-updated URIs through `publish`)."""
        if self._watch is None:
            self._watch = RunWatch(self._open_host, self._publish or _nowhere,
                                   interval_s=self.settings.watch_interval_s)
        return self._watch

    async def _open_host(self, name: str) -> tuple[Host, HostSpec]:
        spec = self.pool.spec(name)
        return await self.pool.host(spec), spec

    @property
    def pool(self) -> HostPool:
        if self._pool is None:
            self._pool = HostPool(self.settings)
        return self._pool

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            secure_state(self.settings.home, [self.settings.known_hosts_path])
            self._ledger = Ledger.open(self.settings.ledger_path, self.redactor)
            self._learn_secrets(self._ledger)
        return self._ledger

    def _learn_secrets(self, ledger: Ledger) -> None:
        """Mask from the start every secret this server may meet: the values of the variables
        earlier launches named (a fresh server reading an old run's log by path) and of every
        platform API key variable the profiles and the inventory name, and every notification secret."""
        names = {n for ev in ledger.events("launch", limit=10_000) for n in ev.data.get("secret_env_names") or []
                 if isinstance(n, str)}
        names |= {p.api.api_key_env for p in profiles().values() if p.api and p.api.api_key_env}
        names |= {e.api_key_env for e in self.pool.inventory.hosts.values() if e.api_key_env}
        names |= set(box_channels(self.pool.inventory.channels)[1])  # webhook URLs, bot tokens, SMTP passwords
        for n in names:
            if n in os.environ:
                self.redactor.add(os.environ[n])

    async def close(self) -> None:
        if self._watch is not None:
            await self._watch.close()
        if self._pool is not None:
            await self._pool.close()
        if self._ledger is not None:
            self._ledger.close()


async def _nowhere(uri: str) -> None:
    """Publish target when no server bus is attached (an App used outside a server)."""
