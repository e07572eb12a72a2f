"""Run watchers: for clients that subscribe to `runs://{host}/{run_id}` resources, one task per
host polls ALL that host's watched runs in one round trip (the one-pass run scan), and reports
the URIs of runs whose state changed: status, exit code, or a running log going stale. The
interval doubles while nothing changes (up to `max_factor` times the base) and returns to the
base on a change. A host's task exists only while someone listens to one of its runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mcp_server.errors import RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.runscan import BoxRun, scan_runs

log = logging.getLogger(__name__)
PREFIX = "runs://"
DEFAULT_STALL_S = 900.0

OpenHost = Callable[[str], Awaitable[tuple[Host, HostSpec]]]
Publish = Callable[[str], Awaitable[None]]


def parse_run_uri(uri: str) -> tuple[str, str] | None:
    """(host, run id) of `runs://host/run_id` or `runs://host/run_id/log`; None for anything else."""
    if not uri.startswith(PREFIX):
        return None
    parts = uri[len(PREFIX):].split("/")
    if len(parts) == 2 or (len(parts) == 3 and parts[2] == "log"):
        return (parts[0], parts[1]) if parts[0] and parts[1] else None
    return None


def fingerprint(run: BoxRun | None, now: float, stall_s: float) -> tuple[object, ...]:
    """What a subscriber is told about when it changes: gone, status, exit code, stalled, and each
    new escalation of an on-box patrol watching the run."""
    if run is None:
        return ("absent",)
    st = run.state
    stalled = st.status == "running" and st.log_mtime is not None and now - st.log_mtime > stall_s
    return (st.status, st.exit_code, stalled, run.patrol_escalations)


@dataclass
class _HostWatch:
    uris: Counter[str] = field(default_factory=Counter)
    run_of: dict[str, str] = field(default_factory=dict)
    seen: dict[str, tuple[object, ...]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    polls: int = 0


class RunWatch:
    def __init__(self, open_host: OpenHost, publish: Publish, *, interval_s: float = 30.0, max_factor: float = 4.0,
                 stall_s: float = DEFAULT_STALL_S) -> None:
        self._open_host, self._publish = open_host, publish
        self.interval_s, self.max_factor, self.stall_s = interval_s, max_factor, stall_s
        self._hosts: dict[str, _HostWatch] = {}

    def add(self, uris: list[str]) -> list[str]:
        """Start watching these URIs (the run ones); returns what to pass to `remove`."""
        taken = []
        for u in uris:
            parsed = parse_run_uri(u)
            if parsed is None:
                continue
            host, run_id = parsed
            w = self._hosts.setdefault(host, _HostWatch())
            w.uris[u] += 1
            w.run_of[u] = run_id
            taken.append(u)
            if w.task is None:
                w.task = asyncio.create_task(self._loop(host, w), name=f"rgt-watch-{host}")
        return taken

    def remove(self, uris: list[str]) -> None:
        for u in uris:
            parsed = parse_run_uri(u)
            w = self._hosts.get(parsed[0]) if parsed else None
            if parsed is None or w is None:
                continue
            host = parsed[0]
            w.uris[u] -= 1
            if w.uris[u] <= 0:
                del w.uris[u]
                w.run_of.pop(u, None)
            if not w.uris and w.task is not None:
                w.task.cancel()
                del self._hosts[host]

    def polls(self, host: str) -> int:
        w = self._hosts.get(host)
        return w.polls if w else 0

    def watching(self) -> list[str]:
        return sorted(self._hosts)

    async def close(self) -> None:
        tasks = [w.task for w in self._hosts.values() if w.task is not None]
        self._hosts.clear()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def _loop(self, host_name: str, w: _HostWatch) -> None:
        delay = self.interval_s
        while True:
            try:
                changed = await self.poll(host_name, w)
            except RgtError as exc:  # the box is unreachable: say nothing, try again later
                log.warning("watch %s: %s", host_name, exc)
                changed = False
            delay = self.interval_s if changed else min(delay * 2, self.interval_s * self.max_factor)
            await asyncio.sleep(delay)

    async def poll(self, host_name: str, w: _HostWatch) -> bool:
        """One round trip for every watched run of the host; publishes the URIs that changed."""
        host, spec = await self._open_host(host_name)
        runs = {r.run_id: r for r in await scan_runs(host, spec)}
        w.polls += 1
        now = time.time()
        changed = False
        for run_id in sorted(set(w.run_of.values())):
            fp = fingerprint(runs.get(run_id), now, self.stall_s)
            if w.seen.get(run_id, fp) != fp:
                changed = True
                for u in (f"{PREFIX}{host_name}/{run_id}", f"{PREFIX}{host_name}/{run_id}/log"):
                    if u in w.uris:
                        await self._publish(u)
            w.seen[run_id] = fp
        return changed
