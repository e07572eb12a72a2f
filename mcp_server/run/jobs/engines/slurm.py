"""The Slurm engine: a run is a batch job submitted from the login node (`sbatch --parsable`),
whose batch shell is the same run-dir wrapper as on a plain box, so the run dir's contract (log,
exit code, cancel record) holds. Its state is what Slurm says (one squeue for all live jobs,
`scontrol show job` for finished ones it still remembers), joined with the run dir's exit file:
the exit file is the command's own code; Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL or PREEMPTED
say why a job died before writing one (scripts/job_engine_slurm.sh, job_slurm_status.sh)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from mcp_server import scripts
from mcp_server.errors import InputError, RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import quote
from mcp_server.hosts.slurm_options import SlurmOptions
from mcp_server.run.jobs.engines.base import RunDirEngine, state_lines
from mcp_server.run.jobs.rundir import RunStatus
from mcp_server.run.jobs.status import RunState, parse_state
from mcp_server.settings import SLURM_POLL_S

QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
SIGNAL_EXITS = (129, 130, 137, 143)  # HUP, INT, KILL, TERM: how a stopped attempt ends
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


SOURCES = {"squeue": "squeue", "sacct": "sacct", "jobcomp": "the job completion log (sacct -c)",
           "scontrol": "scontrol"}


def _code(exit_code: str | None) -> int | None:
    head = (exit_code or "").split(":", 1)[0]
    return int(head) if head.isdigit() else None


def slurm_state(line: str, age_s: float | None = None) -> RunState:
    """One line of job_slurm_status.sh: the run dir's state joined with what Slurm said and where;
    `age_s` when Slurm was not asked this time and its last answer (that old) stands in."""
    own_line, job_id, requeue, source, said, started = _fields(line)
    own = parse_state(own_line)
    common = {"log_size": own.log_size, "log_mtime": own.log_mtime}
    word, reason, exit_code = (said.split("|") + ["", ""])[:3]
    state, _, by = word.partition(" by ")
    where = SOURCES.get(source, source) + (f", {age_s:.0f} s ago" if age_s is not None else "")
    told = f"Slurm job {job_id} is {state}" + (f" (reason: {reason})" if reason and reason != "None" else "")
    told += (f", exit code {exit_code}" if exit_code and source != "squeue" else "") + f" ({where})"
    ended = own.status in ("succeeded", "failed", "sync_failed", "cancelled")
    if source == "unanswered":
        return _unanswered(own, ended, requeue, job_id, reason, started, common)
    stopped = ended and _stopped(requeue, own)  # the run dir's end is an attempt's, maybe not the job's
    if stopped and (state in QUEUED or state in RUNNING):
        # (COMPLETING too: under load Slurm shows the stopped attempt ending before the requeue)
        return _attempt_again(own, state, told, age_s, common)
    if stopped and state in ("", "FAILED", "CANCELLED", "COMPLETED"):
        return _after_stopped_attempt(own, state, by, exit_code, told, job_id, common)
    if age_s is not None and (ended or (started == "1" and state in QUEUED)):
        # Slurm's answer is older than what the run dir says now: the run dir wins.
        if ended:
            return own.model_copy(update={"evidence": [*own.evidence, f"the run dir's record; Slurm was {told}"]})
        return RunState(status="running", evidence=[f"started: the run dir has the wrapper's pid; Slurm was {told}"],
                        **common)
    # (Queued but the run dir has the end: the job started and ended after Slurm answered.)
    if (state in QUEUED and not ended) or (state == "PREEMPTED" and requeue in ("1", "2")
                                           and source in ("squeue", "scontrol")):
        note = ["preempted; --requeue was asked: Slurm runs it again from the start (resume from a checkpoint)"
                ] if state in ("PREEMPTED", "REQUEUED") else []
        return RunState(status="queued", evidence=[told, *note], **common)
    if state in RUNNING:
        if ended:  # the command is done; Slurm is still ending the job (COMPLETING)
            return own.model_copy(update={"evidence": [*own.evidence, told, "Slurm is still ending the job: its "
                                                       "final state (e.g. TIMEOUT, OUT_OF_MEMORY) follows"]})
        return RunState(status="running", evidence=[told], **common)
    if state in WHY and own.status != "cancelled":
        code = own.exit_code if own.exit_code is not None else _code(exit_code)
        return RunState(status="failed", exit_code=code, ended_at=own.ended_at, evidence=[told, WHY[state]], **common)
    if ended:
        return own.model_copy(update={"evidence": own.evidence + ([told] if state else ["(the run dir's exit file)"])})
    return _no_exit_file(state, by, exit_code, told, job_id, common)


def _after_stopped_attempt(own: RunState, state: str, by: str, exit_code: str, told: str, job_id: str,
                           common: dict[str, Any]) -> RunState:
    """An attempt was stopped by a signal (exit 143: a requeue, a preemption) and the run dir holds
    its end, which is not the job's: Slurm's final word is (e.g. FAILED when the next attempt could
    not start: "Job credential revoked"), or, with no record of the job anywhere, the run is unknown."""
    stopped = _stopped_text(own)
    if not state:
        return RunState(status="unknown", evidence=[
            *own.evidence, f"Slurm has no record of job {job_id} now (squeue, accounting, the job completion log, "
            f"scontrol); {stopped}: ask again shortly"], **common)
    final = _no_exit_file(state, by, exit_code, told, job_id, common)
    return final.model_copy(update={"evidence": [*final.evidence, f"{stopped}; Slurm then ended the job"]})


def _no_exit_file(state: str, by: str, exit_code: str, told: str, job_id: str, common: dict[str, Any]) -> RunState:
    """A job Slurm says ended (or no longer knows) whose wrapper recorded no end: Slurm's word decides."""
    if state == "CANCELLED":
        who = f"cancelled by uid {by}" if by else "cancelled"
        return RunState(status="cancelled", evidence=[told, f"{who} outside this server (scancel)"], **common)
    if state == "FAILED":
        return RunState(status="failed", exit_code=_code(exit_code), evidence=[told], **common)
    if state == "COMPLETED":
        return RunState(status="lost", evidence=[told, "Slurm says the job completed, but the wrapper recorded no "
                                                 "exit code: the run dir is not on a filesystem the compute node "
                                                 "shares, or the batch script was changed"], **common)
    gone = told if state else (f"Slurm no longer knows job {job_id}: squeue, accounting, the job completion log and "
                               "scontrol have no record of it" if job_id else
                               "no Slurm job id recorded: the submission never happened")
    return RunState(status="lost", evidence=[gone, "and the run left no exit code"], **common)


