"""The box side of a persistent command channel (stdlib only, Python 3.8+; runs ON the box).

SshHost starts this once per connection with `python3 -c`. It reads framed requests on stdin and
runs each in its own process group, concurrently, so a warm command costs one round trip instead
of the three an SSH exec channel needs (open, exec, exit status and close).

Frames, each one JSON line followed by the bytes it announces:
  in:  {"id": n, "script": S, "stdin": I, "timeout": T, "cap": C} + script + stdin
       {"cancel": n}
  out: {"ready": 1, "pid": p}   once, before the first request is read
       {"id": n, "pgid": p}   when the command started
       {"id": n, "o": k} + k bytes of stdout, {"id": n, "e": k} + k bytes of stderr
       {"id": n, "done": status, "sig": signal name or null, "trunc": bool, "timed_out": bool}
End of stdin (the channel closed) kills every command still running, then exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

CHUNK = 256 * 1024
INLINE_MAX = 32 * 1024
DRAIN_S = 5.0  # after a kill, how long output may still arrive from processes that left the group
SHELL = ["bash", "--noprofile", "--norc", "-c"] if any(
    os.access(os.path.join(d, "bash"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d
) else ["sh", "-c"]

_out = sys.stdout.buffer
_out_lock = threading.Lock()
_running: dict[int, subprocess.Popen[bytes]] = {}
_running_lock = threading.Lock()


def send(header: dict[str, Any], body: bytes = b"") -> None:
    data = (json.dumps(header) + "\n").encode() + body
    with _out_lock:
        _out.write(data)
        _out.flush()


def read_exact(stream: IO[bytes], n: int) -> bytes:
    parts = []
    while n > 0:
        part = stream.read(n)
        if not part:
            raise EOFError
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def kill_group(pgid: int) -> None:
    for sig, pause in ((signal.SIGTERM, 0.5), (signal.SIGKILL, 0)):
        try:
            os.killpg(pgid, sig)
        except OSError:
            return
        time.sleep(pause)


class Request:
    def __init__(self, rid: int, cap: int) -> None:
        self.rid = rid
        self.cap = cap
        self.sent = {"o": 0, "e": 0}
        self.trunc = False
        self.closed = False
        self.lock = threading.Lock()

    def forward(self, key: str, stream: IO[bytes]) -> None:
        """Send one output stream as chunks, at most `cap` bytes of it; read the rest to EOF."""
        while True:
            chunk = stream.read1(CHUNK)  # type: ignore[attr-defined]  # a BufferedReader
            if not chunk:
                return
            with self.lock:
                room = self.cap - self.sent[key]
                if room < len(chunk):
                    self.trunc = True
                chunk = chunk[:max(0, room)]
                if chunk and not self.closed:
                    self.sent[key] += len(chunk)
                    send({"id": self.rid, key: len(chunk)}, chunk)


def popen(args: list[str], keep_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=keep_fds, start_new_session=True)


def start(script: str) -> tuple[subprocess.Popen[bytes], IO[bytes] | None]:
    """Start the script in its own process group. A long one is read from a pipe (an argument
    is capped at 128 KiB, and nothing is written to a disk that may be full)."""
    if len(script) <= INLINE_MAX:
        return popen(SHELL + [script], ()), None
    r, w = os.pipe()
    try:
        proc = popen(SHELL + [f". /dev/fd/{r}"], (r,))
    except OSError:
        os.close(w)
        raise
    finally:
        os.close(r)
    return proc, os.fdopen(w, "wb")


def feed(pipe: IO[bytes] | None, data: bytes) -> None:
    if pipe is None:
        return
    try:
        if data:
            pipe.write(data)
        pipe.close()
    except OSError:
        pass  # the command ended without reading all of its stdin


def run(rid: int, script: str, data: bytes, timeout: float, cap: int) -> None:
    req = Request(rid, cap)
    try:
        proc, script_pipe = start(script)
    except OSError as exc:
        send({"id": rid, "e": len(str(exc).encode())}, str(exc).encode())
        send({"id": rid, "done": 127, "sig": None, "trunc": False, "timed_out": False})
        return
    with _running_lock:
        _running[rid] = proc
    send({"id": rid, "pgid": proc.pid})
    workers = [threading.Thread(target=feed, args=(proc.stdin, data), daemon=True)]
    if script_pipe is not None:
        workers.append(threading.Thread(target=feed, args=(script_pipe, script.encode("utf-8", "surrogateescape")),
                                        daemon=True))
    workers += [threading.Thread(target=req.forward, args=(k, s), daemon=True)
                for k, s in (("o", proc.stdout), ("e", proc.stderr))]
    readers = workers[-2:]
    for w in workers:
        w.start()
    # Like an exec channel, a command lasts until its output closes (a child it left behind may
    # hold it); past the deadline its whole group is killed.
    deadline = time.monotonic() + timeout
    timed_out = not finished(proc, readers, deadline)
    if timed_out:
        kill_group(proc.pid)
        finished(proc, readers, time.monotonic() + DRAIN_S)
    with req.lock:
        req.closed = True
    with _running_lock:
        _running.pop(rid, None)
    code = proc.wait()
    sig = signal_name(-code) if code < 0 else None
    send({"id": rid, "done": code, "sig": sig, "trunc": req.trunc, "timed_out": timed_out})


def finished(proc: subprocess.Popen[bytes], readers: list[threading.Thread], deadline: float) -> bool:
    """Wait until the command's output streams closed and it has exited, or the deadline passed.
    The readers first: a thread's join wakes the moment it ends, while Popen.wait with a timeout
    polls with growing sleeps (milliseconds of latency on every command)."""
    for r in readers:
        r.join(max(0.0, deadline - time.monotonic()))
    if any(r.is_alive() for r in readers):
        return False
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def cancel(rid: int) -> None:
    with _running_lock:
        proc = _running.get(rid)
    if proc is not None:
        threading.Thread(target=kill_group, args=(proc.pid,), daemon=True).start()


def main() -> None:
    inp = sys.stdin.buffer
    send({"ready": 1, "pid": os.getpid()})
    try:
        while True:
            line = inp.readline()
            if not line:
                break
            head = json.loads(line)
            if "cancel" in head:
                cancel(head["cancel"])
                continue
            script = read_exact(inp, head["script"]).decode("utf-8", "surrogateescape")
            data = read_exact(inp, head["stdin"])
            threading.Thread(target=run, args=(head["id"], script, data, head["timeout"], head["cap"]),
                             daemon=True).start()
    except (EOFError, ValueError, KeyError):
        pass
    with _running_lock:
        left = list(_running.values())
    for proc in left:
        kill_group(proc.pid)


if __name__ == "__main__":
    main()
