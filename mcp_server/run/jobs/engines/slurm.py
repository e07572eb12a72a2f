"""The Slurm engine: a run is a batch job submitted from the login node (`sbatch --parsable`),
whose batch shell is the same run-dir wrapper as on a plain box, so the run dir's contract (log,
exit code, cancel record) holds. Its state is what Slurm says (one squeue for all live jobs,
`scontrol show job` for finished ones it still remembers), joined with the run dir's exit file:
the exit file is the command's own code; Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL or PREEMPTED
say why a job died before writing one (scripts/job_engine_slurm.sh, job_slurm_status.sh)."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import quote
from mcp_server.hosts.slurm_options import SlurmOptions
from mcp_server.run.jobs.engines.base import RunDirEngine, state_lines
from mcp_server.run.jobs.status import RunState, parse_state

QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING", "STAGE_OUT"}
# Terminal states that say why a job died, with what they mean for the user.
WHY = {
    "TIMEOUT": "the job ran past its time limit (DUE TO TIME LIMIT): checkpoint on the USR1 sent before it, "
               "or ask for more --time",
    "OUT_OF_MEMORY": "the job hit its memory limit (oom-kill event): ask for more --mem or lower the batch size",
    "NODE_FAIL": "the node failed: an infrastructure failure, retry with the identical config",
    "BOOT_FAIL": "the node failed to boot: an infrastructure failure, retry with the identical config",
    "PREEMPTED": "preempted by a higher-priority job: resubmit, or use --requeue and resume from a checkpoint",
    "DEADLINE": "the job missed its --deadline",
    "REVOKED": "revoked by a federated sibling job",
}


def _fields(sc: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in sc.split() if "=" in part)


def _code(exit_code: str | None) -> int | None:
    head = (exit_code or "").split(":", 1)[0]
    return int(head) if head.isdigit() else None


def slurm_state(line: str) -> RunState:
    """One line of job_slurm_status.sh: the run dir's state joined with Slurm's."""
    own_line, job_id, queued, sc = (line.split("\x1f") + ["", "", ""])[:4]
    own = parse_state(own_line)
    common = {"log_size": own.log_size, "log_mtime": own.log_mtime}
    if queued:
        state, _, reason = queued.partition("|")
        if state in QUEUED:
            return RunState(status="queued", evidence=[f"Slurm job {job_id} is {state} (reason: {reason}; squeue)"],
                            **common)
        if state in RUNNING and own.status not in ("succeeded", "failed", "sync_failed", "cancelled"):
            return RunState(status="running", evidence=[f"Slurm job {job_id} is {state} (squeue)"], **common)
    f = _fields(sc)
    state = f.get("JobState", "")
    said = (f"Slurm job {job_id}: {state} (reason {f.get('Reason', '?')}, exit code {f.get('ExitCode', '?')}; "
            "scontrol)")
    if state in WHY and own.status != "cancelled":
        code = own.exit_code if own.exit_code is not None else _code(f.get("ExitCode"))
        return RunState(status="failed", exit_code=code, ended_at=own.ended_at, evidence=[said, WHY[state]], **common)
    if own.status in ("succeeded", "failed", "sync_failed", "cancelled"):
        return own.model_copy(update={"evidence": own.evidence + ([said] if state else [])})
    if state == "CANCELLED":
        return RunState(status="cancelled", evidence=[said, "cancelled outside this server (scancel)"], **common)
    if state == "FAILED":
        return RunState(status="failed", exit_code=_code(f.get("ExitCode")), evidence=[said], **common)
    if state in QUEUED | RUNNING:
        return RunState(status="queued" if state in QUEUED else "running", evidence=[said], **common)
    gone = said if state else (f"Slurm no longer knows job {job_id} (finished before MinJobAge and no accounting)"
                               if job_id else "no Slurm job id recorded: the submission never happened")
    return RunState(status="lost", evidence=[gone, "and the run left no exit code"], **common)


def sbatch_function(options: SlurmOptions) -> str:
    """Shell defining `rgt_sbatch`: sbatch with these options as quoted words, which it also keeps
    in the run dir (`sbatch_args`, one per line) as the record of what was asked."""
    words = " ".join(quote(a) for a in options.sbatch_args())
    return (f"rgt_sbatch() {{ printf '%s\\n' {words} > \"$d/sbatch_args\"; sbatch {words} \"$@\"; }}\n")


class SlurmEngine(RunDirEngine):
    name = "slurm"
    library = "job_engine_slurm"

    def job_name(self, run_id: str) -> str | None:
        return f"rgt-{run_id}"

    async def status(self, host: Host, run_dirs: Sequence[str]) -> list[RunState]:
        return [slurm_state(line) for line in await state_lines(host, "job_slurm_status", run_dirs)]
