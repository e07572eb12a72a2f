"""preflight's two calls: start the drill as a detached run (the launch wrapper, like any run),
and read its record back into a verdict. Starting costs two round trips (the drill file, the
launch); a report one for the record and outputs, then one per checkpoint file it checks."""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json
import secrets as _secrets
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from mcp_server import untrusted
from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.files import list_files, read_bytes, write_file
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.limits import COMMAND_MAX
from mcp_server.paths.policy import anywhere, check_paths, confine
from mcp_server.paths.refusal import PathRefused
from mcp_server.redact import Redactor
from mcp_server.run.jobs.launch import LaunchRequest, LaunchResult, launch
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.rundir import check_run_id, run_dir_path
from mcp_server.run.jobs.sections import split_sections
from mcp_server.run.jobs.status import RunState, parse_state
from mcp_server.run.preflight import hints
from mcp_server.run.preflight.budget import Target, budget
from mcp_server.run.preflight.judge import Drill, judge, seconds_per_step
from mcp_server.run.preflight.models import Budget, Finding, PreflightResult, Stage, stage, verdict_of, why_of
from mcp_server.run.preflight.series import AttemptOutput, line_times, points_of
from mcp_server.run.preflight.timeline import Event, events_of, present_at
from mcp_server.verify.artifacts.checks import FileVerdict, check_file
from mcp_server.verify.artifacts.roster import check_pattern

FILE_WINDOW = 8 * 1024 * 1024  # bytes of each drill file read back
CHECK_MAX = 256 * 1024 * 1024  # checkpoint bytes pulled for the content check, all files together
# What a CPU smoke sets unless the request's env says otherwise: no GPU, no tracker, unbuffered output.
CPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}
TRACKER_OFF_ENV = {"WANDB_MODE": "disabled", "WANDB_DISABLED": "true", "NEPTUNE_MODE": "debug",
                   "CLEARML_OFFLINE_MODE": "1", "DISABLE_MLFLOW_INTEGRATION": "TRUE", "COMET_MODE": "disabled"}


class PreflightRequest(BaseModel):
    command: str = Field(min_length=1, max_length=COMMAND_MAX)
    workdir: str | None = None
    code: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list)
    steps: int = Field(default=5, ge=1, le=100_000)
    checkpoints: list[str] = Field(default_factory=list)
    metric: str | None = None
    planned_steps: float | None = Field(default=None, gt=0)
    budget_host: str | None = None
    budget_gib: float | None = Field(default=None, gt=0)
    signal: str = "TERM"
    grace_s: float = Field(default=10.0, ge=0.5, le=120)
    attempt_s: float = Field(default=120.0, ge=5, le=1800)


def drill_source() -> bytes:
    return importlib.resources.files("mcp_server.run.preflight").joinpath("drill_onbox.py").read_bytes()


def drill_spec(req: PreflightRequest) -> dict[str, Any]:
    env = {"PYTHONUNBUFFERED": "1", **CPU_ENV, **TRACKER_OFF_ENV, **req.env}
    return {"command": req.command, "env": env, "checkpoints": req.checkpoints, "signal": req.signal,
            "grace_s": req.grace_s, "attempt_s": req.attempt_s, "steps": req.steps, "metric": req.metric,
            "planned_steps": req.planned_steps, "budget_host": req.budget_host, "budget_gib": req.budget_gib,
            "total_s": 4 * (req.attempt_s + 2 * req.grace_s) + 30}


def recorded(record: dict[str, Any]) -> PreflightRequest:
    """The request a drill ran with, from its record; defaults where the record is damaged."""
    raw = record.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    try:
        return PreflightRequest.model_validate({k: v for k, v in spec.items() if k in PreflightRequest.model_fields
                                                and k not in ("env", "secret_env")})
    except ValueError:
        return PreflightRequest(command="?")


async def start(host: Host, spec: HostSpec, req: PreflightRequest, *, ledger: Ledger | None,
                redactor: Redactor) -> LaunchResult:
    for p in req.checkpoints:
        check_pattern(p)
    if req.workdir:  # the drill's checkpoints there are read back for their content check
        req = req.model_copy(update={"workdir": await confine(
            host, "read", req.workdir, anywhere(host, "the folders preflight may read"), what="workdir",
            done="nothing was started")})
    source = drill_source()
    path = f"{spec.durable_root}/.rgt/preflight/drill-{hashlib.sha256(source).hexdigest()[:16]}.py"
    await write_file(host, path, source)
    spec_b64 = base64.b64encode(json.dumps(drill_spec(req)).encode()).decode()
    command = f'exec "$(command -v python3 || command -v python)" {path_word(path, "drill")}'
    return await launch(host, spec, LaunchRequest(
        command=command, workdir=req.workdir, code=req.code, env={"RGT_PREFLIGHT_SPEC": spec_b64},
        secret_env=req.secret_env, probe_s=0, min_free_gib=0, min_free_inodes=0), ledger=ledger, redactor=redactor)


