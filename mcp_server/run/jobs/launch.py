"""launch_detached: start a job that outlives the SSH connection, the server and the client.

Two round trips: (1) read-only facts (paths, disk, git, tools, an existing run of that
name), (2) under an on-box lock: create the run dir, start the wrapper detached, probe it
for up to `probe_s`, and report. Secrets travel on stdin only."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from mcp_server import __version__
from mcp_server.errors import GateRefused, InputError, RgtError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import check_env_name, check_name, check_path, heredoc, path_word, quote
from mcp_server.verify.artifacts.roster import check_pattern
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines.base import BACKENDS, tmux_session
from mcp_server.run.jobs.rundir import RunOutputs, RunPaths, RunRecord, new_run_id
from mcp_server.run.jobs.signatures import SignatureHit, progress_hint, scan
from mcp_server.run.jobs.status import STATE_FUNCS, RunState, parse_state
from mcp_server.run.jobs.wrapper import env_script, secrets_payload, wrapper_script

MAX_PROBE_S = 25.0
DEFAULT_MIN_FREE_GIB = 5.0
DEFAULT_MIN_FREE_INODES = 10_000
LOG_TAIL_BYTES = 8192

Outcome = Literal["running", "exited_early", "already_running", "already_finished", "queued"]


class LaunchRequest(BaseModel):
    command: str = Field(min_length=1, max_length=64_000)
    name: str | None = None
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list)
    backend: Literal["shell", "tmux"] = "shell"
    allow_fallback: bool = False
    probe_s: float = Field(default=5.0, ge=0, le=MAX_PROBE_S)
    relaunch: bool = False
    min_free_gib: float = Field(default=DEFAULT_MIN_FREE_GIB, ge=0)
    min_free_inodes: int = Field(default=DEFAULT_MIN_FREE_INODES, ge=0)
    outputs: list[str] = Field(default_factory=list, description="roster patterns the run must produce")
    output_root: str | None = None


class LaunchResult(BaseModel):
    host: str
    run_id: str
    name: str | None
    outcome: Outcome
    backend: str
    run_dir: str
    log_path: str
    state: RunState
    log_tail: str = Field(description="last lines of the log (secret values redacted)")
    signatures: list[SignatureHit]
    progress: str | None = None
    notes: list[str] = Field(default_factory=list)
    tmux_session: str | None = None


def _facts_script(spec: HostSpec, req: LaunchRequest, workdir: str) -> str:
    root = path_word(spec.durable_root, "durable root")
    wd = path_word(workdir, "workdir")
    name_part = ""
    if req.name:
        nf = RunPaths(spec.durable_root, "x").name_file(req.name)
        name_part = (f'if [ -f {nf} ]; then rid=$(cat {nf}); printf "existing=%s\\n" "$rid"; '
                     f'printf "existing_state=%s\\n" "$(rgt_state "$base/runs/$rid" | tr "\\t" "|")"; fi')
    return f"""{STATE_FUNCS}
mkdir -p {root}/.rgt/runs {root}/.rgt/names {root}/.rgt/locks || exit 3
base=$(cd {root}/.rgt && pwd -P)
printf 'base=%s\\nuser=%s\\nhostname=%s\\nuname=%s\\n' "$base" "$(id -un)" "$(hostname)" "$(uname -srm)"
printf 'bytes=%s\\n' "$(df -P -k -- {root} | tail -n 1)"
printf 'inodes=%s\\n' "$(df -P -i -- {root} | tail -n 1)"
printf 'tmux=%s\\nsetsid=%s\\n' "$(command -v tmux)" "$(command -v setsid)"
if [ -d {wd} ]; then printf 'workdir=%s\\n' "$(cd {wd} && pwd -P)"
  if command -v git >/dev/null 2>&1 && git -C {wd} rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    printf 'git_commit=%s\\n' "$(git -C {wd} rev-parse HEAD 2>/dev/null)"
    printf 'git_dirty=%s\\n' "$(git -C {wd} status --porcelain --untracked-files=no 2>/dev/null | head -c 1 | wc -c)"
  fi
