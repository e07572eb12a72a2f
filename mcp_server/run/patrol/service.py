"""launch_detached's `watch`, its domain side: ship the on-box files, start a patrol as a detached
run under the launch wrapper (so it outlives SSH and the server; list_runs shows it, cancel_run
stops it), and send a test message through the channels.
Notification secrets reach the box only as the launch's secret_env (stdin), never argv or files."""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json

from pydantic import BaseModel, Field

from mcp_server import untrusted
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import check_name, path_word, quote
from mcp_server.hosts.files import write_file
from mcp_server.hosts.notify_channels import Channel, box_channels
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.launch import LaunchRequest, LaunchResult, launch
from mcp_server.run.jobs.logs import tail_logs
from mcp_server.run.jobs.rundir import check_run_id, run_dir_path
from mcp_server.run.jobs.signatures import SIGNATURES
from mcp_server.run.jobs.wait import wait_for_run
from mcp_server.run.patrol import notify_onbox, patrol_onbox

BOX_FILES = patrol_onbox.FILES + notify_onbox.FILES
LOGIN_NODE_REASON = "the patrol only reads run dirs and sends messages: it belongs beside the runs it watches"


class PatrolOptions(BaseModel):
    run_ids: list[str] = Field(default_factory=list, description="runs to watch; none: the whole box")
    interval_s: float = 600.0
    stall_s: float = 1800.0
    idle_s: float | None = None
    lifetime_s: float = 7 * 86400.0
    channels: list[str] | None = None
    disk_pct: float = 95.0
    mem_pct: float = 90.0


def _code() -> dict[str, bytes]:
    pkg = importlib.resources.files("mcp_server.run.patrol")
    return {name: pkg.joinpath(name).read_bytes() for name in BOX_FILES}


async def ship(host: Host, spec: HostSpec) -> str:
    """The on-box files in a folder named by their hash: written once, then found (one stat)."""
    code = _code()
    digest = hashlib.sha256(b"".join(hashlib.sha256(code[n]).digest() for n in BOX_FILES)).hexdigest()[:16]
    folder = f"{spec.durable_root}/.rgt/patrol/code-{digest}"
    if await host.stat(f"{folder}/{BOX_FILES[-1]}") is None:
        for name in BOX_FILES:
            await write_file(host, f"{folder}/{name}", code[name])
    return folder


def chosen(channels: list[Channel], names: list[str] | None) -> list[Channel]:
    if names is None:
        return channels
    known = {c.name for c in channels}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"no [notify.{unknown[0]}] channel in the inventory", expected=sorted(known) or "none",
                         next_step="add the channel to the inventory, or leave channels out to use them all")
    return [c for c in channels if c.name in names]


def patrol_name(run_ids: list[str]) -> str:
    if not run_ids:
        return "patrol-box"
    # a run id ends in its own random part: the patrol's name repeats only that (its run id adds a date)
    tail = run_ids[0].rsplit("-", 1)[-1] if len(run_ids) == 1 else ""
    if len(tail) >= 6 and all(c in "0123456789abcdef" for c in tail):
        return check_name(f"patrol-{tail}", "patrol name")
    return "patrol-" + hashlib.sha256(" ".join(sorted(run_ids)).encode()).hexdigest()[:12]


def _python(path: str) -> str:
    return f'exec "$(command -v python3 || command -v python)" {path_word(path, "patrol")}'


async def start(host: Host, spec: HostSpec, opts: PatrolOptions, channels: list[Channel], *,
                ledger: Ledger | None, redactor: Redactor) -> LaunchResult:
    for r in opts.run_ids:
        check_run_id(r)
    folder = await ship(host, spec)
    box, secret_names = box_channels(chosen(channels, opts.channels))
    name = patrol_name(opts.run_ids)
    idle = opts.idle_s if opts.idle_s is not None else (1800.0 if spec.hourly_price and not opts.run_ids else None)
    config = {"host": spec.name, "durable_root": spec.durable_root, "interval_s": opts.interval_s,
              "runs": [run_dir_path(spec.durable_root, r) for r in opts.run_ids], "stall_s": opts.stall_s,
              "idle_s": idle, "price_per_hour": spec.hourly_price, "lifetime_s": opts.lifetime_s,
              "disk_pct": opts.disk_pct, "mem_pct": opts.mem_pct, "channels": box,
              "signatures": [[s.id, s.pattern.pattern, s.meaning] for s in SIGNATURES],
              "state_dir": f"{spec.durable_root}/.rgt/patrol/state-{name}"}
    slurm = spec.profile.kind == "slurm"
    return await launch(host, spec, LaunchRequest(
        command=_python(f"{folder}/patrol_onbox.py"), name=name, backend="shell",
        login_node_reason=LOGIN_NODE_REASON if slurm else None, secret_env=secret_names, probe_s=0,
        env={"RGT_PATROL_SPEC": base64.b64encode(json.dumps(config).encode()).decode()},
        min_free_gib=0, min_free_inodes=0), ledger=ledger, redactor=redactor)


async def test(host: Host, spec: HostSpec, channels: list[Channel], names: list[str] | None, *,
               ledger: Ledger | None, redactor: Redactor, wait_s: float = 25.0) -> list[str]:
    """One test message per channel, sent from the box (its route to the services, not ours)."""
    selected = chosen(channels, names)
    if not selected:
        raise InputError("no [notify.<name>] channel in the inventory to test",
                         next_step="add one (README: When nobody is watching), then test it")
    folder = await ship(host, spec)
    box, secret_names = box_channels(selected)
    listing = json.dumps(box).encode()
    path = f"{folder}/test-{hashlib.sha256(listing).hexdigest()[:16]}.json"
    await write_file(host, path, listing)  # channel settings and secret NAMES only
    state = f"{spec.durable_root}/.rgt/patrol/state-test"
    run = await launch(host, spec, LaunchRequest(
        command=f"{_python(folder + '/notify_onbox.py')} test --state-dir {path_word(state, 'state')} "
                f"--host {quote(spec.name)} < {path_word(path, 'channels')}",
        backend="shell", login_node_reason=LOGIN_NODE_REASON if spec.profile.kind == "slurm" else None,
        secret_env=secret_names, probe_s=0, min_free_gib=0, min_free_inodes=0), ledger=ledger, redactor=redactor)
    waited = await wait_for_run(host, spec, run.run_id, redactor=redactor, timeout_s=wait_s, poll_s=0.5)
    if not waited.ended:
        return [f"the test run {run.run_id} is still running after {wait_s:g} s: tail_logs shows its outcome"]
    tail = await tail_logs(host, spec, redactor=redactor, run_id=run.run_id, max_bytes=65536)
    return _outcomes(tail.text)


def _outcomes(log: str) -> list[str]:
    out = []
    for line in log.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if isinstance(o, dict) and "channel" in o:
            err = f" ({untrusted.clean(str(o['error']))[:200]})" if o.get("error") else ""
            out.append(f"{untrusted.clean(str(o['channel']))[:64]}: {untrusted.clean(str(o.get('status')))[:20]}{err}")
    return out