def _output(n: int, files: dict[str, bytes], attempt: dict[str, Any]) -> AttemptOutput:
    raw_out = files.get(f"a{n}.out", b"").decode("utf-8", "replace")
    raw_err = files.get(f"a{n}.err", b"").decode("utf-8", "replace")
    return AttemptOutput(n=n, out=untrusted.clean(raw_out), err=untrusted.clean(raw_err),
                         out_times=line_times(raw_out, _marks(attempt, "out_lines")),
                         err_times=line_times(raw_err, _marks(attempt, "err_lines")))


def _marks(attempt: dict[str, Any], key: str) -> list[list[float]]:
    return [m for m in attempt.get(key) or [] if isinstance(m, list) and len(m) == 2]


def _safe_rel(rel: str) -> bool:
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts


async def _check(host: Host, root: str, rels: list[str], events: dict[str, Event]) -> list[FileVerdict]:
    """Pull each checkpoint (a folder's files one by one) and check its content, bounded. The
    paths come from the drill's record, which the job could have rewritten: each goes through
    the path policy before it is read."""
    out: list[FileVerdict] = []
    budget_left = CHECK_MAX
    with tempfile.TemporaryDirectory(prefix="rgt-preflight-") as tmp:
        for rel in rels:
            if not _safe_rel(rel):
                continue
            base = f"{root}/{rel}"
            ev = events.get(rel)
            listed = await list_files(host, base, "*", max_files=200) if ev and ev.is_dir else [base]
            allowed = await check_paths(host, "read", listed, anywhere(host, "the drill's checkpoints"),
                                        what="checkpoint", done="it was not checked")
            for path in listed:
                if isinstance(allowed[listed.index(path)], PathRefused):
                    continue
                sub = path[len(root) + 1:]
                try:  # read_bytes stats first and refuses what is over what is left of the budget
                    data = await read_bytes(host, path, max_bytes=budget_left)
                except (InputError, NotFoundError):
                    continue
                budget_left -= len(data)
                local = Path(tmp) / f"f{len(out)}{PurePosixPath(sub).suffix}"
                local.write_bytes(data)
                out.append(check_file(local, untrusted.clean(sub)))
    return out


async def _target(app_host: Host, spec: HostSpec, gib: float | None) -> Target:
    if gib is not None:
        return Target(what=f"the size you gave ({gib:g} GiB)", free_bytes=int(gib * 2**30), free_inodes=None)
    from mcp_server import scripts  # the on-box script loader

    res = await app_host.run(scripts.command("preflight_disk", spec.durable_root), timeout=20)
    kv = parse_kv(res.text)
    b, i = kv.get("bytes", "").split(), kv.get("inodes", "").split()
    if not res.ok or kv.get("ok") != "1" or len(b) != 2 or len(i) != 2 or not all(x.isdigit() for x in b + i):
        return Target(what=f"{spec.name}: df did not answer for {spec.durable_root}", free_bytes=None,
                      free_inodes=None)
    inodes = int(i[1]) if int(i[0]) > 0 else None  # a filesystem without inode accounting reports 0
    return Target(what=f"{spec.name}: {untrusted.clean(kv.get('at', ''))} (df now)", free_bytes=int(b[1]),
                  free_inodes=inodes)


Resolve = Callable[[str], Awaitable[tuple[Host, HostSpec]]]


def _cleaned(obj: Any) -> Any:
    """The record with every string cleaned as box text: the job may have named files, or rewritten
    the record, to put escape sequences into a finding's evidence."""
    if isinstance(obj, str):
        return untrusted.clean(obj)
    if isinstance(obj, list):
        return [_cleaned(v) for v in obj]
    if isinstance(obj, dict):
        return {untrusted.clean(str(k)): _cleaned(v) for k, v in obj.items()}
    return obj


def _drill(record: dict[str, Any], files: dict[str, bytes], req: PreflightRequest) -> Drill:
    """The record and the attempts' outputs, parsed: the series attempt 1 carries is followed in all."""
    attempts = [a for a in record.get("attempts", []) if isinstance(a, dict) and isinstance(a.get("n"), int)]
    record["attempts"] = attempts
    record["grace_s"] = req.grace_s
    outputs = {a["n"]: _output(a["n"], files, a) for a in attempts}
    if 1 in outputs:
        points_of(outputs[1], req.metric)
        for n, o in outputs.items():
            if n != 1:
                points_of(o, req.metric, outputs[1].stream, outputs[1].key)
    events = events_of(record.get("events"))
    alltext = "\n".join(o.out for o in outputs.values())
    return Drill(record=record, outputs=outputs, events=events, steps=req.steps,
                 framework=hints.detect(events, alltext, req.command))