def _stopped_text(own: RunState) -> str:
    return f"an attempt was stopped by a signal (exit {own.exit_code}) and --requeue was asked"


def _stopped(requeue: str, own: RunState) -> bool:
    """An attempt stopped by a signal, of a job Slurm may run again: the wrapper or the batch shell
    recorded the signal (2), or its exit code says it (the batch shell writes `signalled` a moment
    after the wrapper's exit code). A cancel_run is never that."""
    if own.status == "cancelled":
        return False
    return requeue == "2" or (requeue == "1" and own.exit_code in SIGNAL_EXITS)


def _unanswered(own: RunState, ended: bool, requeue: str, job_id: str, error: str, started: str,
                common: dict[str, Any]) -> RunState:
    """Slurm did not answer (the controller busy or down) and has no earlier answer to stand in:
    a run its wrapper saw end is ended; anything else is unknown, never lost and never ended (a
    requeue job's stopped attempt may run again)."""
    silent = f"Slurm did not answer about job {job_id} ({error.strip() or 'squeue failed'})"
    if ended and not _stopped(requeue, own):
        return own.model_copy(update={"evidence": [*own.evidence, f"the run dir's record; {silent}"]})
    if ended:
        where = _stopped_text(own) + ": Slurm may run it again"
    elif started == "1":
        where = "the job had started (the wrapper's pid); the run dir has no exit code yet"
    else:
        where = "the run dir has no exit code yet"
    return RunState(status="unknown", evidence=[silent, where, "ask again in a minute; `squeue` on the login node "
                                                "says whether its controller answers"], **common)


def _attempt_again(own: RunState, state: str, told: str, age_s: float | None, common: dict[str, Any]) -> RunState:
    """A signal stopped an attempt of a job Slurm may run again (a requeue, a preemption): until
    Slurm says the job ended, that attempt's exit code is not the run's."""
    again: RunStatus = "queued" if state in QUEUED else "running"
    return RunState(status=again, evidence=[
        told, _stopped_text(own) + ", so Slurm runs the job again"
        + (": its verdict comes at the next poll of Slurm" if age_s is not None else "")], **common)


