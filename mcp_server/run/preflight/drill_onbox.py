"""The preflight drill as it runs on the box, under the launch wrapper like any run: it starts the
user's command, watches its checkpoints, stops it the way a platform does and starts it again,
and records what it saw in `$RGT_RUN_DIR/preflight/drill.json`. It judges nothing: the server
reads the record and the outputs and gives the verdict (preflight/judge.py).

Standard library only, Python 3.8 or newer: this file is copied to the box and run by whatever
python3 the box has, never imported by the server.

Attempts (each the same command, in the same working directory):
  1 smoke   runs until it has saved twice and half a save interval more (or exits, or time is up),
            then gets the platform stop: SIGTERM (USR1 first when asked), grace, SIGKILL.
  2 drill   starts again; killed with SIGKILL the moment a save is seen under way (a preemption
            that lands mid-write); the checkpoints it touched are copied aside for the server's
            content check.
  3 resume  starts again and runs to its end (or time is up, then the platform stop).
  4 again   only when 3 finished: starts once more; a run that is done should not redo its work.
Stdout and stderr of each attempt are kept apart, with the time each line arrived."""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

POLL_S = 0.05
SAVE_GAP = 0.5  # seconds without a write that end one in-place save
LINE_MAX = 64 * 1024  # bytes of one output line kept as one line
LINES_MAX = 5000  # per stream and attempt: arrival times recorded (the bytes are all kept)
TREE_MAX = 200000  # entries walked when sizing the working directory
COPY_MAX = 64 * 1024 * 1024  # checkpoint bytes copied aside after the mid-save kill
STAGING = (".tmp", ".partial", ".incomplete", ".part", ".temp", ".rgt-tmp")
DEFAULT_GLOBS = ("*.pt", "*.pth", "*.ckpt", "*.safetensors", "*.bin", "checkpoint-*", "last.ckpt")
SIGNALS = {"TERM": signal.SIGTERM, "USR1": signal.SIGUSR1, "INT": signal.SIGINT}

T0 = time.monotonic()
SHELL = shutil.which("bash") or "/bin/sh"


def now() -> float:
    return round(time.monotonic() - T0, 3)


def say(text: str) -> None:
    sys.stdout.write("rgt-preflight: " + text + "\n")
    sys.stdout.flush()


def write_json(path: str, obj: object) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def unstaged(name: str) -> str | None:
    """The final name a staging file stands for (`last.pt.tmp` -> `last.pt`, `tmp-checkpoint-20`
    -> `checkpoint-20`), or None for a name that is no staging file."""
    low = name.lower()
    for suffix in STAGING:
        if low.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    for prefix in ("tmp-", "tmp_", ".tmp-", ".tmp_"):
        if low.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return None


def tree_size(root: str, limit: int = TREE_MAX) -> tuple[int, int, bool]:
    """Bytes and entries under `root` (symlinks not followed); True when the walk stopped at `limit`."""
    size = count = 0
    for base, dirs, files in os.walk(root):
        for name in files + dirs:
            count += 1
            if count > limit:
                return size, count, True
            if name in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(base, name)).st_size
    return size, count, False


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of the group is left: a job's shell may die of a signal
    its python child ignores, and the child goes on writing checkpoints."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
        except OSError:
            return False
        return True
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            return True
    return False