async def _read(host: Host, spec: HostSpec, run_id: str) -> tuple[str, dict[str, bytes], RunState | None]:
    run_dir = run_dir_path(spec.durable_root, check_run_id(run_id))
    nonce = _secrets.token_hex(8)
    res = await host.run(job_script("preflight_read", path_word(run_dir, "run dir"), quote(str(FILE_WINDOW)),
                                    quote(nonce)), timeout=30, max_output=20 * FILE_WINDOW)
    if res.stdout.startswith(b"RGT-NORUN"):
        raise NotFoundError(f"no run {run_id} under this box's durable root", host=spec.name,
                            next_step="start one with preflight(command=...)")
    head, found = split_sections(res.stdout, nonce)
    files = {f.name: f.content for f in found}
    line = next((ln[6:] for ln in head.splitlines() if ln.startswith("state=")), None)
    return head, files, parse_state(line) if line else None


async def report(host: Host, spec: HostSpec, run_id: str, resolve: Resolve, *, planned_steps: float | None = None,
                 budget_host: str | None = None, budget_gib: float | None = None) -> PreflightResult:
    """The verdict on a drill (or where it stands while it runs); planned_steps and the target
    given here override what the start was given."""
    head, files, state = await _read(host, spec, run_id)
    try:
        record = _cleaned(json.loads(files.get("drill.json", b"") or b"{}"))
    except (ValueError, RecursionError):
        record = {}
    if not isinstance(record, dict) or "attempts" not in record:
        if state is not None and state.status in ("running", "queued"):
            return _running(spec, run_id, state, [])
        log = files.get("log", b"").decode("utf-8", "replace")  # a drill run that wrote no record
        if "drill=1" in head.splitlines() and state is not None:
            return not_started(spec, run_id, state, untrusted.clean(log).strip().splitlines()[-3:])
        raise InputError(f"run {run_id} is no preflight drill (it has no drill record)",
                         next_step="give the run_id preflight returned")
    req = recorded(record)
    req.planned_steps = planned_steps or req.planned_steps
    if budget_host or budget_gib:
        req.budget_host, req.budget_gib = budget_host, budget_gib
    d = _drill(record, files, req)
    if not record.get("done"):
        return _running(spec, run_id, state, judge(d)[:1] if len(d.outputs) > 1 else [])
    events = {e.path: e for e in d.events}
    newest = sorted(present_at(d.events, float("inf")).values(), key=lambda e: e.t)[-1:]
    cwd = str(record.get("cwd") or "")
    d.verdicts = await _check(host, cwd, [e.path for e in newest], events) if cwd else []
    kept = [str(r) for r in record.get("after_kill", []) if isinstance(r, str)]
    d.after_kill = await _check(host, f"{run_dir_path(spec.durable_root, run_id)}/preflight/after_kill", kept, events)
    thost, tspec = await resolve(req.budget_host) if req.budget_host else (host, spec)
    plan, budget_stage = budget(d, req.planned_steps, await _target(thost, tspec, req.budget_gib))
    return _done(spec, run_id, state, d, judge(d) + [budget_stage], plan)


def _done(spec: HostSpec, run_id: str, state: RunState | None, d: Drill, stages: list[Stage],
          plan: Budget) -> PreflightResult:
    out1 = d.outputs.get(1)
    verdict = verdict_of(stages)
    return PreflightResult(
        host=spec.name, run_id=run_id, status="done", verdict=verdict, why=why_of(stages), stages=stages,
        seconds_per_step=seconds_per_step(d), series=f"{out1.key} on {out1.stream}" if out1 and out1.key else None,
        framework=d.framework.name if d.framework else None, budget=plan, state=state,
        next_step="GO: rent the box and launch_detached the same command with the real config" if verdict == "GO"
        else "read each finding's fix and route, change the code, run preflight again" if verdict == "NO-GO"
        else "read the warnings; launch when each is understood, or fix and run preflight again")


def started(spec: HostSpec, launched: LaunchResult) -> PreflightResult:
    return _running(spec, launched.run_id, launched.state, [])


def _running(spec: HostSpec, run_id: str, state: RunState | None, stages: list[Any]) -> PreflightResult:
    return PreflightResult(host=spec.name, run_id=run_id, status="running", verdict=None, stages=stages, state=state,
                           next_step=f"wait_for_run(run_id={run_id}) until it ends, then preflight(run_id=...) again")


def not_started(spec: HostSpec, run_id: str, state: RunState | None, log: list[str]) -> PreflightResult:
    """The drill itself never ran (no python on the box, a workdir that is not there)."""
    why = Finding(level="fail", what="the drill did not start on this box: no record was written",
                  evidence=[ln[:240] for ln in log], fix="read the run's log (tail_logs); the drill needs python3 "
                  "(3.8+) on the box's PATH and the workdir to exist")
    stages = [stage("smoke", [why])]
    return PreflightResult(host=spec.name, run_id=run_id, status="done", verdict="NO-GO", state=state,
                           why=why_of(stages), stages=stages,
                           next_step="fix what the log says, then run preflight again")
