"""The on-box patrol (knowledge run.md §3.3 L2, §3.5, §3.6): a bounded, read-only watcher that
runs on the box itself, so someone is watching when no agent session is. Every tick it prints
one status line (even when nothing changed), writes `<run dir>/patrol.json` for each watched run
and `<state_dir>/box.json`, and escalates each event once (by key) through notify_onbox.send.
Between ticks it samples memory and disk every `sample_s` seconds into bounded rings.

Standard library only, Python 3.8 or newer: this file is copied to the box beside
notify_onbox.py and run by whatever python3 the box has, never imported by the server.
Spec: JSON, base64 in env RGT_PATROL_SPEC, or a file path as argv[1] (keys and defaults in
DEFAULTS; a threshold of 0 or null turns its alarm off; `cgroup_root` is for tests).

It never restarts, kills or edits what it watches: a run's state comes from the run-dir files
the way job_state.sh's rgt_state reads them, never from the log; log text reaches a message
only as a cleaned excerpt. It stops at `lifetime_s`, on a `stop` file in its state dir, on
SIGTERM, or (when it watches runs) once every run has ended and its last report was sent."""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

try:
    from . import patrol_reads_onbox as reads  # in the package (the server's tests)
except ImportError:  # on the box, where the files sit side by side (also under python -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import patrol_reads_onbox as reads  # type: ignore[no-redef, import-not-found]

FILES = ("patrol_onbox.py", "patrol_reads_onbox.py", "patrol_parse_onbox.py")  # what goes to the box

KEEP_ESCALATIONS = 50
MEM_WINDOW_S, DISK_WINDOW_S = 600.0, 1800.0
MEM_TREND_FLOOR = 0.5  # a memory trend alarms only past half the limit: loading a model is no creep
FINAL_RETRY_TICKS = 3  # ticks that retry a run's failed end notification before the patrol stops
STARTING_GRACE_S = 120.0  # a run dir without a pid this long after the patrol started is lost
OFF_PEAK_MIN_INTERVAL_S = 120.0  # shorter intervals (tests) are not moved off :00/:30
ETA_SHOWN_S = 3 * 86400.0  # a disk fill ETA further out says nothing
DEFAULTS: dict[str, Any] = {
    "host": "box", "runs": [], "interval_s": 600, "jitter_s": 60, "sample_s": 5, "lifetime_s": 604800,
    "stall_s": 1800, "disk_pct": 95, "disk_eta_h": 2, "mem_pct": 90, "idle_s": None, "price_per_hour": None,
    "channels": [], "signatures": [], "state_dir": None, "cgroup_root": "/sys/fs/cgroup"}


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def cpu_seconds() -> float:
    """CPU time of this process and the children it waited for (nvidia-smi)."""
    t = os.times()
    return round(t[0] + t[1] + t[2] + t[3], 3)


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def load_notify() -> Callable[..., list[dict[str, Any]]] | None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        send = importlib.import_module("notify_onbox").send
    except (ImportError, AttributeError):
        return None
    return send if callable(send) else None


