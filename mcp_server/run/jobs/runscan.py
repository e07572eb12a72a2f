"""Every run on a box in one pass (scripts/job_list_runs.sh), then filters, newest-first order
and cursor paging here; the run.json of only the page's runs comes back in one more round trip
(scripts/job_list_records.sh). Cost: a few processes on the box whatever the number of runs.

Engines whose state is the run-dir contract (the shell and tmux engines) are answered by the
scan itself; any other engine (Slurm, Kubernetes) is asked for the state of its runs that the
scan does not show as ended, in one round trip per engine."""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server import scripts, untrusted
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.engines import ENGINES, own_state
from mcp_server.run.jobs.engines.base import DEFAULT_ENGINE
from mcp_server.run.jobs.rundir import RunRecordSummary, RunStatus, run_dir_path, runs_dir_path
from mcp_server.run.jobs.status import RunState, StateLine

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class BoxRun:
    run_id: str
    engine: str
    started_at: float
    name: str | None
    state: RunState
    patrol_escalations: int = 0  # what an on-box patrol watching the run has escalated so far
    patrol_last: str | None = None


class RunFilter(BaseModel):
    """Which runs list_runs shows; every field optional."""

    states: list[RunStatus] = Field(default_factory=list, description="only runs in one of these states")
    name: str | None = Field(default=None, description="glob on the run name (or the run id when it has none)")
    since: float | None = Field(default=None, description="only runs started at or after this epoch time")

    def keeps(self, run: BoxRun) -> bool:
        if self.states and run.state.status not in self.states:
            return False
        if self.name and not fnmatch.fnmatchcase(run.name or run.run_id, self.name):
            return False
        return self.since is None or run.started_at >= self.since


def parse_since(text: str | None) -> float | None:
    """An ISO 8601 date or time (UTC when it names no zone), or epoch seconds."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError("since is not a date", observed=text,
                         expected="ISO 8601 (2026-03-01 or 2026-03-01T12:00:00Z) or epoch seconds") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _parse_line(line: str) -> BoxRun | None:
    parts = line.split("\t", 5)
    if len(parts) < 6 or parts[0] != "R":
        return None
    _, run_id, engine, started, name, state = parts
    try:
        started_at = float(started)
    except ValueError:
        started_at = 0.0
    return BoxRun(run_id=run_id, engine=engine or DEFAULT_ENGINE, started_at=started_at, name=name or None,
                  state=StateLine.parse(state).to_state())


def scan_script(spec: HostSpec) -> str:
    """The script that lists every run dir under the durable root with its state (last in a
    script it ends, so another script may run before it in the same round trip)."""
    return scripts.command_words("job_list_runs", path_word(runs_dir_path(spec.durable_root), "durable root"))


async def scanned_runs(host: Host, spec: HostSpec, listing: str) -> list[BoxRun]:
    """The runs `scan_script` printed, with the state of engines that keep their own (one round
    trip per such engine with unended runs)."""
    runs = [r for r in map(_parse_line, listing.splitlines()) if r is not None]
    patrols = dict(_patrol_line(line) for line in listing.splitlines() if line.startswith("P\t"))
    runs = [replace(r, patrol_escalations=patrols[r.run_id][0], patrol_last=patrols[r.run_id][1])
            if r.run_id in patrols else r for r in runs]
    return await _engine_states(host, spec, runs)


def _patrol_line(line: str) -> tuple[str, tuple[int, str | None]]:
    """`P<TAB>run id<TAB>escalations<TAB>last line` (box text: cleaned, cut short)."""
    _, run_id, count, last = (line.split("\t", 3) + ["", "", ""])[:4]
    return run_id, (int(count) if count.isdigit() else 0, untrusted.clean(last)[:500] or None)


async def scan_runs(host: Host, spec: HostSpec) -> list[BoxRun]:
    """Every run dir under the durable root with its state: one round trip (plus one per engine
    with its own notion of state and unended runs)."""
    res = await host.run(scan_script(spec), timeout=30)
    res.check("listing runs")
    return await scanned_runs(host, spec, res.text)


# Statuses the run dir proves by itself (an exit file or a cancel record).
RECORDED = ("succeeded", "failed", "sync_failed", "cancelled")


async def _engine_states(host: Host, spec: HostSpec, runs: list[BoxRun]) -> list[BoxRun]:
    out = list(runs)
    for name in {r.engine for r in runs if own_state(r.engine)}:
        # The run dir's own reading says only whether the wrapper recorded an end; a run with no
        # exit file reads lost there (no local process) whatever its queue says: ask the engine.
        idx = [i for i, r in enumerate(runs) if r.engine == name and r.state.status not in RECORDED]
        if idx:
            states = await ENGINES[name].status(host, [run_dir_path(spec.durable_root, runs[i].run_id) for i in idx])
            for i, st in zip(idx, states, strict=True):
                out[i] = replace(runs[i], state=st)
    return out


def _key(run: BoxRun) -> tuple[float, str]:
    return run.started_at, run.run_id


def encode_cursor(run: BoxRun) -> str:
    return base64.urlsafe_b64encode(json.dumps([run.started_at, run.run_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        started, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return float(started), str(run_id)
    except (ValueError, TypeError, binascii.Error):
        raise InputError("cursor is not one list_runs returned", observed=cursor[:80],
                         next_step="pass next_cursor from the previous list_runs page, or omit it for page 1") from None


def page(runs: Sequence[BoxRun], limit: int | None, cursor: str | None) -> tuple[list[BoxRun], str | None]:
    """Newest first by start time (then run id); the runs after `cursor`, at most `limit`."""
    ordered = sorted(runs, key=_key, reverse=True)
    if cursor:
        after = decode_cursor(cursor)
        ordered = [r for r in ordered if _key(r) < after]
    if limit is None or len(ordered) <= limit:
        return ordered, None
    shown = ordered[:limit]
    return shown, encode_cursor(shown[-1])


async def read_records(host: Host, spec: HostSpec, run_ids: Sequence[str]) -> dict[str, RunRecordSummary]:
    """run.json of the given runs, in one round trip."""
    if not run_ids:
        return {}
    runs_dir = path_word(runs_dir_path(spec.durable_root), "durable root")
    res = await host.run(scripts.command_words("job_list_records", runs_dir, *map(quote, run_ids)), timeout=30)
    res.check("reading run records")
    out = {}
    for line in res.text.splitlines():
        run_id, tab, text = line.partition("\t")
        if tab:
            out[run_id] = RunRecordSummary.from_json(text)
    return out
