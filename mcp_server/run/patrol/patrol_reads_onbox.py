"""What the on-box patrol reads, all read-only: a run's state from its run-dir files (the way
job_state.sh's rgt_state decides), its log's newest step and loss, the memory cgroup and the
box's memory, the runs under the durable root, the GPUs; and the text it writes from them. Standard
library only, Python 3.8+: copied to the box beside patrol_onbox.py, never imported by the server."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import subprocess
import time
from typing import Any

try:
    from .patrol_parse_onbox import Ring, gib, parse_line, span  # in the package (the server's tests)
except ImportError:  # on the box, where the files sit side by side
    from patrol_parse_onbox import Ring, gib, parse_line, span  # type: ignore[no-redef, import-not-found]

__all__ = ["Ring", "gib", "parse_line", "span"]  # the patrol reads them from here

LOG_CAP = 1 << 20  # log bytes read per run and tick
SIG_SCAN = 256 * 1024  # log tail searched for a failure signature
EXCERPT_LINES, EXCERPT_CHARS = 20, 2000
UNLIMITED = 1 << 60
DIVERGE_WINDOW, DIVERGE_FACTOR = 9, 3.0  # losses in the running median; how far above its floor is divergence
ENDED = ("succeeded", "failed", "cancelled", "sync_failed", "lost")

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]")


def clean(text: str) -> str:
    """Box text without terminal escape sequences and control characters (tab and newline stay)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text)).replace("\r", "")


