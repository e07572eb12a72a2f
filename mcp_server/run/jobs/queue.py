"""An on-box queue: several commands for one host, at most K running at once.

The server cannot wait for jobs, so the queue runner itself is a detached process on the
box (runs/queue-<id>/queue.sh). Every command gets its own run dir and wrapper with the
same contract as launch_detached; a child waiting its turn has status `queued`."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import heredoc, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.launch import LaunchRequest, choose_backend, secret_values, make_record, read_facts, run_files
from mcp_server.run.jobs.rundir import new_run_id
from mcp_server.run.jobs.status import STATE_FUNCS, RunState, parse_state
from mcp_server.run.jobs.wrapper import secrets_payload

QUEUE_TEMPLATE = r"""#!/usr/bin/env bash
# remote-gpu-trainer queue runner. Written once at launch; never edit it while it runs.
set -u
qd=@QUEUE_DIR@; runs=$(dirname "$qd"); k=@K@
cd -- "$qd" || exit 96
RGT_SECRETS=$(cat); exec </dev/null
printf '%s\n' "$$" > pid.tmp && mv -f pid.tmp pid
@STATE_FUNCS@
live() { n=0; while IFS= read -r c; do
  [ -f "$runs/$c/exit_code" ] && continue
  rgt_alive "$runs/$c" "$(cat "$runs/$c/pid" 2>/dev/null)" "$runs/$c/wrapper.sh" && n=$((n+1))
  done < children; echo "$n"; }
while IFS= read -r c <&4; do
  while [ "$(live)" -ge "$k" ]; do sleep 1; done
  printf '%s' "$RGT_SECRETS" | setsid -f bash "$runs/$c/wrapper.sh" shell >/dev/null 2>&1
  i=0; while [ ! -f "$runs/$c/pid" ] && [ ! -f "$runs/$c/exit_code" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  rm -f -- "$runs/$c/queued"
done 4< children
unset RGT_SECRETS
while [ "$(live)" -gt 0 ]; do sleep 2; done
printf '0\n' > exit_code.tmp && mv -f exit_code.tmp exit_code
"""


class QueuedRun(BaseModel):
    run_id: str
    command: str
    state: RunState


class QueueResult(BaseModel):
    host: str
    queue_id: str
    queue_dir: str
    max_concurrent: int
    runs: list[QueuedRun] = Field(description="one per command, in queue order")


async def launch_queue(host: Host, spec: HostSpec, commands: list[str], max_concurrent: int,
                       req: LaunchRequest, *, ledger: Ledger | None, redactor: Redactor) -> QueueResult:
    """Queue `commands` on one box; the first `max_concurrent` start at once."""
    secrets = secret_values(req.secret_env, os.environ, redactor)
    facts = await read_facts(host, spec, req.model_copy(update={"name": None}))
    choose_backend(req.model_copy(update={"backend": "shell"}), facts)
    base = facts["base"]
    queue_id = "queue-" + new_run_id(req.name)
    qd = f"{base}/runs/{queue_id}"
    child_ids = [new_run_id(f"{req.name or 'q'}{i + 1}") for i in range(len(commands))]
    lines = [STATE_FUNCS, "set -u", f"qd={quote(qd)}", 'mkdir "$qd" || exit 1',
             'cat /proc/sys/kernel/random/boot_id > "$qd/boot_id" 2>/dev/null']
    for rid, cmd in zip(child_ids, commands, strict=True):
        record = make_record(spec, req, facts, rid, "shell", list(secrets), cmd, queue_id=queue_id)
        lines += run_files(spec, req, record, f"{base}/runs/{rid}", facts["workdir"])
        lines.append(f"printf '%s\\n' {quote(queue_id)} > \"$d/queued\"")
    script = (QUEUE_TEMPLATE.replace("@QUEUE_DIR@", quote(qd)).replace("@K@", str(int(max_concurrent)))
              .replace("@STATE_FUNCS@", STATE_FUNCS))
    lines += [
        heredoc('"$qd/children"', "\n".join(child_ids)),
        heredoc('"$qd/queue.sh"', script),
        "RGT_SECRETS=$(cat)",
        'printf \'%s\' "$RGT_SECRETS" | setsid -f bash "$qd/queue.sh" >/dev/null 2>&1',
        "unset RGT_SECRETS",
        'i=0; while [ ! -f "$qd/pid" ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done',
        f"sleep {min(req.probe_s, 20):g}",
        *[f'printf "%s\\t%s\\n" {quote(rid)} "$(rgt_state {quote(base + "/runs/" + rid)} | tr "\\t" "|")"'
          for rid in child_ids],
    ]
    res = await host.run("\n".join(lines) + "\n", stdin=secrets_payload(secrets), timeout=req.probe_s + 30)
    res.check("starting the queue")
    states = dict(line.split("\t", 1) for line in res.text.splitlines() if "\t" in line)
    runs = [QueuedRun(run_id=rid, command=redactor.scrub(cmd)[:200],
                      state=parse_state(states.get(rid, "").replace("|", "\t")))
            for rid, cmd in zip(child_ids, commands, strict=True)]
    if ledger is not None:
        for r, cmd in zip(runs, commands, strict=True):
            ledger.record("launch", host=spec.name, run_id=r.run_id, summary=f"queued in {queue_id}",
                          data={"queue_id": queue_id, "command": cmd, "backend": "shell",
                                "secret_env_names": sorted(secrets), "durable_root": spec.durable_root})
    return QueueResult(host=spec.name, queue_id=queue_id, queue_dir=qd, max_concurrent=max_concurrent, runs=runs)
