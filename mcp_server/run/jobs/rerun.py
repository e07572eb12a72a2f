"""launch_detached(rerun_of=...): the honest retry. The old run's recorded config (command,
workdir or code snapshot, environment names and values, secret names, engine, outputs and sync)
is launched again under a new run id that names the old one; nothing of it can be changed in the
same call, so the two runs differ only in when (and, for a flaky failure, whether) they ran."""

from __future__ import annotations

from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.launch import LaunchRequest
from mcp_server.run.jobs.rundir import check_run_id, read_run_record
from mcp_server.run.jobs.sync import RUN_ID_TOKEN

# What a rerun takes from the old run: giving any of these as well would make it another config.
_FROM_RECORD = ("workdir", "code", "env", "secret_env", "outputs", "output_root", "sync_to_durable", "slurm",
                "kubernetes")


async def rerun_request(host: Host, spec: HostSpec, run_id: str, given: LaunchRequest) -> LaunchRequest:
    check_run_id(run_id)
    clash = [k for k in _FROM_RECORD if getattr(given, k)]
    if clash:
        raise InputError("rerun_of repeats the old run's config exactly; these would change it: " + ", ".join(clash),
                         next_step="drop them, or launch a new run with launch_detached instead")
    rec = await read_run_record(host, spec.durable_root, run_id)
    if rec.queue_id:
        raise InputError(f"run {run_id} was a cell of a queue or sweep; rerun that cell's command with "
                         "launch_detached, or the sweep with start_index", host=spec.name)
    sync = [p.replace(run_id, RUN_ID_TOKEN) for p in rec.sync.patterns] if rec.sync else []
    root = rec.outputs.root if rec.outputs else (rec.sync.root if rec.sync else None)
    if rec.code_snapshot and root in (rec.workdir, rec.output_dir):
        root = None  # a snapshot run's default root, its own work dir: the rerun gets its own
    return given.model_copy(update={
        "command": rec.command, "workdir": rec.workdir, "env": dict(rec.env), "secret_env": list(rec.secret_env_names),
        "backend": rec.backend, "outputs": rec.outputs.patterns if rec.outputs else [],
        "output_root": root, "sync_to_durable": sync, "rerun_of": run_id})
