"""tail_logs: an incremental, seek-based log read plus the run's real status.

Cost is flat in log size: the box seeks (`tail -c +N | head -c M`), and only the window
(plus a 64 KiB tail for signatures) crosses the wire. Offsets are byte offsets; a window
never ends inside a UTF-8 character, so consecutive calls lose and duplicate nothing."""

from __future__ import annotations

import os
import secrets as _secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server import untrusted
from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.paths import policy
from mcp_server.paths.policy import Scope, box_scope
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines import ENGINES, own_state
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.patrol_note import PatrolNote, read_note
from mcp_server.run.jobs.rundir import RunRecordSummary, check_run_id, run_dir_path
from mcp_server.run.jobs.signatures import SignatureHit, progress_hint, scan
from mcp_server.run.jobs.status import ENDED, FINISHED, STATE_FUNCS, RunState, lost_evidence, parse_state
from mcp_server.settings import OUTPUT_CAP_BYTES

MAX_WINDOW = 256 * 1024
SIGNATURE_TAIL = 64 * 1024
DEFAULT_STALL_S = 900
# Context read around a window so a secret straddling its edge is masked; at least this much,
# since a fresh server learns a run's secrets from run.json in the same round trip.
MIN_MARGIN = 256
MAX_OFFSET = 2**53  # beyond any log; keeps the box's shell arithmetic in range


class TailResult(BaseModel):
    host: str
    run_id: str | None
    path: str
    state: RunState | None = Field(description="None when reading a bare path (no run to judge)")
    text: str = Field(description="the window as in the file (partial last line kept), secrets masked and "
                      "terminal escape sequences removed; " + untrusted.NOTE)
    offset: int = Field(description="byte offset where `text` starts")
    next_offset: int = Field(description="pass this as `offset` next time to continue with no gap or overlap")
    size: int
    eof: bool = Field(description="true when the window reaches the end of the log")
    truncated: bool = Field(description="true when more bytes follow the window (call again with next_offset)")
    log_reset: bool = Field(description="the log is shorter than the offset asked: truncated or rotated; read from 0")
    last_write_utc: str | None
    seconds_since_write: float | None
    stall_warning: str | None = None
    progress: str | None = None
    signatures: list[SignatureHit]
    read_under: str | None = Field(default=None, description="the host's log_roots entry that alone allowed this "
                                   "read (recorded in the ledger)")
    patrol: PatrolNote | None = Field(default=None, description="what an on-box patrol watching the run last wrote")


def utf8_safe_len(data: bytes) -> int:
    """Length of the longest prefix that does not end inside a UTF-8 sequence."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 == 0x80:
            continue
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return n - back if need > back else n
    return n


def _script(log_word: str, run_dir_word: str | None, offset: int | None, max_bytes: int, nonce: str,
            margin: int, words: list[str]) -> str:
    start = "" if offset is None else str(int(offset))
    return job_script("job_tail", log_word, run_dir_word or quote(""), quote(start), quote(str(int(max_bytes))),
                      quote(nonce), quote(str(SIGNATURE_TAIL)), quote(str(margin)), *words,
                      # a bare log path needs no run-state functions (less for the box's shell to read)
                      libraries=(STATE_FUNCS, policy.library()) if run_dir_word else (policy.library(),))


def readable_roots(spec: HostSpec) -> list[str]:
    """Where tail_logs may read on this box: the durable and scratch roots (run dirs live under
    the durable root) and the inventory's log_roots. Anything else, and credential files
    anywhere, is refused."""
    return list(dict.fromkeys((spec.durable_root, spec.scratch_root, *spec.log_roots)))


def log_scope(spec: HostSpec, *, own_log: bool) -> Scope:
    """The path policy's scope for a log: the readable roots; a bare path also keeps out of the
    server's own folders (box.env, manifests), while a run's own log (`own_log`) lies in one."""
    return box_scope(spec.durable_root, readable_roots(spec), "the roots tail_logs reads",
                     this_machine=spec.kind == "local", control=not own_log,
                     widen="write the log under one of those roots, or list its directory in the host's "
                           "log_roots (inventory)")


def _refusal(head: bytes, spec: HostSpec, scope: Scope, what: str) -> None:
    """Raise when the box's path policy refused the read (the script's RGT-DENIED / RGT-OUTSIDE line)."""
    marks = ("RGT-DENIED", "RGT-OUTSIDE")
    lines = [ln for ln in head.decode("utf-8", "replace").splitlines() if ln.startswith(marks)]
    if lines:
        raise policy.refusal(lines[0], what=what, host=spec.name, scope=scope, done="nothing was read")


@dataclass(frozen=True)
class _Read:
    """The script's byte sections: the window, the context around it (for redaction) and the
    log's last bytes (for the signatures)."""

    window: bytes
    before: bytes
    after: bytes
    tail: bytes