# What sbatch says when it refuses a job (its own words, as Slurm 22-24 print them), what it means
# and what to do: (words in sbatch's message, what is wrong, next step).
REFUSALS = [
    ("Invalid job array specification", "the cluster refused the job array (its MaxArraySize or MaxJobCount)",
     "submit fewer cells at once (start_index resumes a sweep), or ask the admins for MaxArraySize"),
    ("MaxSubmitJob", "the submit limit of your QOS or association is reached (MaxSubmitJobs)",
     "wait for jobs to finish (list_runs), or submit fewer cells at once"),
    ("Invalid partition", "the partition does not exist or you may not use it",
     "audit_box lists the partitions (sinfo); set slurm.partition or [hosts.<name>.slurm] partition"),
    ("Invalid account", "the account (or account/partition pair) is not yours",
     "`sacctmgr show assoc user=$USER` on the login node names your accounts; set slurm.account"),
    ("Invalid qos", "the QOS does not exist or is not allowed for your account", "set slurm.qos to one you have"),
    ("Requested node configuration is not available",
     "no node of the partition can ever satisfy the request (GPUs, memory, CPUs or constraint)",
     "lower gpus/mem/cpus_per_task or pick another partition or constraint"),
    ("time limit", "the requested --time exceeds the partition's limit", "ask for less time (slurm.time)"),
]


def submit_refusal(host: str, message: str) -> RgtError:
    """sbatch's refusal as an error that says what was wrong and what to do."""
    for words, what, step in REFUSALS:
        if words.lower() in message.lower():
            return InputError(f"Slurm refused the job: {what}", host=host, observed=message[-500:], next_step=step)
    return RgtError("Slurm refused the job", host=host, observed=message[-500:],
                    next_step="read sbatch's message; check the partition, account, qos and resources")


def sbatch_function(options: SlurmOptions) -> str:
    """Shell defining `rgt_sbatch`: sbatch with these options as quoted words, which it also keeps
    in the run dir (`sbatch_args`, one per line) as the record of what was asked."""
    words = " ".join(quote(a) for a in options.sbatch_args())
    return (f"rgt_sbatch() {{ printf '%s\\n' {words} > \"$d/sbatch_args\"; sbatch {words} \"$@\"; }}\n"
            f"RGT_REQUEUE={int(options.requeue)}\nRGT_WARN_SIGNAL={options.warn_signal}\n")


class SlurmEngine(RunDirEngine):
    """`status` asks Slurm (squeue, then accounting) at most once per `poll_s` per cluster, as
    sites ask of their users; in between it reads the run dirs (an exit code, a cancel, a started
    job's pid) and lets Slurm's last answer for each run stand in, saying how old it is."""

    name = "slurm"
    library = "job_engine_slurm"

    def __init__(self, poll_s: float = SLURM_POLL_S) -> None:
        self.poll_s = poll_s
        self._asked: dict[str, float] = {}  # host -> when Slurm was last asked (monotonic)
        self._said: dict[tuple[str, str], tuple[float, str]] = {}  # (host, run dir) -> (when, Slurm's part)

    def job_name(self, run_id: str) -> str | None:
        return f"rgt-{run_id}"

    def submit_functions(self) -> str:
        return scripts.load(self.library) + f"RGT_BATCH={quote(scripts.load('job_batch_slurm'))}\n"

    async def status(self, host: Host, run_dirs: Sequence[str]) -> list[RunState]:
        now = time.monotonic()
        ask = (now - self._asked.get(host.name, -math.inf) >= self.poll_s
               or any((host.name, d) not in self._said for d in run_dirs))
        lines = await state_lines(host, "job_slurm_status", run_dirs, "1" if ask else "0")
        if ask:
            self._asked[host.name] = now
        out = []
        for d, line in zip(run_dirs, lines, strict=True):
            key, (_, _, _, source, said, _) = (host.name, d), _fields(line)
            silent = source == "unanswered"
            if ask and not silent:
                self._said[key] = (now, _slurm_part(line))
                out.append(slurm_state(line))
            elif key in self._said:  # between two queries, or Slurm did not answer: its last answer stands in
                when, part = self._said[key]
                s = slurm_state(_with_slurm_part(line, part), age_s=now - when)
                note = [f"Slurm did not answer this time ({said.strip('|')})"] if silent else []
                out.append(s.model_copy(update={"evidence": [*s.evidence, *note]}))
            else:
                out.append(slurm_state(line))
        return out


def _fields(line: str) -> list[str]:
    """A status line's six fields: own state, job id, requeue, source, what Slurm said, started."""
    return (line.split("\x1f") + [""] * 6)[:6]


def _slurm_part(line: str) -> str:
    """The fields Slurm answered (source, what it said) of a status line."""
    return "\x1f".join(_fields(line)[3:5])


def _with_slurm_part(line: str, part: str) -> str:
    fields = _fields(line)
    fields[3:5] = part.split("\x1f", 1)
    return "\x1f".join(fields)