class Patrol:
    def __init__(self, spec: dict[str, Any], env: dict[str, str]) -> None:
        self.spec = dict(DEFAULTS, **spec)
        self.env = env
        self.host = reads.clean(str(self.spec["host"]))[:80]
        self.root = str(self.spec["durable_root"])
        self.state_dir = str(self.spec["state_dir"] or os.path.join(self.root, ".rgt", "patrol"))
        os.makedirs(self.state_dir, exist_ok=True)
        with contextlib.suppress(OSError):  # a stop file left for an earlier patrol is not for this one
            os.remove(os.path.join(self.state_dir, "stop"))
        self.runs = [reads.RunWatch(e) for e in self.spec["runs"]]
        self.started = time.time()
        self.cpu_start = cpu_seconds()
        self.deadline = time.monotonic() + float(self.spec["lifetime_s"])
        self.box = reads.load_json(os.path.join(self.state_dir, "box.json"))
        self.box_escalations: list[dict[str, Any]] = [e for e in self.box.get("escalations", [])
                                                      if isinstance(e, dict)]
        self.keys = {e.get("key") for r in self.runs for e in r.escalations} | {
            e.get("key") for e in self.box_escalations}
        self.mem, self.disk = reads.Ring(), reads.Ring()
        self.inodes: tuple[float, float] | None = None
        self.mem_source: tuple[str, str] | None = reads.cgroup_memory(self.spec["cgroup_root"], "self")
        self.last_live: float | None = None
        self.idle_since: float | None = None
        self.notify_failed: list[str] = []
        self.ticks = self.samples = 0
        self.stopping: str | None = None
        self.notify = load_notify()
        self.nvidia = shutil.which("nvidia-smi")
        self.sigs = []
        for row in self.spec["signatures"]:
            try:
                self.sigs.append((str(row[0]), re.compile(str(row[1]), re.M), str(row[2])))
            except (re.error, IndexError, TypeError):
                continue  # a pattern this python cannot compile is left out, not fatal

    def run(self) -> str:
        channels = self.spec["channels"]
        say("{} # patrol started: {}, every {} s, for at most {} s{}".format(
            stamp(time.time()), ", ".join(r.id for r in self.runs) or f"whole box ({self.host})",
            self.spec["interval_s"], self.spec["lifetime_s"],
            "" if self.notify or not channels else "; notifications are off (notify_onbox.py is absent)"))
        next_tick = time.monotonic()
        while True:
            if time.monotonic() >= next_tick:
                self.tick()
                if self.stopping is None and self.runs and all(r.done for r in self.runs):
                    self.stopping = "every watched run has ended and its last report was sent"
                next_tick = time.monotonic() + self.next_gap()
            if self.stopping is None and time.monotonic() >= self.deadline:
                self.stopping = "its lifetime ({} s) is over".format(self.spec["lifetime_s"])
            if self.stopping is None and os.path.exists(os.path.join(self.state_dir, "stop")):
                self.stopping = "a stop file was found in its state dir"
            if self.stopping is not None:
                break
            time.sleep(max(0.0, min(float(self.spec["sample_s"]), next_tick - time.monotonic(),
                                    self.deadline - time.monotonic())))
            self.sample()
            if any(not r.done and reads.ended_mark(r.dir) for r in self.runs):
                next_tick = time.monotonic()  # a run's end is reported at once, not at the next tick
        say(f"{stamp(time.time())} # patrol stops: {self.stopping}")
        self.save(time.time())
        return self.stopping

    def next_gap(self) -> float:
        """The interval plus jitter, moved off the :00 and :30 minutes where platform load peaks."""
        interval = float(self.spec["interval_s"])
        gap = interval + random.uniform(0, float(self.spec["jitter_s"] or 0))
        if interval >= OFF_PEAK_MIN_INTERVAL_S:
            at = time.time() + gap
            if time.gmtime(at).tm_min % 30 == 0:
                gap += 60 - at % 60 + random.uniform(5, 50)
        return gap

    def sample(self) -> None:
        t = time.time()
        self.samples += 1
        mem = reads.read_memory(self.mem_source)
        if mem is not None:
            self.mem.add(t, mem[0], mem[1])
        try:
            st = os.statvfs(self.root)
        except OSError:
            return
        used, free = (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize
        if used + free > 0:
            self.disk.add(t, float(used), float(used + free))
        if st.f_files:
            self.inodes = (float(st.f_files - st.f_ffree), float(st.f_files))

    def tick(self) -> None:
        now = time.time()
        self.ticks += 1
        self.notify_failed = []
        for r in self.runs:
            if not r.done:
                self.check_run(r, now)
        self.retry_ends()
        alive = [r for r in self.runs if r.state == "alive"]
        pids = [reads.first_line(os.path.join(r.dir, "pid")) for r in alive]
        source = reads.cgroup_memory(self.spec["cgroup_root"], (pids[0] if pids else None) or "self")
        if source != self.mem_source:  # a trend across two sources means nothing
            self.mem_source, self.mem = source, reads.Ring()
        self.sample()
        parts = ["; ".join(r.describe(now) for r in self.runs) or self.idle_part(now)]
        parts += [p for p in (self.disk_part(), self.mem_part(), self.gpu_part()) if p]
        if self.notify_failed:
            parts.append("notify failed: " + ", ".join(self.notify_failed) + " (escalations kept in patrol.json)")
        self.line = "{} {} {}".format(stamp(now), "" if self.runs else self.host, " | ".join(parts))
        self.line = self.line.replace("  ", " ")
        say(self.line)
        self.save(now)

    def check_run(self, r: reads.RunWatch, now: float) -> None:
        r.state, r.code = reads.run_state(r.dir, time.time() - self.started < STARTING_GRACE_S)
        with contextlib.suppress(OSError):
            r.read_log(now)
        see = f"tail_logs host={self.host} run_id={r.id}"
        if r.nan is not None:
            self.escalate("nan:" + r.id, "nan", "crit", r, f"{r.id}: non-finite loss", "the loss became non-finite"
                          + reads.at_step(r.nan[0]), "check precision (fp16/bf16, GradScaler), learning rate and "
                          "warmup, and the data; never blind-restart", see)
        if r.diverged is not None:
            self.escalate("diverged:" + r.id, "diverged", "warn", r, f"{r.id}: loss diverging", "the loss's running "
                          f"median is {r.diverged[1]:.1f}x its lowest" + reads.at_step(r.diverged[0]),
                          "look at the curve (plot_run); a lower learning rate, or the last good checkpoint", see)
        if r.state in reads.ENDED:
            self.end_run(r, see)
            return
        stall = float(self.spec["stall_s"])
        if r.state == "alive" and stall and r.size >= 0 and now - r.grew_at >= stall:
            self.escalate(f"stalled:{r.id}:{int(r.grew_at)}", "stalled", "warn", r, f"{r.id}: stalled",
                          f"alive, but its log has not grown for {reads.span(now - r.grew_at)}",
                          "compare checkpoint mtimes and GPU use (block-buffered stdout looks like a hang: "
                          "python -u); classify before acting, never blind-restart", see)

    def end_run(self, r: reads.RunWatch, see: str) -> None:
        level, text, nxt, excerpt = reads.end_report(r, self.sigs)
        r.end_key = f"ended:{r.id}:{r.state}"
        self.escalate(r.end_key, r.state, level, r, f"{r.id} {r.state}", text, nxt, see, excerpt)
        r.done = not self.pending(r)

    def pending(self, r: reads.RunWatch) -> bool:
        """The run's end notification failed on some channel and has retries left."""
        last = next((e for e in r.escalations if e.get("key") == r.end_key), None)
        failed = [o for o in (last or {}).get("notified", []) if o.get("status") in ("failed", "rate_limited")]
        return bool(failed) and self.notify is not None and r.retries < FINAL_RETRY_TICKS

    def retry_ends(self) -> None:
        for r in self.runs:
            if r.state in reads.ENDED and not r.done and r.end_key:
                esc = next(e for e in r.escalations if e.get("key") == r.end_key)
                if r.retries > 0:  # the first try was the tick's end_run
                    esc["notified"] = self.send(dict(esc.get("event", {})))
                r.retries += 1
                r.done = not self.pending(r)

    def escalate(self, key: str, kind: str, level: str, run: reads.RunWatch | None, title: str, text: str,
                 nxt: str, see: str, excerpt: str | None = None) -> None:
        if key in self.keys:
            return
        self.keys.add(key)
        event = {"key": key, "kind": kind, "level": level, "title": title, "text": text, "host": self.host,
                 "next": nxt, "see": see}
        if excerpt:
            event["excerpt"] = excerpt
        if run is not None:
            event["run_id"] = run.id
        notified = self.send(event) if self.spec["channels"] else []
        outcomes = ", ".join("{} {}".format(o.get("channel", "?"), o.get("status")) for o in notified)
        who = run.id if run else self.host
        say(f"{stamp(time.time())} ! {level} {kind} {who}: {text} -> {outcomes or 'not notified (no channel)'}")
        record = {"key": key, "kind": kind, "level": level, "text": text, "at": time.time(), "notified": notified,
                  "event": {k: v for k, v in event.items() if k != "excerpt"}}
        target = run.escalations if run is not None else self.box_escalations
        target.append(record)
        del target[:-KEEP_ESCALATIONS]

    def send(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """Each channel's outcome, kept without secrets: channel, status, a short cleaned error."""
        channels = self.spec["channels"]
        if self.notify is None:
            out: list[Any] = [{"channel": str(c.get("kind", "?")) if isinstance(c, dict) else "?",
                               "status": "failed", "error": "notifications are off: notify_onbox.py is absent"}
                              for c in channels]
        else:
            try:
                out = list(self.notify(event, channels, self.state_dir, self.env))
            except Exception as e:  # a broken sender must not stop the patrol
                out = [{"channel": "all", "status": "failed", "error": f"the sender raised {type(e).__name__}"}]
        kept = reads.kept_outcomes(out, channels, self.env)
        self.notify_failed += ["{} {}".format(o["channel"], o["status"]) for o in kept
                               if o["status"] in ("failed", "rate_limited")]
        return kept

    def idle_part(self, now: float) -> str:
        live, last_end = reads.scan_runs(self.root)
        if live:
            self.last_live, self.idle_since = now, None
            return "{} box: {} live run{}".format(self.host, live, "" if live == 1 else "s")
        since = max([t for t in (last_end, self.last_live) if t is not None] or [self.started])
        self.idle_since = since
        text = f"{self.host} box: no live run for {reads.span(now - since)}"
        idle_s, price = self.spec["idle_s"], self.spec["price_per_hour"]
        cost = float(price) * (now - since) / 3600 if isinstance(price, (int, float)) else None
        if cost is not None:
            text += f" (${cost:.2f})"
        if isinstance(idle_s, (int, float)) and idle_s > 0 and now - since >= idle_s:
            n = int((now - since) // idle_s)
            what = f"no run has been live on this box for {reads.span(now - since)}"
            if cost is not None:
                what += "; this box has cost ${:.2f} since {}".format(
                    cost, "the last run ended" if last_end or self.last_live else "the patrol started")
            self.escalate(f"idle:{int(since)}:{n}", "idle", "warn", None, f"{self.host} idle", what,
                          "give it work, or plan_teardown / stop the box if nothing is left to run",
                          f"list_runs host={self.host}")
        return text

    def disk_part(self) -> str | None:
        if not self.disk.items:
            return None
        _, used, total = self.disk.items[-1]
        pct = 100 * used / total
        text = f"disk {pct:.0f}%"
        ipct = 100 * self.inodes[0] / self.inodes[1] if self.inodes else None
        if ipct is not None:
            text += f" inodes {ipct:.0f}%"
        # A trend over less than a tick (at most 5 min) is noise from one write burst.
        min_span = max(3 * float(self.spec["sample_s"]), min(float(self.spec["interval_s"]), 300.0))
        slope = self.disk.slope(DISK_WINDOW_S, min_span)
        eta = (total - used) / slope if slope and slope > 0 else None
        if eta is not None and eta < ETA_SHOWN_S:
            text += " (fill ETA %.1f h)" % (eta / 3600)
        see = f"audit_box host={self.host}"
        limit = float(self.spec["disk_pct"] or math.inf)  # 0 or null: no alarm
        nxt = "prune scratch and old checkpoints (keep the best), or grow the disk, before the run dies mid-save"
        if pct >= limit or (ipct is not None and ipct >= limit):
            what = "inodes" if ipct is not None and ipct >= limit and pct < limit else "bytes"
            self.escalate(f"disk:full:{what}", "disk", "crit", None, f"{self.host} disk full",
                          f"the durable root's filesystem is {max(pct, ipct or 0):.0f}% full ({what})", nxt, see)
        hours = self.spec["disk_eta_h"]
        if eta is not None and hours and eta < float(hours) * 3600:
            self.escalate("disk:eta", "disk", "warn", None, f"{self.host} disk filling",
                          f"the durable root's filesystem fills in about {reads.span(eta)} at the current rate",
                          nxt, see)
        return text

    def mem_part(self) -> str | None:
        if not self.mem.items:
            return None
        _, used, limit = self.mem.items[-1]
        pct = 100 * used / limit
        text = f"mem {pct:.0f}% of {reads.gib(limit)}"
        slope = self.mem.slope(MEM_WINDOW_S, max(3 * float(self.spec["sample_s"]),
                                                 min(float(self.spec["interval_s"]), 60.0)))
        if slope is not None:
            text += " (%+.1f GiB/h)" % (slope * 3600 / 2**30)
        nxt = "cap what validation accumulates, use fewer DataLoader workers, or raise the memory limit"
        see = f"audit_box host={self.host}"
        if not self.spec["mem_pct"]:  # 0 or null: no alarm
            return text
        if pct >= float(self.spec["mem_pct"]):
            self.escalate("memory:pct", "memory", "crit", None, f"{self.host} memory near its limit",
                          f"memory use is {pct:.0f}% of its {reads.gib(limit)} limit: the OOM killer is close",
                          nxt, see)
        elif slope and slope > 0 and used >= MEM_TREND_FLOOR * limit and (limit - used) / slope < 3600:
            self.escalate("memory:trend", "memory", "warn", None, f"{self.host} memory creeping",
                          f"memory use ({pct:.0f}% of {reads.gib(limit)}) grows {slope * 3600 / 2**30:.1f} GiB/h and "
                          f"reaches the limit in about {reads.span((limit - used) / slope)}", nxt, see)
        return text

    def gpu_part(self) -> str | None:
        return reads.gpu_summary(self.nvidia) if self.nvidia else None

    def save(self, now: float) -> None:
        last = getattr(self, "line", None)
        for r in self.runs:
            with contextlib.suppress(OSError):  # a full disk must not stop the watching: the line still goes out
                reads.write_text(os.path.join(r.dir, "patrol.json"), json.dumps({
                    "last": last, "at": now, "state": r.state, "escalations": r.escalations,
                    "patrol_pid": os.getpid(), "stopped": self.stopping}))
                # one line list_runs' one-pass scan reads without parsing JSON: escalations, last line
                reads.write_text(os.path.join(r.dir, "patrol_state"),
                                 "{}\t{}\n".format(len(r.escalations), (last or "").replace("\t", " ")[:500]))
        box = {"last": last, "at": now, "host": self.host, "started": self.started, "pid": os.getpid(),
               "boot_id": reads.first_line("/proc/sys/kernel/random/boot_id"), "runs": [r.id for r in self.runs],
               "idle_since": self.idle_since, "last_live": self.last_live,
               "ticks": self.ticks, "samples": self.samples, "cpu_s": cpu_seconds(),
               "cpu_s_start": self.cpu_start,
               "escalations": self.box_escalations, "stopped": self.stopping}
        with contextlib.suppress(OSError):
            reads.write_text(os.path.join(self.state_dir, "box.json"), json.dumps(box))


def load_spec(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    if len(argv) > 1:
        with open(argv[1]) as f:
            spec = json.load(f)
    else:
        spec = json.loads(base64.b64decode(env["RGT_PATROL_SPEC"]).decode())
    if not isinstance(spec, dict) or not isinstance(spec.get("durable_root"), str):
        raise SystemExit("rgt-patrol: the spec must be a JSON object with a durable_root")
    return spec


def main() -> int:
    env = dict(os.environ)
    patrol = Patrol(load_spec(sys.argv, env), env)
    env.pop("RGT_PATROL_SPEC", None)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # an ssh drop must not end the watching

    def on_term(signum: int, frame: object) -> None:
        patrol.stopping = "it received SIGTERM"

    signal.signal(signal.SIGTERM, on_term)
    patrol.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
