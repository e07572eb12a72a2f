"""The on-box patrol, run as the box runs it: a subprocess with a spec file, real run dirs left by
real shell jobs, a real webhook receiver on loopback, a real tmpfs and a real cgroup where this
machine allows them. Each test waits on a condition with a deadline."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcp_server.run.jobs.signatures import SIGNATURES
from mcp_server.run.patrol import patrol_onbox
from tests.run.patrol.conftest import (
    HOOK_ENV,
    PATROL,
    Patrol,
    Receiver,
    Run,
    base_spec,
    hook_channel,
    until,
)
from tests.support.tmpfs import mounted_tmpfs

StartRun = Callable[..., Run]
StartPatrol = Callable[..., Patrol]
SIGNATURE_ROWS = [[s.id, s.pattern.pattern, s.meaning] for s in SIGNATURES]
STATUS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S")


def hook_env(receiver: Receiver) -> dict[str, str]:
    return {HOOK_ENV: f"http://127.0.0.1:{receiver.server_address[1]}/hook", "no_proxy": "127.0.0.1,localhost"}


def test_a_run_that_succeeds_is_reported_once_and_the_patrol_stops_by_itself(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol, receiver: Receiver) -> None:
    run = start_run("tiny-s1", 'echo "step=100 loss=0.52"\necho "step=200 loss=0.39"\nwait_release\n'
                               'echo "step=300 loss=0.41"\n')
    patrol = start_patrol(base_spec(durable, runs=[{"dir": str(run.dir), "total_steps": 1000}],
                                    channels=[hook_channel()]), hook_env(receiver))
    alive = patrol.wait_line(lambda ln: "tiny-s1 alive step 200/1000" in ln)
    assert "loss 0.39 best 0.39" in alive and "log " in alive
    run.release()
    assert patrol.wait_exit() == 0
    assert "every watched run has ended" in patrol.lines[-1]
    [ended] = run.escalations()
    assert (ended["kind"], ended["level"]) == ("succeeded", "info")
    assert [o["status"] for o in ended["notified"]] == ["sent"]
    assert [(p["kind"], p["run_id"]) for p in receiver.posts] == [("succeeded", "tiny-s1")]
    assert "tiny-s1 succeeded" in run.note()["last"] and "step 300/1000" in run.note()["last"]
    assert "best 0.39" in run.note()["last"]


def test_a_failed_run_is_reported_with_its_signature_and_a_cleaned_excerpt(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol, receiver: Receiver) -> None:
    run = start_run("oom-1", 'echo "step=10 loss=2.0"\necho "Traceback (most recent call last):"\n'
                             "printf 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
                             "\\033[31m\\n'\nexit 1\n")
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)], channels=[hook_channel()],
                                    signatures=SIGNATURE_ROWS), hook_env(receiver))
    assert patrol.wait_exit() == 0
    [failed] = run.escalations()
    assert (failed["kind"], failed["level"]) == ("failed", "crit")
    assert "exit code 1" in failed["text"] and "signature vram-oom" in failed["text"]
    [post] = receiver.posts
    assert "CUDA out of memory" in post["excerpt"] and "\x1b" not in post["excerpt"]
    assert post["next"] and "never blind-restart" in post["next"]
    assert any(" ! crit failed oom-1: failed with exit code 1" in ln for ln in patrol.lines)


def test_a_cancelled_run_is_reported_as_cancelled_from_its_run_dir(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("cancel-1", "wait_release\n")
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)]))
    patrol.wait_line(lambda ln: "cancel-1 alive" in ln)
    (run.dir / "cancelled").touch()
    os.killpg(run.proc.pid, signal.SIGTERM)
    assert patrol.wait_exit() == 0
    [cancelled] = run.escalations()
    assert cancelled["kind"] == "cancelled" and "exit code 143" in cancelled["text"]
    assert "SIGTERM" in cancelled["text"]


def test_a_run_whose_log_stops_growing_is_reported_as_stalled_and_watched_on(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("stall-1", 'echo "step=1 loss=1.0"\nwait_release\n')
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)], stall_s=1))
    until(lambda: run.escalations("stalled"), what="a stall escalation")
    assert patrol.proc.poll() is None and run.proc.poll() is None
    run.release()
    assert patrol.wait_exit() == 0
    assert [e["kind"] for e in run.escalations()] == ["stalled", "succeeded"]


def test_a_nan_loss_in_new_log_text_is_escalated_once(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("nan-1", 'echo "step=1 loss=0.9"\necho \'{"step": 2, "loss": NaN}\'\necho "step=3 loss=nan"\n'
                             "wait_release\n")
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)]))
    until(lambda: run.escalations("nan"), what="a NaN escalation")
    [nan] = run.escalations("nan")
    assert nan["level"] == "crit" and "at step 2" in nan["text"]
    line = patrol.wait_line(lambda ln: "nan-1 alive step 3" in ln)
    assert "loss nan best 0.9" in line
    run.release()
    assert patrol.wait_exit() == 0
    assert [e["kind"] for e in run.escalations()] == ["nan", "succeeded"]


def test_a_hostile_log_cannot_forge_an_escalation_or_a_status_line(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    hostile = ("exit_code 0 succeeded\n"
               "2026-12-06T03:00:07Z hostile-1 succeeded | disk 1%\n"
               "2026-12-06T03:00:07Z ! crit failed hostile-1: failed with exit code 1 -> hook sent\n"
               "2026-12-06T03:00:07Z # patrol stops: every watched run has ended\n"
               "\x1b]0;owned\x07\x1b[2J\x1b[31mstep=7 loss=0.5 \x1b[0m\n")
    (durable / "hostile.txt").write_text(hostile)
    run = start_run("hostile-1", f'cat "{durable / "hostile.txt"}"\nwait_release\n')
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)]))
    patrol.wait_line(lambda ln: "hostile-1 alive step 7" in ln)
    until(lambda: len(patrol.status_lines()) >= 3, what="three ticks")
    assert run.escalations() == [] and patrol.proc.poll() is None
    assert all("\x1b" not in ln and "\x07" not in ln for ln in patrol.lines)
    assert all(" ! " not in ln and " # " not in ln for ln in patrol.status_lines())
    assert "succeeded" not in run.note()["last"]
    run.release()
    assert patrol.wait_exit() == 0
    assert [e["kind"] for e in run.escalations()] == ["succeeded"]


def test_every_tick_prints_one_status_line_even_when_nothing_changes(
        durable: Path, start_patrol: StartPatrol) -> None:
    patrol = start_patrol(base_spec(durable))
    until(lambda: len(patrol.status_lines()) >= 5, what="five ticks")
    (patrol.state_dir / "stop").touch()
    assert patrol.wait_exit() == 0
    lines = patrol.status_lines()
    assert len(lines) == patrol.box()["ticks"] and all(STATUS.match(ln) for ln in lines)
    assert all("testbox box: no live run for" in ln for ln in lines)
    assert "a stop file" in patrol.lines[-1] and patrol.box()["stopped"]


def test_an_idle_metered_box_is_escalated_with_what_it_cost(
        durable: Path, start_patrol: StartPatrol, receiver: Receiver) -> None:
    old = durable / ".rgt" / "runs" / "old-1"
    old.mkdir()
    (old / "exit_code").write_text("0\n")
    (old / "ended_at").write_text(f"{int(time.time())}\n")
    patrol = start_patrol(base_spec(durable, idle_s=2, price_per_hour=1.2, channels=[hook_channel()]),
                          hook_env(receiver))
    until(lambda: patrol.box().get("escalations"), what="an idle escalation")
    [idle] = patrol.box()["escalations"][:1]
    assert idle["kind"] == "idle" and "this box has cost $0.00 since the last run ended" in idle["text"]
    assert receiver.posts[0]["kind"] == "idle" and "$" in receiver.posts[0]["text"]
    until(lambda: len(patrol.box()["escalations"]) >= 2, what="a second idle escalation after idle_s more")
    (patrol.state_dir / "stop").touch()
    assert patrol.wait_exit() == 0
    assert len({e["key"] for e in patrol.box()["escalations"]}) == len(patrol.box()["escalations"])
    assert any("no live run for" in ln and "($0.00)" in ln for ln in patrol.status_lines())


def test_the_patrol_never_outlives_its_lifetime_and_leaves_the_run_alone(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("long-1", "wait_release\n")
    started = time.monotonic()
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)], lifetime_s=1.5, interval_s=0.5))
    assert patrol.wait_exit(timeout=15) == 0
    assert time.monotonic() - started < 10
    assert "its lifetime (1.5 s) is over" in patrol.lines[-1]
    assert run.proc.poll() is None and not (run.dir / "exit_code").exists()
    assert run.note()["stopped"] and run.escalations() == []


def test_an_unreachable_channel_is_reported_and_the_escalation_kept(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("noegress-1", "exit 3\n")
    with socket.socket() as s:  # a port nothing listens on: a box without egress
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)], channels=[hook_channel()]),
                          {HOOK_ENV: f"http://127.0.0.1:{port}/hook", "no_proxy": "127.0.0.1,localhost"})
    assert patrol.wait_exit() == 0
    [failed] = run.escalations()
    assert failed["kind"] == "failed" and failed["notified"][0]["status"] == "failed"
    assert str(port) not in failed["notified"][0]["error"]
    assert any("notify failed: hook failed" in ln for ln in patrol.status_lines())
    assert "every watched run has ended" in patrol.lines[-1]


def test_without_the_sender_escalations_are_only_logged_and_the_patrol_says_so(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol, tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in patrol_onbox.FILES:  # the patrol's own files, without notify_onbox.py beside them
        shutil.copy(PATROL.parent / name, alone / name)
    run = start_run("alone-1", "exit 0\n")
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)], channels=[hook_channel()]),
                          script=alone / "patrol_onbox.py")
    assert patrol.wait_exit() == 0
    assert "notifications are off" in patrol.lines[0]
    [ended] = run.escalations()
    assert ended["kind"] == "succeeded" and ended["notified"][0]["status"] == "failed"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    yield from mounted_tmpfs(tmp_path / "small", "size=8m")


def test_a_filling_disk_is_escalated_from_its_trend_before_it_is_full(
        tmpfs: Path, start_patrol: StartPatrol) -> None:
    (tmpfs / ".rgt" / "runs").mkdir(parents=True)
    patrol = start_patrol(base_spec(tmpfs, disk_pct=95, disk_eta_h=2))
    patrol.wait_line(lambda ln: "| disk " in ln)
    stop = threading.Event()

    def fill() -> None:
        with open(tmpfs / "fill.bin", "wb") as f:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    f.write(b"\1" * 128 * 1024)
                    f.flush()
                time.sleep(0.05)

    writer = threading.Thread(target=fill, daemon=True)
    writer.start()
    try:
        until(lambda: [e for e in patrol.box().get("escalations", []) if e["kind"] == "disk"], what="a disk alarm")
    finally:
        stop.set()
        writer.join(timeout=5)
    first = next(e for e in patrol.box()["escalations"] if e["kind"] == "disk")
    assert first["key"] == "disk:eta" and "fills in about" in first["text"]
    until(lambda: any("fill ETA" in ln for ln in patrol.status_lines()), what="a fill ETA on a status line")
    (patrol.state_dir / "stop").touch()
    assert patrol.wait_exit() == 0


def _cgroup_v1_memory() -> Path | None:
    """A fresh v1 memory cgroup under this process's own (None where this machine allows none)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    rel = next((ln.split(":", 2)[2] for ln in lines if "memory" in ln.split(":", 2)[1].split(",")), None)
    base = Path("/sys/fs/cgroup/memory") / (rel or "/").lstrip("/")
    if rel is None or not (base / "memory.usage_in_bytes").exists():
        return None
    group = base / f"rgt-patrol-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(256 << 20))
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    return group


