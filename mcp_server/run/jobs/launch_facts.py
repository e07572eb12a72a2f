"""What a launch must know of the box before it writes anything: the durable root's and the
workdir's physical paths, who and what the box is, its tools, the disk's free bytes and inodes,
and the code's state (a push_code snapshot's provenance or the workdir's git).

Read by one round trip (scripts/job_launch_facts.sh), then remembered per host and place for
FACTS_TTL_S: a later launch there sends only its start, which checks what could have changed
(the workdir still resolves to the same path, else the facts are read again), re-runs the disk
gate and fills in the git state itself (scripts/job_launch_start.sh). Over a link with real
latency that is the difference between one round trip and two."""

from __future__ import annotations

import time
import weakref

from mcp_server import scripts
from mcp_server.errors import GateRefused, InputError, NotFoundError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.launch_request import LaunchRequest
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.status import STATE_FUNCS

FACTS_TTL_S = 600.0
# Facts a start re-reads itself, or that belong to one name: never remembered.
_PER_LAUNCH = ("bytes", "inodes", "existing", "existing_state", "git_commit", "git_dirty")
_remembered: weakref.WeakKeyDictionary[Host, dict[tuple[str, str], tuple[float, dict[str, str]]]] = (
    weakref.WeakKeyDictionary())


def code_workdir(spec: HostSpec, req: LaunchRequest) -> str | None:
    """The snapshot dir `code` names (<durable_root>/code/<project>/<id>); None without `code`."""
    if not req.code:
        return None
    if req.workdir:
        raise InputError("give code or workdir, not both: a snapshot is the run's workdir")
    return f"{spec.durable_root.rstrip('/')}/code/{req.code}"


def asked_workdir(spec: HostSpec, req: LaunchRequest) -> str:
    """The workdir as the launch names it: a snapshot's dir, the given path, else the durable root."""
    return code_workdir(spec, req) or req.workdir or spec.durable_root


def _place(spec: HostSpec, req: LaunchRequest) -> tuple[str, str]:
    return spec.durable_root, asked_workdir(spec, req)


def disk_gate(spec: HostSpec, facts: dict[str, str], req: LaunchRequest) -> None:
    """Refuse a launch whose durable root is below the floors (`bytes=`/`inodes=` in df's columns)."""
    b, i = facts.get("bytes", "").split(), facts.get("inodes", "").split()
    problems = []
    if len(b) >= 4 and b[3].isdigit():
        free = int(b[3]) * 1024
        if free < req.min_free_gib * 2**30:
            problems.append(f"{free / 2**30:.1f} GiB free < floor {req.min_free_gib:g} GiB")
    if len(i) >= 4 and i[3].isdigit() and i[1].isdigit() and int(i[1]) > 0 and int(i[3]) < req.min_free_inodes:
        problems.append(f"{i[3]} inodes free < floor {req.min_free_inodes}")
    if problems:
        raise GateRefused(
            "disk gate: the durable root is below the launch floor; nothing was started",
            host=spec.name, path=spec.durable_root, observed="; ".join(problems),
            next_step="free space or inodes (prune latest/periodic checkpoints, per-sample files) or expand the disk; "
            "lower min_free_gib/min_free_inodes only if you know the job writes little",
        )


def gate_floors(req: LaunchRequest) -> tuple[str, str]:
    """The floors as the start checks them: KiB rounded down (the box refuses only what disk_gate
    refuses too) and inodes."""
    return str(int(req.min_free_gib * 2**20)), str(req.min_free_inodes)


async def read_facts(host: Host, spec: HostSpec, req: LaunchRequest) -> dict[str, str]:
    """Round trip 1: read-only facts; the disk gate refuses before anything is written."""
    workdir = asked_workdir(spec, req)
    script = job_script("job_launch_facts", path_word(spec.durable_root, "durable root"),
                        path_word(workdir, "workdir"), quote(req.name or ""),
                        libraries=(STATE_FUNCS, scripts.load("job_launch_lib")))
    res = await host.run(script, timeout=20)
    res.check("reading launch facts", next_step="check the durable root is writable")
    facts = parse_kv(res.text)
    if "workdir" not in facts and req.code:
        raise NotFoundError(f"no snapshot {req.code} on the box", host=spec.name, path=workdir,
                            next_step="push_code first (its result names project and snapshot_id)")
    if "workdir" not in facts:
        raise InputError("workdir does not exist on the box", host=spec.name, path=workdir,
                         next_step="create it or push the code first; give an absolute path or ~/...")
    disk_gate(spec, facts, req)
    return facts


def remembered(host: Host, spec: HostSpec, req: LaunchRequest) -> dict[str, str] | None:
    """The facts of an earlier launch in the same place on this host, while they are fresh."""
    entry = _remembered.get(host, {}).get(_place(spec, req))
    if entry is None or time.monotonic() - entry[0] > FACTS_TTL_S:
        return None
    return dict(entry[1])


def remember(host: Host, spec: HostSpec, req: LaunchRequest, facts: dict[str, str]) -> None:
    kept = {k: v for k, v in facts.items() if k not in _PER_LAUNCH}
    _remembered.setdefault(host, {})[_place(spec, req)] = (time.monotonic(), kept)


def forget(host: Host, spec: HostSpec, req: LaunchRequest) -> None:
    _remembered.get(host, {}).pop(_place(spec, req), None)
