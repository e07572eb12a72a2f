"""Failure signatures in log text -> a family, a one-line meaning and the page to read.

Signatures are hints for the reader, never the run status (that comes from the process
and the exit file). Families follow knowledge/run.md §3.7 and training.md §1."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel

from mcp_server.knowledge import reference_uri


@dataclass(frozen=True)
class Signature:
    id: str
    family: str
    pattern: re.Pattern[str]
    meaning: str
    route: str
    needles: tuple[str, ...]  # lowercase literals; the regex runs only when one occurs


def _s(sid: str, family: str, regex: str, meaning: str, page: str, anchor: str | None = None,
       needles: tuple[str, ...] = ()) -> Signature:
    return Signature(sid, family, re.compile(regex, re.M), meaning, reference_uri(page, anchor), needles)


SIGNATURES: tuple[Signature, ...] = (
    _s("vram-oom", "CUDA out of memory", r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory",
       "GPU memory ran out (batch, sequence length, a concurrent job or a zombie holder)", "training/oom-memory", "m2",
       needles=('out of memory', 'outofmemoryerror')),
    _s("host-oom", "host/cgroup RAM OOM",
       r"^Killed\s*$|killed by signal: Killed|exitcode\s*:\s*-9|Out of memory: Killed process|oom-kill",
       "the kernel OOM killer ended the process: host or cgroup RAM (DataLoader workers x in-RAM data), not VRAM",
       "training/oom-memory", "m3", needles=('killed', '-9', 'oom')),
    _s("scheduler-oom", "scheduler OOM", r"OUT_OF_MEMORY|Detected \d+ oom[-_]kill event|OOMKilled",
       "the scheduler's memory limit killed the job: raise --mem / limits.memory to peak RSS x 1.2",
       "training/oom-memory", "m3", needles=('out_of_memory', 'oom')),
    _s("nan", "NaN/Inf loss", r"(?i)\bloss\b[^\n]{0,40}?\b(nan|inf)\b|non-finite|NaN or Inf found|Loss is nan",
       "the loss became non-finite: precision, learning rate / warmup, or bad data",
       "training/precision-stability", "p8",
       needles=('nan', 'inf', 'non-finite')),
    _s("scaler-resume", "GradScaler not restored", r"No inf checks were recorded for this optimizer",
       "the AMP GradScaler state was not restored on resume", "training/checkpoint-resume", "c15",
       needles=('no inf checks',)),
    _s("nccl", "NCCL timeout / hang",
       r"NCCL (?:timeout|error|WARN)|Watchdog caught collective operation timeout|"
       r"ProcessGroupNCCL.*[Tt]imed? ?out|collective operation timeout",
       "a rank died or stalled and the others waited at a collective (default timeout 30 min)",
       "training/distributed-launch", "d19", needles=('nccl', 'collective operation timeout')),
    _s("collective-mismatch", "mismatched collectives", r"Detected mismatch between collectives",
       "ranks called different collectives (rank-conditional code around a barrier/all_reduce)",
       "training/distributed-launch", "d21", needles=('mismatch between collectives',)),
    _s("port-in-use", "rendezvous port in use", r"Address already in use|errno:? ?98",
       "a second job uses the same master port: give each job its own --master-port",
       "training/distributed-launch", "d4",
       needles=('address already in use', 'errno')),
    _s("unused-params", "DDP unused parameters", r"Expected to have finished reduction in the prior iteration",
       "some parameters got no gradient under DDP (find_unused_parameters or fix the graph)",
       "training/distributed-launch", "d8", needles=('finished reduction',)),
    _s("xid", "GPU hardware fault (Xid)", r"NVRM: Xid|GPU has fallen off the bus|uncorrectable ECC error",
       "the GPU failed in hardware: stop and re-rent, do not debug the code", "run-remote/gotchas", "u22",
       needles=('xid', 'fallen off the bus', 'uncorrectable ecc')),
    _s("cuda-triangle", "driver/toolkit/torch mismatch",
       r"no kernel image is available|detected CUDA version mismatch|CUDA failure 804|"
       r"forward compatibility was attempted|"
       r"NVIDIA driver on your system is too old|please update your driver|OCI runtime create failed",
       "the torch build does not match the host driver or the GPU architecture", "run-remote/gotchas", "u28",
       needles=(
           'no kernel image', 'cuda version mismatch', 'cuda failure 804', 'forward compatibility',
           'driver on your system is too old', 'update your driver', 'oci runtime',
       )),
    _s("cuda-error", "CUDA runtime error",
       r"CUDA error: (?!out of memory)|device-side assert triggered|illegal memory access",
       "a CUDA kernel failed; rerun with CUDA_LAUNCH_BLOCKING=1 to locate it (often a bad label index)",
       "training/convergence-debugging", "o14", needles=('cuda error', 'device-side assert', 'illegal memory access')),
    _s("slurm-time-limit", "Slurm time limit", r"CANCELLED AT \S+ DUE TO TIME LIMIT",
       "the job ran past its --time: Slurm sent TERM, then KILL after KillWait; checkpoint on the early signal "
       "and resume, or ask for more time", "run-remote/monitoring", "slurm-ends", needles=('due to time limit',)),
    _s("slurm-preempted", "Slurm preemption", r"CANCELLED AT \S+ DUE TO PREEMPTION",
       "a higher-priority job took the nodes: resubmit (or --requeue) and resume from the last checkpoint",
       "run-remote/monitoring", "slurm-ends", needles=('due to preemption',)),
    _s("slurm-requeued", "Slurm requeue", r"CANCELLED AT \S+ DUE TO JOB REQUEUE",
       "Slurm stopped this attempt to run the job again (a requeue after preemption, node failure or scontrol "
       "requeue): the next attempt starts from the beginning, so resume from the last checkpoint",
       "run-remote/slurm", "requeue", needles=('due to job requeue',)),
    _s("slurm-node-fail", "Slurm node failure", r"DUE TO NODE FAIL",
       "the node failed under the job: an infrastructure failure, retry with the identical config",
       "run-remote/monitoring", "slurm-ends", needles=('due to node fail',)),
    _s("slurmstepd-error", "slurmstepd error", r"slurmstepd(?:-\S+)?: error: (?!\*\*\* (?:JOB|STEP) )",
       "Slurm's step daemon reported a problem with the job's step (memory limit, task launch, I/O)",
       "run-remote/monitoring", "slurm-ends", needles=('slurmstepd',)),
    _s("disk-full", "disk full (bytes or inodes)",
       r"No space left on device|basic_ios::clear: iostream error|unexpected pos \d+ vs \d+|Disk quota exceeded",
       "a write failed for lack of space or inodes (check df -h AND df -i; a checkpoint may be half-written)",
       "run-remote/gotchas", "u6", needles=('no space left', 'basic_ios', 'unexpected pos', 'quota exceeded')),
    _s("truncated-ckpt", "truncated checkpoint",
       r"PytorchStreamReader failed reading zip archive|failed finding central directory",
       "a checkpoint file is truncated: a non-atomic save was interrupted", "training/checkpoint-resume", "c2",
       needles=('pytorchstreamreader', 'central directory')),
    _s("shm", "/dev/shm exhausted",
       r"Bus error|unable to write to file </torch_|received 0 items of ancdata|"
       r"DataLoader worker \(pid \d+\) is killed by signal",
       "DataLoader workers ran out of shared memory: raise --shm-size / use file_system sharing / fewer workers",
       "training/data-pipeline", "dp15", needles=('bus error', '/torch_', 'ancdata', 'dataloader worker')),
    _s("crlf", "CRLF line endings",
       r"\$'\\r': command not found|\r: No such file or directory|unexpected token `\$'\w*\\r'",
       "a shell script has Windows line endings", "run-remote/gotchas", "u26", needles=('\\r',)),
    _s("tracker-off", "experiment tracker off",
       r"Disabled WandB due to initialization error|No API key configured|wandb: ERROR",
       "the tracker is not logging online: push credentials and relaunch", "run-remote/gotchas", "u35",
       needles=('wandb', 'api key')),
    _s("traceback", "Python exception", r"^Traceback \(most recent call last\):",
       "the program raised an exception; the lines after the traceback name it",
       "run-remote/monitoring", "failure-signatures",
       needles=('traceback',)),
    _s("import-error", "import error", r"ModuleNotFoundError|ImportError: ",
       "a module is missing from the interpreter the job ran with", "run-remote/audit-checks", "a18",
       needles=('modulenotfounderror', 'importerror')),
)


class SignatureHit(BaseModel):
    id: str
    family: str
    line: str
    line_no: int | None = None
    meaning: str
    route: str


def scan(text: str, limit: int = 20) -> list[SignatureHit]:
    """Signature hits in `text`, one per signature (its last matching line), newest last."""
    lowered = text.lower()
    hits: list[SignatureHit] = []
    for sig in SIGNATURES:
        if sig.needles and not any(n in lowered for n in sig.needles):
            continue
        last = None
        for last in sig.pattern.finditer(text):  # noqa: B007 - we want the last match
            pass
        if last is None:
            continue
        start = text.rfind("\n", 0, last.start()) + 1
        end = text.find("\n", last.start())
        line = text[start:] if end < 0 else text[start:end]
        hits.append(SignatureHit(id=sig.id, family=sig.family, line=line.strip()[:300],
                                 line_no=text.count("\n", 0, start) + 1, meaning=sig.meaning, route=sig.route))
    ordered = sorted(hits, key=lambda h: h.line_no or 0)
    return ordered[-limit:]


_PROGRESS = (
    re.compile(r"(?i)\bepoch\s*[=:\[]?\s*(\d+)\s*(?:/|of)\s*(\d+)"),
    re.compile(r"(?i)\bepoch\s*[=:\[]?\s*(\d+)"),
    re.compile(r"(?i)\b(?:global_)?step\s*[=:\[]?\s*(\d+)(?:\s*/\s*(\d+))?"),
    re.compile(r"(\d+)/(\d+)\s*\[[^\]]*?([\d.]+\s*(?:it/s|s/it))"),
)


def progress_hint(text: str) -> str | None:
    """The last progress marker in the text (epoch / step / tqdm it/s), as printed."""
    for line in reversed(text.splitlines()[-200:]):
        for pat in _PROGRESS:
            m = pat.search(line)
            if m:
                return line.strip()[:200]
    return None
