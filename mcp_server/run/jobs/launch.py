"""launch_detached: start a job that outlives the SSH connection, the server and the client.

(1) Read-only facts (paths, disk, git, tools, an existing run of that name), remembered per host
and place for later launches (launch_facts.py); (2) under an on-box lock: create the run dir,
submit it to the engine, probe it for up to `probe_s`, and report (launch_start.py). A launch in
a place whose facts are remembered is the second round trip alone. Secrets travel on stdin only."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_server import __version__
from mcp_server.errors import GateRefused, InputError, RgtError, TransportError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import check_env_name, check_name, check_path
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.progress import Report, ticking
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.engines.base import JobEngine
from mcp_server.run.jobs.engines.slurm import submit_refusal
from mcp_server.run.jobs.launch_facts import disk_gate, forget, read_facts, remember, remembered
from mcp_server.run.jobs.launch_request import MAX_PROBE_S as MAX_PROBE_S  # re-exported: callers import it here
from mcp_server.run.jobs.launch_request import LaunchRequest as LaunchRequest  # re-exported, as above
from mcp_server.run.jobs.launch_start import start_script, with_box_git
from mcp_server.run.jobs.rundir import Backend, RunOutputs, RunRecord, new_run_id, run_dir_path, work_dir_path
from mcp_server.run.jobs.signatures import SignatureHit, progress_hint, scan
from mcp_server.run.jobs.status import FINISHED, LIVE, RunState, parse_state
from mcp_server.run.jobs.sync import check_sync_patterns, run_sync
from mcp_server.run.jobs.wrapper import secrets_payload
from mcp_server.verify.artifacts.roster import check_pattern

ENV_STRING_MAX = 128 * 1024  # Linux's MAX_ARG_STRLEN: one "NAME=value" string past it and exec fails
ENV_TOTAL_MAX = 1024 * 1024

Outcome = Literal["running", "exited_early", "already_running", "already_finished", "queued"]


class LaunchResult(BaseModel):
    host: str
    run_id: str
    name: str | None
    outcome: Outcome
    backend: str
    run_dir: str
    log_path: str
    output_dir: str | None = Field(default=None, description="where the run writes by relative path: a code "
                                   "snapshot run's own work dir (the snapshot stays sealed), else the workdir")
    state: RunState
    log_tail: str = Field(description="last lines of the log (secret values redacted)")
    signatures: list[SignatureHit]
    progress: str | None = None
    notes: list[str] = Field(default_factory=list)
    tmux_session: str | None = None


def check_request(req: LaunchRequest) -> None:
    """Every name, path and pattern in the request, before anything touches the box."""
    if req.name:
        check_name(req.name, "run name")
    for p in req.outputs:
        check_pattern(p)
    check_sync_patterns(req.sync_to_durable)
    if req.output_root:
        check_path(req.output_root, "output_root")
    for k, v in req.env.items():
        check_env_name(k)
        if len(f"{k}={v}".encode()) >= ENV_STRING_MAX:
            raise InputError(f"env {k} is {len(v.encode()) // 1024} KiB: Linux refuses to start any program with "
                             "one environment string of 128 KiB or more (E2BIG), so the job could not run",
                             next_step="put the value in a file under the durable root and pass its path")
    if sum(len(k) + len(v) + 2 for k, v in req.env.items()) > ENV_TOTAL_MAX:
        raise InputError("the env values add up to more than 1 MiB: with the job's own environment and arguments "
                         "that nears the kernel's limit for starting a program",
                         next_step="put large values in files and pass their paths")


def secret_values(names: list[str], environ: dict[str, str] | os._Environ[str], redactor: Redactor) -> dict[str, str]:
    out = {}
    for n in names:
        check_env_name(n)
        if n not in environ:
            raise InputError(
                f"secret_env names {n}, which is not set in the server's environment",
                expected="a variable the MCP server process can read",
                next_step="MCP clients start servers with a minimal environment: add it under `env` in the "
                "client config (the value never travels in a tool argument)",
            )
        out[n] = environ[n]
        redactor.add(environ[n])
    return out


def _on_login_node(spec: HostSpec, req: LaunchRequest, backend: Backend) -> None:
    """Training on a cluster's login node breaks its rules and slows everyone: only Slurm, unless
    the caller says why a small job must run there."""
    if spec.profile.kind == "slurm" and backend != "slurm" and not req.login_node_reason:
        raise InputError(f"{spec.name} is a Slurm login node: a {backend} job would run on the login node itself",
                         observed=f"backend={backend}", expected="backend slurm (the default here)",
                         next_step="submit through Slurm (omit backend), or pass login_node_reason to run a small "
                                   "job (an install, a data check) on the login node on purpose")


def choose_backend(req: LaunchRequest, facts: dict[str, str], spec: HostSpec) -> tuple[Backend, list[str]]:
    backend: Backend = req.backend or ("slurm" if spec.profile.kind == "slurm" else "shell")
    _on_login_node(spec, req, backend)
    req = req.model_copy(update={"backend": backend})
    if not facts.get("setsid"):
        raise RgtError("setsid is not available on the box: a detached launch is not possible",
                       next_step="install util-linux (setsid) on the box")
    if req.backend == "tmux" and not facts.get("tmux"):
        if not req.allow_fallback:
            raise InputError("tmux is not installed on the box", observed="backend=tmux",
                             next_step="install tmux (apt-get install -y tmux), or call again with allow_fallback=true "
                             "to use the shell backend (setsid; same run dir and exit-code contract)")
        return "shell", ["tmux is missing: fell back to the shell backend (setsid) as allowed"]
    if req.backend == "slurm" and not facts.get("sbatch"):
        raise InputError("sbatch is not on this host's PATH: it is not a Slurm login node", observed="backend=slurm",
                         next_step="launch from the cluster's login node (its SSH alias), or use backend shell/tmux")
    return backend, [f"on the login node, as asked: {req.login_node_reason}"] if req.login_node_reason else []


def run_cwd(facts: dict[str, str], run_id: str) -> str:
    """Where the command starts. A push_code snapshot is sealed: a run in one (a sweep's cell too)
    works in its own <run dir>/work, the snapshot's entries linked in, so what it writes lands
    there; any other workdir is the working directory itself."""
    if facts.get("snapshot"):
        return work_dir_path(f"{facts['base']}/runs/{run_id}")
    return facts["workdir"]


def make_record(spec: HostSpec, req: LaunchRequest, facts: dict[str, str], run_id: str, backend: Backend,
                secret_names: list[str], command: str, queue_id: str | None = None) -> RunRecord:
    now = time.time()
    cwd = run_cwd(facts, run_id)
    root = req.output_root or cwd
    return RunRecord(
        run_id=run_id, name=req.name if queue_id is None else None, host=spec.name, backend=backend,
        command=command, workdir=facts["workdir"], output_dir=cwd, env=req.env, secret_env_names=sorted(secret_names),
        started_at=now, started_at_utc=datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        user=facts.get("user"), **_git_facts(facts),
        host_facts={k: facts[k] for k in ("hostname", "uname", "gpus") if k in facts},
        queue_id=queue_id, server_version=__version__, rerun_of=req.rerun_of,
        outputs=RunOutputs(root=root, patterns=req.outputs) if req.outputs else None,
        sync=run_sync(root, req.sync_to_durable, facts["durable"], run_id),
    )


def _git_facts(facts: dict[str, str]) -> dict[str, Any]:
    """The code the run runs: a push_code snapshot's recorded provenance, else the workdir's git."""
    if facts.get("snapshot"):
        try:
            prov = json.loads(base64.b64decode(facts.get("snapshot_provenance", "")))
        except (ValueError, TypeError):
            prov = {}
        prov = prov if isinstance(prov, dict) else {}
        return {"code_snapshot": facts["snapshot"], "git_commit": prov.get("git_commit"),
                "git_dirty": prov.get("git_dirty"), "git_branch": prov.get("git_branch")}
    return {"git_commit": facts.get("git_commit") or None,
            "git_dirty": (facts["git_dirty"].strip() not in ("", "0")) if "git_dirty" in facts else None}


def _existing_result(spec: HostSpec, engine: JobEngine, base: str, run_id: str, name: str | None,
                     outcome: Outcome, state: RunState, notes: list[str]) -> LaunchResult:
    run_dir = f"{base}/runs/{run_id}"
    note = ("a run with this name is live: no second job was started" if outcome == "already_running"
            else "this name's last run has finished: pass relaunch=true to start it again")
    return LaunchResult(host=spec.name, run_id=run_id, name=name, outcome=outcome, backend=engine.name,
                        run_dir=run_dir, log_path=engine.log_path(run_dir), state=state, log_tail="",
                        signatures=[], notes=[*notes, note])


def refuse_unwritten(spec: HostSpec, text: str) -> None:
    """A run dir whose files could not all be written was removed by the box, and its job never
    started: say so, never report it running."""
    failed = next((ln for ln in text.splitlines() if ln.startswith("RGT-WRITE-FAILED")), None)
    if failed:
        raise GateRefused("the run's files could not be written on the box: nothing was started and nothing "
                          "was left behind", host=spec.name, path=failed.removeprefix("RGT-WRITE-FAILED").strip(),
                          observed="a write into the durable root failed (full disk or inode table, or no permission)",
                          next_step="free space or inodes on the durable root (audit_box A10/A11 show them), "
                                    "then launch again")


def _parse_start(spec: HostSpec, engine: JobEngine, record: RunRecord, req: LaunchRequest, base: str, text: str,
                 redactor: Redactor, notes: list[str]) -> LaunchResult:
    refuse_unwritten(spec, text)
    run_id = record.run_id
    head, _, log = text.partition("RGT-LOG\n")
    lines = head.splitlines()
    first = next((ln for ln in lines if ln.startswith(("RGT-EXISTING", "RGT-FINISHED"))), "")
    state = parse_state(next((ln.partition("=")[2] for ln in lines if ln.startswith("state=")), ""))
    if first.startswith(("RGT-EXISTING", "RGT-FINISHED")):
        outcome: Outcome = "already_running" if first.startswith("RGT-EXISTING") else "already_finished"
        return _existing_result(spec, engine, base, first.split()[1], req.name, outcome, state, notes)
    refused = next((ln for ln in lines if ln.startswith("RGT-SUBMIT-FAILED sbatch: ")), None)
    if refused:
        raise submit_refusal(spec.name, redactor.scrub(refused.removeprefix("RGT-SUBMIT-FAILED sbatch: ")))
    if not any(line.startswith("RGT-STARTED") for line in lines):
        raise RgtError("the launch did not start", host=spec.name, observed=redactor.scrub(head[-500:]),
                       next_step="read the message; check the durable root and the backend")
    job_id = next((ln.partition("=")[2] for ln in lines if ln.startswith("job_id=")), "")
    if engine.name == "slurm":  # accepted by sbatch: in the queue until Slurm starts it on a compute node
        state = RunState(status="queued", evidence=[f"Slurm job {job_id} submitted (sbatch accepted it): squeue "
                                                    "says where it stands; tail_logs follows it"])
    elif state.status == "lost" and state.pid is None:
        state = RunState(status="running", evidence=["starting: the wrapper has not recorded its pid yet"],
                         log_size=state.log_size, log_mtime=state.log_mtime)
    tail = redactor.scrub(log)
    run_dir = f"{base}/runs/{run_id}"
    return LaunchResult(
        host=spec.name, run_id=run_id, name=req.name, backend=engine.name, run_dir=run_dir,
        outcome="exited_early" if state.status in FINISHED else "queued" if state.status == "queued" else "running",
        output_dir=record.output_dir,
        log_path=engine.log_path(run_dir), state=state, log_tail="\n".join(tail.splitlines()[-40:]),
        signatures=scan(tail), progress=progress_hint(tail), notes=notes, tmux_session=engine.job_name(run_id),
    )


def _record_begun(ledger: Ledger, spec: HostSpec, req: LaunchRequest, record: RunRecord) -> None:
    ledger.record("launch_begun", host=spec.name, run_id=record.run_id, summary=f"starting {req.name or ''}".strip(),
                  data={"name": req.name, "backend": record.backend, "command": req.command,
                        "run_dir": run_dir_path(spec.durable_root, record.run_id), "durable_root": spec.durable_root})


def _record_launch(ledger: Ledger, spec: HostSpec, req: LaunchRequest, record: RunRecord,
                   result: LaunchResult) -> None:
    ledger.record("launch", host=spec.name, run_id=record.run_id,
                  summary=f"{result.outcome} {req.name or ''}".strip(),
                  data={"name": req.name, "backend": record.backend, "command": req.command, "workdir": record.workdir,
                        "secret_env_names": record.secret_env_names, "run_dir": result.run_dir,
                        "durable_root": spec.durable_root, "status": result.state.status,
                        "exit_code": result.state.exit_code,
                        "outputs": record.outputs.model_dump() if record.outputs else None,
                        "sync": record.sync.model_dump() if record.sync else None,
                        "code_snapshot": record.code_snapshot, "output_dir": record.output_dir,
                        "git_commit": record.git_commit, "git_dirty": record.git_dirty,
                        "host_facts": record.host_facts, "rerun_of": record.rerun_of})


@contextlib.asynccontextmanager
async def outcome_unknown(spec: HostSpec, what: str) -> AsyncIterator[None]:
    """The start's round trip writes on the box: a connection lost during it leaves the outcome
    unknown (the job may have started), and a blind retry could start a second job."""
    try:
        yield
    except TransportError as exc:
        raise TransportError(f"the connection was lost while starting {what}: the outcome is unknown, it may "
                             "have started", host=spec.name, observed=exc.observed,
                             next_step=f"check list_runs on {spec.name} for {what} before launching again; a "
                                       "named launch returns the live run instead of starting a second") from exc


def _tools_missing(req: LaunchRequest, spec: HostSpec, facts: dict[str, str]) -> bool:
    """Whether the facts lack a tool the launch's backend needs (setsid, tmux, sbatch)."""
    backend = req.backend or ("slurm" if spec.profile.kind == "slurm" else "shell")
    need = ["setsid", *(["tmux"] if backend == "tmux" else []), *(["sbatch"] if backend == "slurm" else [])]
    return any(not facts.get(tool) for tool in need)


def _name_taken(spec: HostSpec, engine: JobEngine, req: LaunchRequest, facts: dict[str, str],
                notes: list[str]) -> LaunchResult | None:
    """The run the name already has, when the facts say it is live or finished without relaunch."""
    if not (req.name and "existing" in facts):
        return None
    existing = parse_state(facts.get("existing_state", ""))
    live = existing.status in LIVE
    if not live and req.relaunch:
        return None
    return _existing_result(spec, engine, facts["base"], facts["existing"], req.name,
                            "already_running" if live else "already_finished", existing, notes)


async def launch(host: Host, spec: HostSpec, req: LaunchRequest, *, ledger: Ledger | None,
                 redactor: Redactor, environ: dict[str, str] | None = None,
                 progress: Report | None = None) -> LaunchResult:
    """Start one detached job (or return the live one of the same name). `progress` hears the
    run id first, then the probe's elapsed seconds. One round trip where this host's facts for
    the place are remembered (launch_facts.py), two otherwise."""
    check_request(req)
    secrets = secret_values(req.secret_env, os.environ if environ is None else environ, redactor)
    run_id, facts = new_run_id(req.name), remembered(host, spec, req)
    while True:
        assumed = facts is not None
        if facts is None:
            facts = await read_facts(host, spec, req)
            remember(host, spec, req, facts)
        if assumed and _tools_missing(req, spec, facts):  # then: it may have been installed since
            forget(host, spec, req)
            facts = None
            continue
        backend, notes = choose_backend(req, facts, spec)
        engine = ENGINES[backend]
        if not assumed and (taken := _name_taken(spec, engine, req, facts, notes)):
            return taken
        record = make_record(spec, req, facts, run_id, backend, list(secrets), req.command)
        text = await _start(host, spec, req, engine, record, facts["base"], assumed, secrets, ledger, progress)
        if assumed and text.startswith("RGT-FACTS-CHANGED"):
            forget(host, spec, req)
            facts = None
            continue
        if text.startswith("RGT-DISK-GATE"):
            disk_gate(spec, parse_kv(text), req)
        record = with_box_git(record, text)
        result = _parse_start(spec, engine, record, req, facts["base"], text, redactor, notes)
        if ledger is not None and result.outcome in ("running", "queued", "exited_early"):
            _record_launch(ledger, spec, req, record, result)
        return result


async def _start(host: Host, spec: HostSpec, req: LaunchRequest, engine: JobEngine, record: RunRecord, base: str,
                 assumed: bool, secrets: dict[str, str], ledger: Ledger | None, progress: Report | None) -> str:
    """The start's round trip: its output, the first line saying when the box refused to begin."""
    script = start_script(spec, req, engine, record, base, assumed)
    if ledger is not None:  # before the probe: a client that gives up during it can still find the run
        _record_begun(ledger, spec, req, record)
    async with (ticking(progress, req.probe_s, f"starting run {record.run_id}; probing up to {req.probe_s:g} s"),
                outcome_unknown(spec, f"run {record.run_id}")):
        res = await host.run(script, stdin=secrets_payload(secrets), timeout=req.probe_s + 20, slow=req.probe_s > 1)
    return _refusal_first(res.text)


def _refusal_first(text: str) -> str:
    """The start's output with a refusal to begin (remembered facts that changed, the disk gate)
    moved to the first line, where launch() looks for it."""
    lines = text.partition("RGT-LOG\n")[0].splitlines()
    refusal = next((ln for ln in lines if ln in ("RGT-FACTS-CHANGED", "RGT-DISK-GATE")), None)
    return f"{refusal}\n{text}" if refusal else text