def first_line(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None


def write_text(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def ended_mark(run_dir: str) -> bool:  # the wrapper recorded an end, or cancel_run a cancel: tick now
    return os.path.exists(os.path.join(run_dir, "exit_code")) or os.path.exists(os.path.join(run_dir, "cancelled"))


def load_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def at_step(step: int | None) -> str:
    return f" at step {step}" if step is not None else ""


def wrapper_alive(run_dir: str, pid: str | None, script: str) -> bool:
    """rgt_alive: the pid is a live (not zombie) process of this boot whose command line names `script`."""
    if not pid or not pid.isdigit() or first_line("/proc/sys/kernel/random/boot_id") != first_line(
            os.path.join(run_dir, "boot_id")):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                return False
    except (OSError, IndexError):
        return False
    return script.encode() in _cmdline(pid)


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def has_orphans(run_dir: str) -> bool:
    """A process of this boot still runs the run's cmd.sh although its wrapper is gone."""
    if first_line("/proc/sys/kernel/random/boot_id") != first_line(os.path.join(run_dir, "boot_id")):
        return False
    needle = f"/{os.path.basename(run_dir)}/cmd.sh".encode()
    return any(needle in _cmdline(pid) for pid in os.listdir("/proc") if pid.isdigit())


def run_state(d: str, young: bool) -> tuple[str, str | None]:
    """The run's state and exit code from its run-dir files, as rgt_state decides (`young`: may still start)."""
    pid, code = first_line(os.path.join(d, "pid")), first_line(os.path.join(d, "exit_code"))
    alive = wrapper_alive(d, pid, os.path.join(d, "wrapper.sh"))
    if os.path.exists(os.path.join(d, "cancelled")) and not alive:
        # A cancel whose processes are still dying is not over yet: the patrol's verdict is sent
        # once, so it waits for them instead of calling the run failed from its exit code 143.
        return ("orphaned", None) if has_orphans(d) else ("cancelled", code)
    if code is not None:
        if code != "0":
            return "failed", code
        if os.path.exists(os.path.join(d, "sync_spec")) and not (first_line(os.path.join(d, "sync_status")) or
                                                                 "").startswith("ok"):
            return "sync_failed", code
        return "succeeded", code
    if alive:
        return "alive", None
    queued = first_line(os.path.join(d, "queued"))
    if not pid and queued:
        qd = os.path.join(os.path.dirname(d), queued)
        if wrapper_alive(qd, first_line(os.path.join(qd, "pid")), os.path.join(qd, "queue.sh")):
            return "queued", None
    if has_orphans(d):
        return "orphaned", None
    if os.path.exists(os.path.join(d, "slurm_job_id")):  # Slurm's: pending, or running on another node
        return "queued", None
    return ("starting" if not pid and young else "lost"), None


class RunWatch:
    """One watched run: its log's read offset, last numbers and escalations."""

    def __init__(self, entry: Any) -> None:
        d = entry.get("dir", "") if isinstance(entry, dict) else str(entry)
        self.dir = os.path.abspath(d)
        self.id = os.path.basename(self.dir)
        total = entry.get("total_steps") if isinstance(entry, dict) else None
        self.total = total if isinstance(total, int) and total > 0 else None
        self.log = os.path.join(self.dir, "log")
        self.offset, self.size, self.grew_at = 0, -1, 0.0
        self.step: int | None = None
        self.loss: float | None = None
        self.best: float | None = None
        self.rate: float | None = None
        self.seen_step: tuple[float, int] | None = None
        self.nan: tuple[int | None] | None = None  # (the step it was first seen at), once seen
        self.recent: list[float] = []  # the last finite losses, for a running median
        self.floor: float | None = None  # the lowest running median so far
        self.diverged: tuple[int | None, float] | None = None  # (step, running median / floor), once seen
        self.state = "starting"
        self.code: str | None = None
        self.done, self.retries = False, 0
        self.end_key: str | None = None
        self.note = load_json(os.path.join(self.dir, "patrol.json"))
        self.escalations: list[dict[str, Any]] = [e for e in self.note.get("escalations", []) if isinstance(e, dict)]

    def read_log(self, now: float) -> None:
        """The new log text since the last tick (at most LOG_CAP bytes, the newest when more came)."""
        try:
            st = os.stat(self.log)
        except OSError:
            return
        if st.st_size != self.size:
            self.grew_at = now if self.size >= 0 else st.st_mtime
            self.size = st.st_size
        if st.st_size < self.offset:
            self.offset = 0  # truncated or replaced
        if st.st_size - self.offset > LOG_CAP:
            self.offset = st.st_size - LOG_CAP
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            data = f.read(LOG_CAP)
        cut = data.rfind(b"\n") + 1 if len(data) < LOG_CAP else len(data)
        self.offset += cut
        for raw in data[:cut].split(b"\n"):
            low = raw.lower()
            if b"loss" in low or b"step" in low or b"iter" in low:
                self.take(*parse_line(clean(raw.decode("utf-8", "replace"))))
        if self.step is not None:  # the rate over the last tick; none when no step was made
            if self.seen_step is not None and now > self.seen_step[0]:
                made = self.step - self.seen_step[1]
                self.rate = made / (now - self.seen_step[0]) if made > 0 else None
            self.seen_step = (now, self.step)

    def take(self, step: int | None, loss: float | None, total: int | None = None) -> None:
        if step is not None:
            self.step = step
        if total and total > 0 and not self.total:
            self.total = total
        if loss is None:
            return
        self.loss = loss
        if not math.isfinite(loss):
            self.nan = self.nan or (self.step,)
            return
        self.best = loss if self.best is None or loss < self.best else self.best
        self.recent = (self.recent + [loss])[-DIVERGE_WINDOW:]
        if len(self.recent) == DIVERGE_WINDOW:  # a median: one lucky dip or one spike decides nothing
            median = sorted(self.recent)[DIVERGE_WINDOW // 2]
            self.floor = median if self.floor is None else min(self.floor, median)
            if self.diverged is None and self.floor > 0 and median > DIVERGE_FACTOR * self.floor:
                self.diverged = (self.step, median / self.floor)

    def describe(self, now: float) -> str:
        parts = [self.id, self.state + ("" if self.code in (None, "0") else f" (exit {self.code})")]
        if self.step is not None:
            extra = []
            if self.rate and self.state == "alive":
                extra.append(f"{self.rate:.3g} step/s")
                if self.total and self.total > self.step:
                    extra.append("ETA " + span((self.total - self.step) / self.rate))
            of = f"/{self.total}" if self.total else ""
            rate = " ({})".format(", ".join(extra)) if extra else ""
            parts.append(f"step {self.step}{of}{rate}")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4g}" + (f" best {self.best:.4g}" if self.best is not None else ""))
        if self.size >= 0 and self.state in ("alive", "orphaned"):
            parts.append(f"log {span(max(0.0, now - self.grew_at))} old")
        return " ".join(parts)

    def tail(self, limit: int) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log) - limit))
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return ""


def cgroup_memory(root: str, pid: str) -> tuple[str, str] | None:
    """The (usage file, limit file) of the memory cgroup of `pid`: v2, else v1."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            base = os.path.join(root, line[3:].lstrip("/"))
            if os.path.isfile(os.path.join(base, "memory.current")):
                return os.path.join(base, "memory.current"), os.path.join(base, "memory.max")
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) == 3 and "memory" in fields[1].split(","):
            base = os.path.join(root, "memory", fields[2].lstrip("/"))
            if os.path.isfile(os.path.join(base, "memory.usage_in_bytes")):
                return os.path.join(base, "memory.usage_in_bytes"), os.path.join(base, "memory.limit_in_bytes")
    return None


def read_memory(source: tuple[str, str] | None) -> tuple[float, float] | None:
    """(used, limit) bytes: the cgroup's working set (usage less inactive file cache) against its limit,
    else the box's (MemTotal - MemAvailable of MemTotal)."""
    if source is not None:
        usage, limit = first_line(source[0]), first_line(source[1])
        if usage and usage.isdigit() and limit and limit.isdigit() and int(limit) < UNLIMITED:
            stat = _numbers(os.path.join(os.path.dirname(source[0]), "memory.stat"), " ")
            inactive = stat.get("inactive_file", stat.get("total_inactive_file", 0))
            return float(max(0, int(usage) - inactive)), float(limit)
    info = _numbers("/proc/meminfo", ":")
    if "MemTotal" not in info or "MemAvailable" not in info:
        return None
    return float(info["MemTotal"] - info["MemAvailable"]) * 1024, float(info["MemTotal"]) * 1024


