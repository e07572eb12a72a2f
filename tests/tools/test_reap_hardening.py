"""Security (issue 30): reap_vram never calls a live job a zombie because the driver did not
answer, never offers another user's process unless asked (and a token is bound to that choice),
and its structured result stays small whatever the box lists. Through a real MCP client, over the
test sshd, with real processes holding a real character device named like an NVIDIA node
(/dev/nvidia96: there is no GPU here) and the fake nvidia-smi first on the box's PATH, made to
fail as real ones do: the captured "Driver/library version mismatch" (exit 18), a hang, absent,
and a hostile listing of 200,001 pids."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from mcp_server import scripts
from mcp_server.run.audit import reap as reap_module
from mcp_server.run.audit.gpu_checks import DRIVER_SILENT, a8_zombies
from mcp_server.run.audit.probe import ProbeSection
from mcp_server.settings import OUTPUT_CAP_BYTES
from mcp_server.tools._bounded import MIN_CHARS, Bounded, bound_result, json_size
from tests.conftest import error_text, structured
from tests.support.fakegpu import audit_facts, capture, device_node, load_samples
from tests.support.sshd import Sshd
from tests.support.wait import until_sync

DEVICE = Path("/dev/nvidia96")
MISMATCH = capture("error-nvml-mismatch-550").text
MISMATCH_STEP = "reboot, or reload the nvidia kernel module after the jobs end"
NOBODY = 65534
HOSTILE_PIDS = 200_001


@pytest.fixture
def device() -> Iterator[Path]:
    with device_node(DEVICE) as node:
        yield node


@pytest.fixture
def holders(device: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start a process group running `command` (which opens the device), under `prefix` (setpriv)
    and with `argv` as bash's $0...; each group is killed after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def hold(command: str, *prefix: str, argv: tuple[str, ...] | list[str] = ()) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([*prefix, "bash", "-c", command, *argv], stdin=subprocess.DEVNULL,
                             start_new_session=True)
        started.append(p)
        return p

    yield hold
    for p in started:
        subprocess.run(["kill", "-KILL", "--", f"-{p.pid}"], check=False, capture_output=True)
        p.wait()


def holding(pid: int) -> bool:
    """`pid` has the device open (what fuser will see). A starting bash opens and closes files
    while we list them, so an fd that is gone by the time we read it simply is not the device."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(DEVICE):
                return True
        except FileNotFoundError:
            continue
    return False


def children(pid: int, n: int) -> list[int]:
    """The children of `pid`, once there are `n`."""
    def listed() -> list[int] | None:
        found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        return [int(p) for p in found] if len(found) >= n else None

    return until_sync(listed, what=f"{n} children of {pid}")


@pytest.fixture
def reap_box(env, box: Sshd, tmp_path: Path) -> Path:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "profile": "generic-ssh", "durable_root": str(durable)}})
    return durable


@pytest.fixture
def smi(reap_box: Path, box: Sshd, gpu) -> Callable[[str], None]:
    """Make nvidia-smi's process query (or, with `everything`, every query) behave as `apps` says;
    the other queries answer as the captured 8 x H100 training box."""
    gpu("h100x8-training")
    scenario = box.fakebin / "scenario" / "nvidia-smi"
    (box.fakebin / "nvidia-smi").replace(scenario)

    def use(apps: str, everything: bool = False) -> None:
        (box.fakebin / "nvidia-smi").unlink(missing_ok=True)
        others = apps if everything else f'exec {scenario} "$@"'
        script = f'#!/bin/sh\ncase "$*" in\n  *--query-compute-apps*) {apps};;\n  *) {others};;\nesac\n'
        path = box.fakebin / "nvidia-smi"
        path.write_text(script)
        path.chmod(0o755)

    return use


def mismatch_smi(box: Sshd) -> str:
    said = box.fakebin / "scenario" / "mismatch.txt"
    said.write_text(MISMATCH)
    return f"cat {said}; exit 18"


async def plan_of(client, **args) -> dict:
    return structured(await client.call_tool("reap_vram", {"host": "gpu1", "min_age_s": 0, **args}))["plan"]


def training_job(hold) -> int:
    """A live "training" process holding the GPU: what a failed driver must never turn into a zombie."""
    p = hold(f"exec python3 -c 'import time; time.sleep(600)' < {DEVICE}")
    until_sync(lambda: holding(p.pid), what="the trainer to open the device")
    return p.pid


async def test_security_a_driver_library_mismatch_offers_no_candidate_and_names_the_route(
        smi, box, holders, client) -> None:
    trainer = training_job(holders)
    smi(mismatch_smi(box), everything=True)
    plan = await plan_of(client)
    assert plan["candidates"] == [] and plan["token"] is None and plan["driver_answered"] is False, plan
    left = {h["pid"]: h["verdict"] for h in plan["left_alone"]}
    assert left[trainer] == DRIVER_SILENT, left
    assert "driver/library version mismatch" in plan["next_step"] and MISMATCH_STEP in plan["next_step"]
    assert plan["route"] == "references://run-remote/audit-checks#a2"