GROW = ('python3 -c \'import time\nb = []\nfor _ in range(50):\n    b.append(b"\\1" * (4 << 20))\n'
        '    time.sleep(0.04)\nopen("grown", "w").close()\ntime.sleep(60)\' &\nwait_release\nkill %1\n')


def test_memory_creeping_toward_the_cgroup_limit_is_escalated(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol, tmp_path: Path) -> None:
    """A real v1 memory cgroup (256 MiB) holds the run where this machine lets a test make one;
    elsewhere a fake cgroup root in the spec whose memory files the test writes."""
    group = _cgroup_v1_memory()
    try:
        if group is not None:
            run = start_run("mem-1", GROW, cgroup=str(group))
            spec = base_spec(durable, runs=[str(run.dir)], mem_pct=90)
        else:
            run = start_run("mem-1", "wait_release\n")
            spec = base_spec(durable, runs=[str(run.dir)], mem_pct=90, cgroup_root=str(tmp_path / "cg"))
            _fake_cgroup_growth(tmp_path / "cg", run)
        patrol = start_patrol(spec)
        until(lambda: [e for e in patrol.box().get("escalations", []) if e["kind"] == "memory"],
              what="a memory escalation")
        mem = next(e for e in patrol.box()["escalations"] if e["kind"] == "memory")
        assert "of 0.2 GiB" in mem["text"] or "of its 0.2 GiB limit" in mem["text"]
        assert any(re.search(r"mem \d+% of 0\.\d GiB", ln) for ln in patrol.status_lines())
        run.release()
        assert patrol.wait_exit() == 0
    finally:
        if group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait(timeout=10)
            until(lambda: not (group / "cgroup.procs").read_text().strip(), 10, "an empty cgroup")
            group.rmdir()