def running(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None or group_alive(proc.pid)


class Watcher:
    """The checkpoint units under the working directory (a file, or a folder such as HF's
    checkpoint-N/ taken whole) and the staging files beside them, compared poll by poll."""

    def __init__(self, cwd: str, globs: list[str], depth: int = 4) -> None:
        self.cwd, self.globs, self.depth = cwd, globs, depth
        self.seen: dict[str, list[Any]] = {}
        self.events: list[list[Any]] = []
        self.truncated = False

    def _match(self, rel: str, name: str) -> bool:
        return any(fnmatch.fnmatch(rel, g) or ("/" not in g and fnmatch.fnmatch(name, g)) for g in self.globs)

    def _unit(self, path: str, is_dir: bool) -> list[Any]:
        st = os.lstat(path)
        if not is_dir:
            return [0, st.st_size, st.st_ino, st.st_mtime_ns, 1]
        size = files = 0
        mtime = st.st_mtime_ns
        for base, _dirs, names in os.walk(path):
            for name in names:
                try:
                    s = os.lstat(os.path.join(base, name))
                except OSError:
                    continue
                size += s.st_size
                files += 1
                mtime = max(mtime, s.st_mtime_ns)
        return [1, size, st.st_ino, mtime, files]

    def scan(self) -> dict[str, list[Any]]:
        found: dict[str, list[Any]] = {}
        entries = 0
        stack = [(self.cwd, 0)]
        while stack:
            base, level = stack.pop()
            try:
                listing = list(os.scandir(base))
            except OSError:
                continue
            for e in listing:
                entries += 1
                if entries > 50000:
                    self.truncated = True
                    return found
                rel = os.path.relpath(e.path, self.cwd)
                is_dir = e.is_dir(follow_symlinks=False)
                try:
                    bare = unstaged(e.name)
                    if bare is not None and self._match(os.path.join(os.path.dirname(rel), bare), bare):
                        found[rel] = self._unit(e.path, is_dir) + [1]
                        continue
                    if bare is None and self._match(rel, e.name):
                        found[rel] = self._unit(e.path, is_dir) + [0]
                        continue
                except OSError:
                    continue
                if is_dir and level < self.depth and not e.name.startswith((".git", "__pycache__", ".venv")):
                    stack.append((e.path, level + 1))
        return found

    def poll(self, attempt: int) -> list[list[Any]]:
        """New events since the last poll: appear, change (same inode: written in place), replace
        (a new inode under the name: an atomic rename), remove."""
        cur = self.scan()
        new: list[list[Any]] = []
        t = now()
        for rel, u in cur.items():
            old = self.seen.get(rel)
            if old is None:
                kind = "appear"
            elif old[2] != u[2]:
                kind = "replace"
            elif old[1] != u[1] or old[3] != u[3] or old[4] != u[4]:
                kind = "change"
            else:
                continue
            new.append([t, attempt, kind, rel, u[0], u[1], u[4], u[5]])
        for rel, u in self.seen.items():
            if rel not in cur:
                new.append([t, attempt, "remove", rel, u[0], u[1], u[4], u[5]])
        self.seen = cur
        self.events.extend(new)
        return new


class Reader(threading.Thread):
    """One stream of the child: bytes to a file, the arrival time of each line to a list."""

    def __init__(self, stream: IO[bytes], path: str) -> None:
        super().__init__(daemon=True)
        self.stream, self.path = stream, path
        self.lines: list[list[Any]] = []

    def run(self) -> None:
        offset = 0
        with open(self.path, "wb") as out:
            while True:
                line = self.stream.readline(LINE_MAX)
                if not line:
                    break
                out.write(line)
                out.flush()
                offset += len(line)
                if len(self.lines) < LINES_MAX:
                    self.lines.append([offset, now()])


class Drill:
    def __init__(self, spec: dict[str, Any], out_dir: str) -> None:
        self.spec, self.out = spec, out_dir
        self.cwd = os.getcwd()
        self.watch = Watcher(self.cwd, spec.get("checkpoints") or list(DEFAULT_GLOBS))
        self.attempts: list[dict[str, Any]] = []
        self.after_kill: list[str] = []
        self.notes: list[str] = []
        self.deadline = time.monotonic() + float(spec.get("total_s", 900))
        self.record = {"version": 1, "cwd": self.cwd, "attempts": self.attempts, "events": self.watch.events,
                       "after_kill": self.after_kill, "notes": self.notes, "done": False,
                       "python": sys.version.split()[0], "spec": spec}

    def env(self) -> dict[str, Any]:
        env = dict(os.environ)
        for name in ("RGT_RUN_DIR", "RGT_RUN_ID", "RGT_PREFLIGHT_SPEC"):
            env.pop(name, None)
        env.update(self.spec.get("env") or {})
        return env

    def save(self) -> None:
        self.record["watch_truncated"] = self.watch.truncated
        write_json(os.path.join(self.out, "drill.json"), self.record)

    def stop(self, proc: subprocess.Popen[bytes], a: dict[str, Any], reason: str) -> None:
        """The platform's stop: the first signal(s), a grace period each, then SIGKILL."""
        grace = float(self.spec.get("grace_s", 10))
        order = ["USR1", "TERM"] if self.spec.get("signal") == "USR1" else ["TERM"]
        a["stop_reason"] = reason
        for name in order:
            a["signals"].append([name, now()])
            say(f"attempt {a['n']}: sending SIG{name} ({reason}); grace {grace:g} s")
            try:
                os.killpg(proc.pid, SIGNALS[name])
            except OSError:
                return
            end = time.monotonic() + grace
            while time.monotonic() < end:
                if not running(proc):
                    return
                self.watch.poll(a["n"])
                time.sleep(POLL_S)
        a["signals"].append(["KILL", now()])
        a["escalated"] = True
        say(f"attempt {a['n']}: still running after the grace period: SIGKILL")
        self.kill(proc)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)

    def newest(self) -> list[str]:
        """The final checkpoint unit written last, as the watcher saw it."""
        finals = [(u[3], rel) for rel, u in self.watch.seen.items() if u[5] == 0]
        return [max(finals)[1]] if finals else []

    def copy_aside(self, rels: list[str]) -> None:
        """The checkpoints a mid-save kill touched, as the kill left them, for the content check."""
        budget = COPY_MAX
        dest = os.path.join(self.out, "after_kill")
        for rel in rels:
            src = os.path.join(self.cwd, rel)
            if not os.path.lexists(src) or os.path.islink(src):
                continue
            size = tree_size(src)[0] if os.path.isdir(src) else os.lstat(src).st_size
            if size > budget:
                self.notes.append(f"after_kill: {rel} ({size} bytes) too big to keep aside")
                continue
            budget -= size
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(src, target, symlinks=True)
            else:
                shutil.copy2(src, target)
            self.after_kill.append(rel)

    def follow(self, proc: subprocess.Popen[bytes], a: dict[str, Any]) -> None:
        """Watch one attempt until it ends or its purpose says stop: the smoke after two saves and
        half an interval, the drill at the first write of a save, any attempt at its time limit."""
        n, purpose = a["n"], a["purpose"]
        limit = min(time.monotonic() + float(self.spec.get("attempt_s", 120)), self.deadline)
        saves: list[float] = []
        last_write = 0.0
        sizes = {rel: u[1] for rel, u in self.watch.seen.items()}
        while running(proc):
            time.sleep(POLL_S)
            writing = [e for e in self.watch.poll(n) if e[2] != "remove"]
            if time.monotonic() > limit:
                self.stop(proc, a, "time limit")
                return
            if purpose == "drill" and writing:
                a["signals"].append(["KILL", now()])
                a["mid_save_kill"] = {"during_write": any(e[2] == "change" or e[7] == 1 for e in writing),
                                      "touched": sorted({e[3] for e in writing}), "t": now()}
                say(f"attempt {n}: a save is under way: SIGKILL")
                self.kill(proc)
                proc.wait()
                self.copy_aside(sorted({e[3] for e in writing if e[7] == 0} | set(self.newest())))
                return
            finals = [e for e in writing if e[7] == 0]
            # A save begins with a name appearing or replaced, a file cut short to be rewritten, or
            # a write after a pause; growth in place continues one.
            if any(e[2] != "change" or e[5] < sizes.get(e[3], 0) for e in finals) or (
                    finals and finals[0][0] - last_write > SAVE_GAP):
                saves.append(finals[0][0])
            sizes.update({e[3]: e[5] for e in finals})
            last_write = finals[-1][0] if finals else last_write
            if purpose == "smoke" and len(saves) >= 2 and now() - saves[-1] >= 0.5 * (saves[-1] - saves[-2]):
                self.stop(proc, a, "two saves seen")
                return

    def attempt(self, n: int, purpose: str) -> dict[str, Any]:
        a: dict[str, Any] = {"n": n, "purpose": purpose, "started": now(), "signals": [], "escalated": False,
             "exit_code": None, "stop_reason": None, "mid_save_kill": None, "tree_start": tree_size(self.cwd)[:2]}
        self.attempts.append(a)
        say(f"attempt {n} ({purpose}) started")
        self.watch.poll(n)
        # bash -c runs a lone command in its own process (exec), so its exit code and signals are the job's
        proc = subprocess.Popen([SHELL, "-c", self.spec["command"]], cwd=self.cwd, env=self.env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        readers = [Reader(proc.stdout, os.path.join(self.out, f"a{n}.out")),
                   Reader(proc.stderr, os.path.join(self.out, f"a{n}.err"))]
        for r in readers:
            r.start()
        self.follow(proc, a)
        proc.wait()
        for r in readers:
            r.join(timeout=3)
        self.watch.poll(n)
        a["exit_code"] = proc.returncode
        a["ended"] = now()
        a["out_lines"], a["err_lines"] = readers[0].lines, readers[1].lines
        a["tree_end"] = tree_size(self.cwd)[:2]
        say(f"attempt {n} ({purpose}) ended: exit {proc.returncode}")
        self.save()
        return a

    def run(self) -> None:
        self.save()
        first = self.attempt(1, "smoke")
        if not self.newest():
            self.notes.append("no checkpoint appeared in the smoke run: the drill did not run")
        elif first["signals"]:
            second = self.attempt(2, "drill")
            if second["exit_code"] == 0:  # it reached its end before any save could be interrupted
                self.notes.append("attempt 2 ran to its end before a save could be interrupted")
                self.attempt(4, "again")
            else:
                third = self.attempt(3, "resume")
                if third["exit_code"] == 0 and not third["signals"] and time.monotonic() < self.deadline:
                    self.attempt(4, "again")
        elif first["exit_code"] == 0:
            self.notes.append("the smoke run finished before it could be stopped after two saves")
            self.attempt(4, "again")
        self.record["done"] = True
        self.save()
        say("done")


def main() -> int:
    spec = json.loads(base64.b64decode(os.environ["RGT_PREFLIGHT_SPEC"]).decode())
    out = os.path.join(os.environ["RGT_RUN_DIR"], "preflight")
    os.makedirs(out, exist_ok=True)
    Drill(spec, out).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