async def test_security_a_token_planned_while_the_driver_answered_signals_nothing_once_it_fails(
        smi, box, holders, client) -> None:
    trainer = training_job(holders)
    smi(f'exec {box.fakebin / "scenario" / "nvidia-smi"} "$@"')  # answers: lists the captured pids only
    plan = await plan_of(client)
    assert trainer in [h["pid"] for h in plan["candidates"]] and plan["token"]
    smi(mismatch_smi(box))
    res = await client.call_tool("reap_vram", {"host": "gpu1", "min_age_s": 0, "token": plan["token"]})
    assert res.is_error and "driver did not answer" in error_text(res)
    assert Path(f"/proc/{trainer}").exists() and holding(trainer), "the trainer lives on"


async def test_security_no_nvidia_smi_offers_no_candidate(reap_box, box, holders, client) -> None:
    if shutil.which("nvidia-smi", path=box.path_env):
        pytest.skip("this machine has a real nvidia-smi on the test box's PATH")
    trainer = training_job(holders)
    plan = await plan_of(client)
    assert plan["candidates"] == [] and plan["token"] is None and plan["driver_answered"] is False, plan
    assert {h["pid"]: h["verdict"] for h in plan["left_alone"]}[trainer] == DRIVER_SILENT
    assert "nvidia-smi is not installed" in plan["next_step"]


async def test_security_a_hung_nvidia_smi_is_stopped_in_time_and_offers_no_candidate(
        smi, holders, client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reap_module, "SMI_TIMEOUT_S", 2)
    trainer = training_job(holders)
    smi("exec sleep 611")
    started = time.monotonic()
    plan = await plan_of(client)
    assert time.monotonic() - started < 15, "bounded by the nvidia-smi timeout, not by the hang"
    assert plan["candidates"] == [] and plan["token"] is None and "did not answer in time" in plan["next_step"]
    assert {h["pid"]: h["verdict"] for h in plan["left_alone"]}[trainer] == DRIVER_SILENT
    hung = subprocess.run(["pgrep", "-f", "^sleep 611$"], capture_output=True, text=True).stdout
    assert hung == "", "the hung nvidia-smi was stopped, not left behind"