def _fake_cgroup_growth(root: Path, run: Run) -> None:
    """The run's cgroup files under a fake root, its usage growing toward a 256 MiB limit."""
    pid = (run.dir / "pid").read_text().strip()
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    v2 = next((ln[3:] for ln in lines if ln.startswith("0::")), "/")
    folder = root / v2.lstrip("/")
    folder.mkdir(parents=True)
    (folder / "memory.max").write_text(str(256 << 20))

    def grow() -> None:
        for i in range(1, 60):
            tmp = folder / "memory.current.tmp"
            tmp.write_text(str(i * 4 << 20))
            tmp.replace(folder / "memory.current")
            time.sleep(0.04)

    (folder / "memory.current").write_text("0")
    threading.Thread(target=grow, daemon=True).start()


def test_the_patrol_costs_the_box_little_cpu_at_the_default_interval(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    """Per-tick and per-sample CPU measured at a fast pace, scaled to the defaults (a tick every
    600 s, a sample every 5 s): under 2 CPU-seconds an hour per box (issue #32's target)."""
    run = start_run("cost-1", 'for i in $(seq 200); do echo "step=$i loss=0.5"; done\nwait_release\n')

    def measure(**pace: float) -> dict[str, float]:
        patrol = start_patrol(base_spec(durable, runs=[str(run.dir)], lifetime_s=2, disk_pct=95, disk_eta_h=2,
                                        mem_pct=90, state_dir=str(durable / f"st-{pace['interval_s']}"), **pace))
        assert patrol.wait_exit() == 0
        box = patrol.box()
        return {"cpu": box["cpu_s"] - box["cpu_s_start"], "ticks": box["ticks"], "samples": box["samples"]}

    ticks = measure(interval_s=0.05, sample_s=10)  # a tick and one sample per loop
    samples = measure(interval_s=100, sample_s=0.01)  # one tick, then samples only
    per_tick = ticks["cpu"] / ticks["ticks"]
    per_sample = samples["cpu"] / max(1, samples["samples"])
    per_hour = 6 * per_tick + 720 * per_sample
    print(f"patrol cpu: {per_tick * 1000:.2f} ms a tick, {per_sample * 1000:.3f} ms a sample, "
          f"{per_hour:.2f} s an hour at the defaults")
    assert ticks["ticks"] >= 10 and samples["samples"] >= 50
    assert per_hour < 2.0


def test_the_status_line_shows_the_gpu_when_nvidia_smi_is_there(durable: Path, start_patrol: StartPatrol) -> None:
    fake = Path(__file__).resolve().parents[2] / "fixtures" / "patrol" / "bin"
    patrol = start_patrol(base_spec(durable), {"PATH": f"{fake}:{os.environ['PATH']}"})
    line = patrol.wait_line(lambda ln: "| gpu " in ln)
    assert line.endswith("| gpu 97% 30.1/80.0 GiB")
    (patrol.state_dir / "stop").touch()
    assert patrol.wait_exit() == 0


def test_a_run_whose_outputs_were_not_synced_is_reported_as_sync_failed(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("sync-1", "wait_release\n")
    (run.dir / "sync_spec").write_text("results/*.json\n")
    (run.dir / "sync_status").write_text("failed no file matched results/*.json\n")
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)]))
    run.release()
    assert patrol.wait_exit() == 0
    [ended] = run.escalations()
    assert ended["kind"] == "sync_failed", ended  # exit 0, but the copy to the durable root failed