def _split(out: bytes, nonce: str) -> tuple[dict[str, str], _Read]:
    r, t, e = (f"@@{c}{nonce}\n".encode() for c in "RTE")
    head, _, rest = out.partition(r)
    read, _, rest = rest.partition(t)
    tail, _, _ = rest.partition(e)
    kv: dict[str, str] = {}
    dmesg = []
    for line in head.decode("utf-8", "replace").splitlines():
        k, sep, v = line.partition("=")
        if k == "dmesg":
            dmesg.append(v)
        elif sep:
            kv[k] = v
    kv["_dmesg"] = "\n".join(dmesg)
    # One read holds the context before the window, the window and the context after it.
    bl, wl = _int(kv.get("before")), _int(kv.get("len"))
    return kv, _Read(read[bl:bl + wl], read[:bl], read[bl + wl:], tail)


def _int(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


async def tail_logs(
    host: Host, spec: HostSpec, *, redactor: Redactor, run_id: str | None = None, path: str | None = None,
    offset: int | None = None, max_bytes: int = OUTPUT_CAP_BYTES, lines: int | None = None,
    stall_s: float = DEFAULT_STALL_S,
) -> TailResult:
    """Read a run's log (or any log path) incrementally, with status and signatures."""
    if (run_id is None) == (path is None):
        raise InputError("give exactly one of run_id or path", next_step="run_id from launch_detached/list_runs")
    if not 1 <= max_bytes <= MAX_WINDOW:
        raise InputError("max_bytes out of range", observed=max_bytes, expected=f"1..{MAX_WINDOW}")
    if offset is not None and not 0 <= offset <= MAX_OFFSET:
        raise InputError("offset out of range", observed=offset, expected=f"0..{MAX_OFFSET} (a next_offset)")
    run_dir = path_word(run_dir_path(spec.durable_root, check_run_id(run_id)), "run dir") if run_id else None
    log_word = f"{run_dir}/log" if run_dir else path_word(path or "", "path")
    window = _Window(log_word, run_dir, None if (lines or offset is None) else offset, max_bytes, lines, stall_s)
    result, record = await _read_window(host, spec, redactor, run_id, path, window)
    if run_id and own_state(record.backend):  # a queued Slurm job has no local process: ask the queue
        (state,) = await ENGINES[record.backend or ""].status(host, [run_dir_path(spec.durable_root, run_id)])
        if state.status in ENDED and (result.state is None or result.state.status not in RECORDED):
            # It ended between the log read (no exit file yet) and the queue's answer: read again,
            # so the text holds the run's last lines (a state newer than its log would hide them).
            result, record = await _read_window(host, spec, redactor, run_id, path, window)
        result.state = state
    return result


# What a run dir proves by itself (an exit file or a cancel record): its log is complete then.
RECORDED = (*FINISHED, "cancelled")


@dataclass(frozen=True)
class _Window:
    """What one tail_logs call reads: the log (a run's, or a path), where, how much."""

    log_word: str
    run_dir: str | None
    offset: int | None
    max_bytes: int
    lines: int | None
    stall_s: float


async def _read_window(host: Host, spec: HostSpec, redactor: Redactor, run_id: str | None, path: str | None,
                       w: _Window) -> tuple[TailResult, RunRecordSummary]:
    """One round trip: the run's state as its dir says, the window, the log's end (signatures)."""
    nonce = _secrets.token_hex(8)
    scope = log_scope(spec, own_log=run_id is not None)
    res = await host.run(_script(w.log_word, w.run_dir, w.offset, w.max_bytes, nonce,
                                 max(redactor.margin, MIN_MARGIN), scope.words()),
                         timeout=25, max_output=MAX_WINDOW + SIGNATURE_TAIL + 65536)
    if res.stdout.startswith(b"RGT-NORUN"):
        raise NotFoundError(f"no run {run_id} under this box's durable root", host=spec.name,
                            path=spec.durable_root, next_step="list_runs shows the runs on the box")
    head = res.stdout.partition(f"@@R{nonce}".encode())[0]
    _refusal(head, spec, scope, "path" if path is not None else "run_id's log")
    if b"RGT-NOLOG" in head:
        raise NotFoundError("log file not found", host=spec.name, path=path or f"run {run_id}")
    kv, read = _split(res.stdout, nonce)
    record = _learn_secrets(kv.get("runjson", ""), redactor)
    result = _result(spec, run_id, path or f"{spec.durable_root}/.rgt/runs/{run_id}/log", kv, read,
                     w.lines, w.stall_s, redactor)
    return result, record


def _learn_secrets(runjson_b64: str, redactor: Redactor) -> RunRecordSummary:
    """A new server instance redacts the run's secrets too: their names are in run.json."""
    record = RunRecordSummary.from_base64(runjson_b64)
    for n in record.secret_env_names:
        if n in os.environ:
            redactor.add(os.environ[n])
    return record


def _cut(read: _Read, start: int, lines: int | None) -> tuple[int, bytes, bytes, bytes]:
    """The window as returned (whole UTF-8 characters; its last `lines` lines when asked), its
    start offset, and the bytes before and after it."""
    keep = utf8_safe_len(read.window) or len(read.window)
    window, before, after = read.window[:keep], read.before, read.window[keep:] + read.after
    if lines is not None:
        kept = b"".join(window.splitlines(keepends=True)[-lines:])
        dropped = len(window) - len(kept)
        start, before, window = start + dropped, before + window[:dropped], kept
    return start, window, before, after


def _result(spec: HostSpec, run_id: str | None, path: str, kv: dict[str, str], read: _Read,
            lines: int | None, stall_s: float, redactor: Redactor) -> TailResult:
    size = int(kv.get("size", "0"))
    start, window, before, after = _cut(read, int(kv.get("start", "0")), lines)
    tail = read.tail
    next_offset = start + len(window)
    state = None
    if run_id is not None and "state" in kv:
        state = parse_state(kv["state"])
        if state.status == "lost":
            state.evidence += lost_evidence(kv, [x for x in kv.get("_dmesg", "").splitlines() if x])
    mtime, now = float(kv.get("mtime", "0") or 0), float(kv.get("now", "0") or 0)
    age = max(0.0, now - mtime) if mtime else None
    stall = None
    if state is not None and state.status == "running" and age is not None and age > stall_s:
        stall = (f"the log has not grown for {age / 60:.0f} min while the process is alive: hung, stuck on data, "
                 "or block-buffered stdout (PYTHONUNBUFFERED/python -u); check GPU utilisation and checkpoint mtimes")
    text = untrusted.clean(redactor.scrub_window(before, window, after))
    scan_text = redactor.scrub((tail or window).decode("utf-8", "replace"))
    hits = {h.id: h for h in scan(scan_text) + (scan(text) if tail else [])}
    return TailResult(
        host=spec.name, run_id=run_id, path=path, state=state, text=text, offset=start, next_offset=next_offset,
        size=size, eof=next_offset >= size, truncated=next_offset < size, log_reset=kv.get("reset") == "1",
        last_write_utc=datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds") if mtime else None,
        seconds_since_write=age, stall_warning=stall, progress=progress_hint(scan_text),
        signatures=sorted(hits.values(), key=lambda h: h.line_no or 0),
        read_under=spec.widening(readable_roots(spec), int(kv["under"]) if kv.get("under", "").isdigit() else None),
        patrol=read_note(kv.get("patrol", "")),
    )