def test_security_kill_signals_another_users_process_only_when_all_users_are_asked(holders) -> None:
    other = holders(f"exec sleep 600 < {DEVICE}", "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                    "--clear-groups")
    until_sync(lambda: holding(other.pid), what="the other user's process to open the device")
    start = Path(f"/proc/{other.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    for default in ((f"{other.pid}:{start}",), ("own", f"{other.pid}:{start}")):
        out = subprocess.run(["sh", "-c", scripts.command("gpu_reap", "kill", *default)], capture_output=True,
                             text=True, check=True).stdout
        assert out.strip() == f"reaped={other.pid}\tother-user" and other.poll() is None, out


async def test_security_another_users_process_is_offered_only_when_asked_and_the_token_is_bound_to_it(
        smi, box, holders, client) -> None:
    smi(f'exec {box.fakebin / "scenario" / "nvidia-smi"} "$@"')
    mine = holders(f"exec sleep 600 < {DEVICE}")
    other = holders(f"exec sleep 600 < {DEVICE}", "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                    "--clear-groups")
    until_sync(lambda: holding(mine.pid) and holding(other.pid), what="both processes to open the device")

    own = await plan_of(client)
    assert own["include_other_users"] is False
    assert [h["pid"] for h in own["candidates"]] == [mine.pid], own
    assert "include_other_users=true" in {h["pid"]: h["verdict"] for h in own["left_alone"]}[other.pid]

    every = await plan_of(client, include_other_users=True)
    assert every["include_other_users"] is True
    assert sorted(h["pid"] for h in every["candidates"]) == sorted([mine.pid, other.pid])
    unbound = await client.call_tool("reap_vram", {"host": "gpu1", "min_age_s": 0, "token": every["token"]})
    assert unbound.is_error and "planned with another include_other_users" in error_text(unbound)
    widened = await client.call_tool("reap_vram", {"host": "gpu1", "min_age_s": 0, "token": own["token"],
                                                   "include_other_users": True})
    assert widened.is_error and "planned with another include_other_users" in error_text(widened)
    assert mine.poll() is None and other.poll() is None, "nothing was signalled"

    done = structured(await client.call_tool("reap_vram", {"host": "gpu1", "min_age_s": 0, "token": own["token"]}))
    assert done["result"]["reaped"] == [{"pid": mine.pid, "outcome": "TERM"}]
    assert mine.wait(timeout=10) is not None and other.poll() is None, "only the SSH user's own process was stopped"


async def test_a_process_under_a_run_this_server_launched_is_never_a_candidate(
        smi, box, reap_box, holders, client) -> None:
    smi(f'exec {box.fakebin / "scenario" / "nvidia-smi"} "$@"')
    launched = holders(f"sleep 600 < {DEVICE} & wait", argv=[f"{reap_box}/.rgt/runs/r1/job"])
    (child,) = children(launched.pid, 1)
    plan = await plan_of(client)
    left = {h["pid"]: h["verdict"] for h in plan["left_alone"]}
    assert "part of a run this server launched" in left[child], left
    assert child not in [h["pid"] for h in plan["candidates"]]


async def test_security_a_hostile_listing_keeps_the_structured_result_within_budget_and_the_server_serving(
        smi, box, holders, client) -> None:
    many = box.fakebin / "scenario" / "many.txt"
    many.write_text("".join(f"{4_200_000 + i}, 10, GPU-0\n" for i in range(HOSTILE_PIDS)))
    smi(f"cat {many}")
    crowd = holders(f"for i in $(seq 150); do sleep 600 < {DEVICE} & done; wait")
    children(crowd.pid, 150)
    async with client.session() as c:
        res = await c.call_tool("reap_vram", {"host": "gpu1", "min_age_s": 0})
        out = structured(res)
        size = len(json.dumps(out).encode())
        assert size <= OUTPUT_CAP_BYTES, f"structured result is {size} bytes"
        assert out["truncated"] is True and out["totals"]["plan.candidates"] >= 150, out["totals"]
        assert len(out["plan"]["candidates"]) <= 50
        assert out["plan"]["other_containers"][0].startswith(f"{HOSTILE_PIDS} pids listed by nvidia-smi")
        assert len("\n".join(getattr(x, "text", "") for x in res.content)) < OUTPUT_CAP_BYTES
        again = await c.call_tool("list_runs", {"host": "gpu1"})
        assert not again.is_error, "the server keeps serving"


# A8 (audit_box) follows the same rule: an unanswered process query calls nothing a zombie.
def a8_with_apps(apps: ProbeSection) -> str:
    samples = load_samples()
    f = audit_facts(gpu=ProbeSection(0, samples[("rtx4090x1-idle-desktop", "Q_GPU")][1]))
    f.sections["apps"] = apps
    f.sections["holders"] = ProbeSection(0, "devices=/dev/nvidia0 /dev/nvidiactl\npids=30912\n30912 600 Sl python\n"
                                            "ppid=30912:1\n")
    f.load_gpus()
    c = a8_zombies(f)
    return f"{c.status}: {c.evidence}"


@pytest.mark.parametrize(("apps", "said"), [
    (ProbeSection(18, MISMATCH.strip()), "driver/library version mismatch"),
    (ProbeSection(124, ""), "did not answer in time"),
    (ProbeSection(-1, ""), "did not answer in time"),  # the probe was cut short
])
def test_security_a8_calls_nothing_a_zombie_when_the_process_query_did_not_answer(apps, said) -> None:
    a8 = a8_with_apps(apps)
    assert a8.startswith("WARN: the driver did not answer") and said in a8, a8
    assert "pid 30912" not in a8 and "reap_vram stops" not in a8, a8


def test_a8_still_offers_an_old_unlisted_holder_when_the_driver_answered() -> None:
    a8 = a8_with_apps(ProbeSection(0, ""))
    assert "pid 30912 (Sl python, 600 s old)" in a8 and "reap_vram stops such holders" in a8, a8


async def test_security_audit_box_a8_says_the_driver_did_not_answer(smi, box, client) -> None:
    smi(mismatch_smi(box))
    res = structured(await client.call_tool("audit_box", {"host": "gpu1", "detail": "all"}))
    (a8,) = [c for c in res["outcomes"][0]["audit"]["checks"] if c["id"] == "A8"]
    assert a8["status"] == "WARN" and "the driver did not answer" in a8["evidence"], a8
    assert MISMATCH_STEP in a8["evidence"]


# The bounding helper other tools can reuse: a result that fits is returned as is; one that does
# not is cut list by list (full lengths in totals) and string by string, never below MIN_CHARS.
class _Row(BaseModel):
    name: str
    tags: list[str]


class _Listing(Bounded):
    rows: list[_Row]
    next_step: str


def test_bound_result_keeps_a_result_that_fits_and_cuts_one_that_does_not_to_fit() -> None:
    small = _Listing(rows=[_Row(name="a", tags=["x"])], next_step="call again with token=" + "f" * 32)
    assert bound_result(small, 1000) is small
    big = _Listing(rows=[_Row(name="n" * 5000, tags=["t"] * 300) for _ in range(400)], next_step=small.next_step)
    cut = bound_result(big, 4096)
    assert json_size(cut) <= 4096 and cut.truncated and cut.totals["rows"] == 400, cut.totals
    assert all(len(r.name) <= MIN_CHARS + 1 for r in cut.rows) and cut.next_step == small.next_step
    assert all(cut.totals[f"rows.{i}.tags"] == 300 for i in range(len(cut.rows)))