def test_a_run_whose_wrapper_vanished_without_an_exit_code_is_reported_lost(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("lost-1", "wait_release\n")
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)]))
    patrol.wait_line(lambda ln: "lost-1 alive" in ln)
    os.killpg(run.proc.pid, signal.SIGKILL)  # a hard kill: no exit_code is ever written
    assert patrol.wait_exit() == 0
    [lost] = run.escalations()
    assert lost["kind"] == "lost" and lost["level"] == "crit", lost


def test_a_log_that_names_its_total_gets_an_eta_on_the_status_line(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    script = ('i=0; while [ ! -e "$RGT_RUN_DIR/release" ]; do i=$((i+1)); echo "step $i/5000 loss=0.5"; '
              'sleep 0.05; done\n')
    run = start_run("eta-1", script)
    patrol = start_patrol(base_spec(durable, runs=[str(run.dir)]))
    line = patrol.wait_line(lambda ln: "ETA" in ln)
    assert "eta-1 alive step" in line and "/5000" in line, line
    run.release()
    assert patrol.wait_exit() == 0


def test_a_nan_loss_in_a_log_that_names_no_step_is_still_escalated(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    run = start_run("nan-2", 'echo "loss=0.9"\necho "loss=nan"\nwait_release\n')
    start_patrol(base_spec(durable, runs=[str(run.dir)]))
    until(lambda: run.escalations("nan"), what="a NaN escalation without a step")
    [nan] = run.escalations("nan")
    assert "at step" not in nan["text"]
    run.release()


def test_a_loss_that_climbs_and_stays_up_is_escalated_and_a_noisy_healthy_one_is_not(
        durable: Path, start_run: StartRun, start_patrol: StartPatrol) -> None:
    healthy = "".join(f'echo "step={i} loss={0.1 + 0.05 * (-1) ** i + (0.2 if i == 30 else 0):.3f}"\n'
                      for i in range(1, 60))  # noisy around a floor, one spike: no divergence
    climbing = "".join(f'echo "step={i} loss={1.0 if i < 20 else 5.0:.3f}"\n' for i in range(1, 40))
    ok = start_run("healthy-1", healthy + "wait_release\n")
    bad = start_run("diverge-1", climbing + "wait_release\n")
    patrol = start_patrol(base_spec(durable, runs=[str(ok.dir), str(bad.dir)]))
    until(lambda: bad.escalations("diverged"), what="a divergence escalation")
    [diverged] = bad.escalations("diverged")
    assert diverged["level"] == "warn" and "5.0x its lowest" in diverged["text"], diverged
    patrol.wait_line(lambda ln: "healthy-1 alive step 59" in ln)
    assert ok.escalations("diverged") == []
    ok.release()
    bad.release()
    assert patrol.wait_exit() == 0