def _numbers(path: str, sep: str) -> dict[str, int]:
    """The `key<sep> number [unit]` lines of a file ({} when it cannot be read)."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError), open(path) as f:
        for line in f:
            k, _, v = line.partition(sep)
            with contextlib.suppress(ValueError, IndexError):
                found[k] = int(v.split()[0])
    return found


def scan_runs(root: str) -> tuple[int, float | None]:
    """Live runs under <root>/.rgt/runs and the newest end time of the others."""
    live, last_end = 0, None
    try:
        entries = list(os.scandir(os.path.join(root, ".rgt", "runs")))
    except OSError:
        return 0, None
    for e in entries:
        if not e.is_dir() or e.name.startswith("patrol-"):  # a patrol watching is no work on the box
            continue
        ended = first_line(os.path.join(e.path, "ended_at"))
        if ended is None and os.path.exists(os.path.join(e.path, "cancelled")):
            ended = str(int(os.path.getmtime(os.path.join(e.path, "cancelled"))))
        if ended is not None:
            if ended.isdigit() and int(ended) <= time.time():
                last_end = max(last_end or 0.0, float(ended))
        elif run_state(e.path, False)[0] in ("alive", "queued", "orphaned"):
            live += 1
    return live, last_end


def end_report(r: RunWatch, sigs: list[tuple[str, re.Pattern[str], str]]) -> tuple[str, str, str, str | None]:
    """Level, text, next step and log excerpt (failures only, cleaned) of a run that ended."""
    code = r.code if r.code is not None else "-"
    excerpt = None
    nxt = "verify_artifacts and pull the outputs; tear down only after the pull is verified"
    level, text = "info", "succeeded (exit 0)"
    if r.state == "failed":
        level, text = "crit", f"failed with exit code {code}"
        tail = r.tail(SIG_SCAN)
        hit = next(((i, m) for i, p, m in sigs if p.search(tail)), None)
        if hit:
            text += "; signature {}: {}".format(*hit)
        excerpt = "\n".join(clean(tail).splitlines()[-EXCERPT_LINES:])[-EXCERPT_CHARS:]
        nxt = "classify the failure before any retry (never blind-restart); read the log around the error"
    elif r.state == "cancelled":
        text = f"cancelled (exit code {code})"
        nxt = "nothing, if the cancel was yours; otherwise inspect_run"
    elif r.state == "sync_failed":
        level = "crit"
        why = clean(first_line(os.path.join(r.dir, "sync_status")) or "no sync_status was recorded")[:200]
        text = f"exited 0 but its outputs were not copied to the durable root ({why})"
        nxt = "copy the outputs to durable storage before any teardown"
    elif r.state == "lost":
        level, text = "crit", "lost: its wrapper is gone and left no exit code (reboot, OOM kill or a kill)"
        nxt = "inspect_run to tell the causes apart; do not assume an OOM"
    sig = first_line(os.path.join(r.dir, "signalled"))
    if sig and sig.isalpha():
        text += f"; the wrapper received SIG{sig[:8]} (a platform stop or preemption?)"
    return level, text, nxt, excerpt


def kept_outcomes(out: list[Any], channels: list[Any], env: dict[str, str]) -> list[dict[str, Any]]:
    """The sender's outcomes as patrol.json keeps them: channel, status, a cleaned error, secrets masked."""
    secrets = [env[v] for c in channels if isinstance(c, dict) for k, v in c.items()
               if k.endswith("_env") and isinstance(v, str) and env.get(v)]
    kept = []
    for o in out:
        if not isinstance(o, dict):
            continue
        error = str(o.get("error") or "")
        for s in secrets:
            error = error.replace(s, "***")
        kept.append({"channel": clean(str(o.get("channel", "?")))[:40],
                     "status": clean(str(o.get("status", "?")))[:20], "error": clean(error)[:300] or None})
    return kept


def gpu_summary(nvidia: str) -> str | None:
    """`gpu 97% 30.1/80.0 GiB` (utilization averaged, memory summed over the GPUs), or None."""
    try:
        out = subprocess.run([nvidia, "--query-gpu=utilization.gpu,memory.used,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
        rows = [[float(x) for x in line.split(",")] for line in out.splitlines() if line.strip()]
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    rows = [r for r in rows if len(r) == 3]
    if not rows:
        return None
    util = sum(r[0] for r in rows) / len(rows)
    used, total = sum(r[1] for r in rows) / 1024, sum(r[2] for r in rows) / 1024
    count = f"{len(rows)}x " if len(rows) > 1 else ""
    return f"gpu {count}{util:.0f}% {used:.1f}/{total:.1f} GiB"