fi
command -v nvidia-smi >/dev/null 2>&1 && printf 'gpus=%s\\n' "$(nvidia-smi -L 2>/dev/null | head -n 16 | cut -c1-60 | tr '\\n' ';')"
{name_part}
exit 0
"""


def _disk_gate(spec: HostSpec, facts: dict[str, str], req: LaunchRequest) -> None:
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


def _start_script(spec: HostSpec, req: LaunchRequest, run_id: str, base: str, workdir: str,
                  record: RunRecord, backend: str) -> str:
    paths = RunPaths(spec.durable_root, run_id)
    d_abs = f"{base}/runs/{run_id}"
    waits = int(req.probe_s / 0.2)
    lines = [STATE_FUNCS, "set -u"]
    if req.name:
        lock, nf = paths.lock_dir(req.name), paths.name_file(req.name)
        lines += [
            f"n=0; until mkdir {lock} 2>/dev/null; do n=$((n+1)); [ $n -gt 100 ] && {{ echo RGT-LOCKED; exit 0; }}; sleep 0.1; done",
            f"trap 'rmdir {lock} 2>/dev/null' EXIT",
            f'if [ -f {nf} ]; then rid=$(cat {nf}); st=$(rgt_state "{base}/runs/$rid"); case "$st" in',
            '  alive*|queued*) printf "RGT-EXISTING %s\\n%s\\n" "$rid" "$st"; exit 0;;',
            f'  *) [ {int(req.relaunch)} = 1 ] || {{ printf "RGT-FINISHED %s\\n%s\\n" "$rid" "$st"; exit 0; }};;',
            "esac; fi",
        ]
    lines += [
        *run_files(spec, req, record, d_abs, workdir),
        "RGT_SECRETS=$(cat)",
        BACKENDS[backend].start(run_id),
        "unset RGT_SECRETS",
    ]
    if req.name:
        nf = paths.name_file(req.name)
        lines.append(f"printf '%s\\n' {quote(run_id)} > {nf}.tmp && mv -f {nf}.tmp {nf}")
    lines += [
        f"echo RGT-STARTED {quote(run_id)}",
        # The wrapper records its pid within a moment; then wait for an early exit.
        'i=0; while [ ! -f "$d/pid" ] && [ ! -f "$d/exit_code" ] && [ $i -lt 150 ]; do sleep 0.02; i=$((i+1)); done',
        f'i=0; while [ ! -f "$d/exit_code" ] && [ $i -lt {waits} ]; do sleep 0.2; i=$((i+1)); done',
        'rgt_state "$d"',
        f'echo RGT-LOG; tail -c {LOG_TAIL_BYTES} "$d/log" 2>/dev/null',
    ]
    return "\n".join(lines) + "\n"


def run_files(spec: HostSpec, req: LaunchRequest, record: RunRecord, d_abs: str, workdir: str) -> list[str]:
    """Shell lines that create one run dir and its files ($d must hold the quoted dir)."""
    return [
        f"d={quote(d_abs)}",
        'mkdir "$d" || { echo RGT-MKDIR-FAILED; exit 1; }',
        heredoc('"$d/run.json"', record.model_dump_json(by_alias=True, indent=2)),
        heredoc('"$d/cmd.sh"', record.command),
        heredoc('"$d/env.sh"', env_script(req.env, spec.profile.proxy_hook)),
        heredoc('"$d/wrapper.sh"', wrapper_script(record.run_id, d_abs, path_word(workdir, "workdir"))),
        'cat /proc/sys/kernel/random/boot_id > "$d/boot_id" 2>/dev/null; rgt_oom > "$d/oom_base"',
        ': > "$d/log"',
    ]


def make_record(spec: HostSpec, req: LaunchRequest, facts: dict[str, str], run_id: str, backend: str,
                secret_names: list[str], command: str, queue_id: str | None = None) -> RunRecord:
    now = time.time()
    return RunRecord(
        run_id=run_id, name=req.name if queue_id is None else None, host=spec.name, backend=backend,  # type: ignore[arg-type]
        command=command, workdir=facts["workdir"], env=req.env, secret_env_names=sorted(secret_names),
        started_at=now, started_at_utc=datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        user=facts.get("user"), git_commit=facts.get("git_commit") or None,
        git_dirty=(facts["git_dirty"].strip() not in ("", "0")) if "git_dirty" in facts else None,
        host_facts={k: facts[k] for k in ("hostname", "uname", "gpus") if k in facts},
        queue_id=queue_id, server_version=__version__,
        outputs=RunOutputs(root=req.output_root or facts["workdir"], patterns=req.outputs) if req.outputs else None,
    )


async def read_facts(host: Host, spec: HostSpec, req: LaunchRequest) -> dict[str, str]:
    """Round trip 1: read-only facts; the disk gate refuses before anything is written."""
    workdir = req.workdir or spec.durable_root
    res = await host.run(_facts_script(spec, req, workdir), timeout=20)
    res.check("reading launch facts", next_step="check the durable root is writable")
    facts = parse_kv(res.text)
    if "workdir" not in facts:
        raise InputError("workdir does not exist on the box", host=spec.name, path=workdir,
                         next_step="create it or push the code first; give an absolute path or ~/...")
    _disk_gate(spec, facts, req)
    return facts


async def launch(host: Host, spec: HostSpec, req: LaunchRequest, *, ledger: Ledger | None,
                 redactor: Redactor, environ: dict[str, str] | None = None) -> LaunchResult:
    """Start one detached job (or return the live one of the same name)."""
    if req.name:
        check_name(req.name, "run name")
    for p in req.outputs:
        check_pattern(p)
    if req.output_root:
        check_path(req.output_root, "output_root")
    for k in req.env:
        check_env_name(k)
    secrets = secret_values(req.secret_env, os.environ if environ is None else environ, redactor)
    facts = await read_facts(host, spec, req)
    backend, notes = choose_backend(req, facts)
    if req.name and "existing" in facts:
        existing = parse_state(facts.get("existing_state", "").replace("|", "\t"))
        live = existing.status in ("running", "queued")
        if live or not req.relaunch:
            return _existing_result(spec, facts["base"], facts["existing"], req.name,
                                    "already_running" if live else "already_finished", existing, backend, notes)
    run_id = new_run_id(req.name)
    record = make_record(spec, req, facts, run_id, backend, list(secrets), req.command)
    script = _start_script(spec, req, run_id, facts["base"], facts["workdir"], record, backend)
    res = await host.run(script, stdin=secrets_payload(secrets), timeout=req.probe_s + 20)
    result = _parse_start(spec, run_id, req, backend, facts["base"], res.text, redactor, notes)
    if ledger is not None and result.outcome in ("running", "exited_early"):
        ledger.record("launch", host=spec.name, run_id=run_id, summary=f"{result.outcome} {req.name or ''}".strip(),
                      data={"name": req.name, "backend": backend, "command": req.command, "workdir": facts["workdir"],
                            "secret_env_names": sorted(secrets), "run_dir": result.run_dir,
                            "durable_root": spec.durable_root, "status": result.state.status,
                            "exit_code": result.state.exit_code,
                            "outputs": record.outputs.model_dump() if record.outputs else None})
    return result


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


def choose_backend(req: LaunchRequest, facts: dict[str, str]) -> tuple[str, list[str]]:
    if not facts.get("setsid"):
        raise RgtError("setsid is not available on the box: a detached launch is not possible",
                       next_step="install util-linux (setsid) on the box")
    if req.backend == "tmux" and not facts.get("tmux"):
        if not req.allow_fallback:
            raise InputError("tmux is not installed on the box", observed="backend=tmux",
                             next_step="install tmux (apt-get install -y tmux), or call again with "
                             "allow_fallback=true to use the shell backend (setsid; same run dir and exit-code contract)")
        return "shell", ["tmux is missing: fell back to the shell backend (setsid) as allowed"]
    return req.backend, []


def _existing_result(spec: HostSpec, base: str, run_id: str, name: str | None, outcome: Outcome,
                     state: RunState, backend: str, notes: list[str]) -> LaunchResult:
    run_dir = f"{base}/runs/{run_id}"
    note = ("a run with this name is live: no second job was started" if outcome == "already_running"
            else "this name's last run has finished: pass relaunch=true to start it again")
    return LaunchResult(host=spec.name, run_id=run_id, name=name, outcome=outcome, backend=backend,
                        run_dir=run_dir, log_path=f"{run_dir}/log", state=state, log_tail="",
                        signatures=[], notes=[*notes, note])


def _parse_start(spec: HostSpec, run_id: str, req: LaunchRequest, backend: str, base: str, text: str,
                 redactor: Redactor, notes: list[str]) -> LaunchResult:
    head, _, log = text.partition("RGT-LOG\n")
    lines = head.splitlines()
    run_dir = f"{base}/runs/{run_id}"
    first = lines[0] if lines else ""
    if first.startswith(("RGT-EXISTING", "RGT-FINISHED")):
        outcome: Outcome = "already_running" if first.startswith("RGT-EXISTING") else "already_finished"
        state = parse_state(lines[1] if len(lines) > 1 else "")
        return _existing_result(spec, base, first.split()[1], req.name, outcome, state, backend, notes)
    if not any(line.startswith("RGT-STARTED") for line in lines):
        raise RgtError("the launch did not start", host=spec.name, observed=redactor.scrub(head[-500:]),
                       next_step="read the message; check the durable root and the backend")
    state = parse_state(next((ln for ln in lines if ln.split("\t")[0] in ("alive", "exited", "gone", "queued")), ""))
    if state.status == "lost" and state.pid is None:
        state = RunState(status="running", evidence=["starting: the wrapper has not recorded its pid yet"],
                         log_size=state.log_size, log_mtime=state.log_mtime)
    tail = redactor.scrub(log)
    outcome = "exited_early" if state.status in ("succeeded", "failed") else "running"
    return LaunchResult(
        host=spec.name, run_id=run_id, name=req.name, outcome=outcome, backend=backend, run_dir=run_dir,
        log_path=f"{run_dir}/log", state=state, log_tail="\n".join(tail.splitlines()[-40:]),
        signatures=scan(tail), progress=progress_hint(tail), notes=notes,
        tmux_session=tmux_session(run_id) if backend == "tmux" else None,
    )
