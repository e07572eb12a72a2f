"""reap_vram against real processes holding a real device node (a character device named like
an NVIDIA node, /dev/nvidia97, standing in for the GPU: there is none here) on the test box over
sshd, with the fake nvidia-smi listing the "training" process as its compute process (a
captured row with that process's pid put in). Plan → confirm: only the zombie is stopped, the
trainer's child is left alone, a changed holder set refuses the token, a pid whose start time
differs is never signalled, and a token works once."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_server import scripts
from mcp_server.run.audit.gpu_checks import CANDIDATE, CHILD, PARENTS_UNREAD, a8_holders, a8_zombies, holder_verdict
from mcp_server.run.audit.probe import ProbeSection, build_script, parse_sections
from mcp_server.run.audit.reap import _judge
from tests.conftest import error_text, make_ssh_host, structured
from tests.support.fakegpu import audit_facts, device_node, load_samples
from tests.support.wait import until_sync

DEVICE = Path("/dev/nvidia97")


@pytest.fixture
def device() -> Iterator[Path]:
    with device_node(DEVICE) as node:
        yield node


@pytest.fixture
def holders(device: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def hold(started: list[subprocess.Popen[bytes]], command: str) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(["bash", "-c", command], stdin=subprocess.DEVNULL, start_new_session=True)
    started.append(p)
    return p


def child_of(pid: int) -> int:
    found = until_sync(lambda: subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split(),
                       what=f"a child of {pid}")
    return int(found[0])


@pytest.fixture
def reap_box(env, box, gpu, tmp_path) -> Path:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "profile": "generic-ssh", "durable_root": str(durable)}})
    gpu("h100x8-training")
    return box.fakebin / "scenario" / "q_apps"


def list_as_compute_process(q_apps: Path, pid: int) -> None:
    """nvidia-smi's compute-apps rows, the first with `pid` in place of the captured one."""
    rows = q_apps.read_text().splitlines()
    q_apps.write_text("\n".join([f"{pid}," + rows[0].split(",", 1)[1], *rows[1:]]) + "\n")


async def reap(client, **args) -> dict:
    return structured(await client.call_tool("reap_vram", {"host": "gpu1", **args}))


async def test_only_the_zombie_is_stopped_and_a_token_works_once(reap_box, holders, client) -> None:
    zombie = hold(holders, f"exec sleep 600 < {DEVICE}")
    trainer = hold(holders, f"sleep 600 < {DEVICE} & wait")
    worker = child_of(trainer.pid)
    list_as_compute_process(reap_box, trainer.pid)
    time.sleep(0.5)

    young = (await reap(client))["plan"]
    assert young["candidates"] == [] and young["token"] is None, "a holder under 120 s may still be starting"
    assert any(h["pid"] == zombie.pid and "younger than 120 s" in h["verdict"] for h in young["left_alone"])

    plan = (await reap(client, min_age_s=0))["plan"]
    assert [h["pid"] for h in plan["candidates"]] == [zombie.pid] and plan["token"]
    left = {h["pid"]: h["verdict"] for h in plan["left_alone"]}
    assert "dataloader worker" in left[worker], left
    assert plan["other_containers"], "the captured rows' other pids are not processes here: another container's"

    done = (await reap(client, token=plan["token"], min_age_s=0))["result"]
    assert done["reaped"] == [{"pid": zombie.pid, "outcome": "TERM"}]
    assert zombie.wait(timeout=10) is not None
    assert trainer.poll() is None and Path(f"/proc/{worker}").exists(), "the trainer and its worker live on"

    replay = await client.call_tool("reap_vram", {"host": "gpu1", "token": plan["token"], "min_age_s": 0})
    assert replay.is_error and "already used" in error_text(replay)


async def test_a_changed_holder_set_refuses_the_token_and_signals_nothing(reap_box, holders, client) -> None:
    first = hold(holders, f"exec sleep 600 < {DEVICE}")
    time.sleep(0.3)
    plan = (await reap(client, min_age_s=0))["plan"]
    assert [h["pid"] for h in plan["candidates"]] == [first.pid]
    second = hold(holders, f"exec sleep 600 < {DEVICE}")
    time.sleep(0.3)
    res = await client.call_tool("reap_vram", {"host": "gpu1", "token": plan["token"], "min_age_s": 0})
    assert res.is_error and "changed since the plan" in error_text(res)
    assert first.poll() is None and second.poll() is None, "nothing was signalled"


def test_a_pid_whose_start_time_differs_is_never_signalled(device: Path, holders) -> None:
    p = hold(holders, f"exec sleep 600 < {DEVICE}")
    time.sleep(0.2)
    out = subprocess.run(["sh", "-c", scripts.command("gpu_reap", "kill", f"{p.pid}:1")], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == f"reaped={p.pid}\treused" and p.poll() is None


async def test_a_token_from_nowhere_is_refused_naming_this_tool(reap_box, client) -> None:
    res = await client.call_tool("reap_vram", {"host": "gpu1", "token": "0" * 32})
    assert res.is_error and "did not come from a reap_vram plan" in error_text(res)


async def test_a_listed_trainers_forked_workers_are_never_offered_by_a8_nor_by_the_plan(
        reap_box, holders, client, env, tmp_path) -> None:
    # The trainer holds the device node and its forks inherit it: a worker and the worker's own child.
    trainer = hold(holders, f"exec 3< {DEVICE}; bash -c 'sleep 600 & wait' & wait")
    worker = child_of(trainer.pid)
    grandchild = child_of(worker)
    zombie = hold(holders, f"exec sleep 600 < {DEVICE}")
    list_as_compute_process(reap_box, trainer.pid)
    script = build_script(mounts=[], durable_root=str(tmp_path), python=None, proxy_hook=None, cache_dirs=[],
                          code_dir=None, expect_files={})
    host = make_ssh_host(env)
    try:
        sections = parse_sections((await host.run(script, timeout=60)).text)
    finally:
        await host.close()
    f = audit_facts(gpu=sections["gpu"])
    f.sections.update(apps=sections["apps"], holders=sections["holders"])
    f.load_gpus()

    seen = {pid: verdict for pid, _, _, verdict in a8_holders(f, min_age_s=0)}
    assert seen[worker] == seen[grandchild] == CHILD and seen[zombie.pid] == CANDIDATE, seen
    a8 = a8_zombies(f)
    assert a8.status == "PASS", "every holder is the trainer, its descendants, or under 120 s old"
    assert f"pid {worker} (" in a8.evidence and f"is a child of listed compute process {trainer.pid}" in a8.evidence
    assert f"pid {grandchild} (" in a8.evidence and "may be" not in a8.evidence, a8.evidence

    plan = (await reap(client, min_age_s=0))["plan"]
    assert [h["pid"] for h in plan["candidates"]] == [zombie.pid]
    left = {h["pid"]: h["verdict"] for h in plan["left_alone"]}
    assert left[worker] == left[grandchild] == CHILD, left


# A8 (the audit's report) and reap_vram's plan share one rule, gpu_checks.holder_verdict: A8 never
# offers to reap what the plan would leave alone. A8's probe reads each holder's parent chain
# (ppid=pid:parent pairs); from a probe that did not, while nvidia-smi lists a compute process an
# unlisted holder may be its dataloader worker and A8 says so instead of offering it. The GPU rows
# are the reconstructed 1 x RTX 4090 samples.
TRAINER, HOLDER = 30877, 30912


def a8_on(scenario: str, apps: str, holder_age_s: int, parents: str | None = None) -> str:
    samples = load_samples()
    f = audit_facts(gpu=ProbeSection(0, samples[(scenario, "Q_GPU")][1]))
    f.sections["apps"] = ProbeSection(0, apps)
    f.sections["holders"] = ProbeSection(0, f"devices=/dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm\npids={TRAINER} "
                                            f"{HOLDER}\n{TRAINER} 9000 Rl python\n{HOLDER} {holder_age_s} Sl python\n"
                                            + (f"ppid={parents}\n" if parents is not None else ""))
    f.load_gpus()
    c = a8_zombies(f)
    return f"{c.status}: {c.evidence}"


def test_a8_does_not_offer_a_listed_trainers_possible_worker_which_the_plan_leaves_alone() -> None:
    a8 = a8_on("rtx4090x1-training", load_samples()[("rtx4090x1-training", "Q_APPS")][1], 600)
    assert a8.startswith("WARN") and f"pid {HOLDER} (Sl python, 600 s old)" in a8, a8
    assert f"may be a dataloader worker of listed pid(s) [{TRAINER}]" in a8 and "reap_vram stops" not in a8


@pytest.mark.parametrize(("parents", "expect"), [
    (f"{HOLDER}:{TRAINER} {TRAINER}:1", f"PASS: no invisible VRAM holder (2 holder pid(s), each listed by nvidia-smi, "
                                        f"a child of a listed one, or under 120 s old); pid {HOLDER} (Sl python, 600 s "
                                        f"old) is a child of listed compute process {TRAINER}"),
    (f"{HOLDER}:4242 4242:{TRAINER} {TRAINER}:1", f"is a child of listed compute process {TRAINER}"),
    (f"{HOLDER}:4242 4242:1 {TRAINER}:1", f"pid {HOLDER} (Sl python, 600 s old): not a compute process nvidia-smi "
                                          "lists nor a child of one. reap_vram stops such holders"),
    (f"{HOLDER}:4242 {TRAINER}:1", f"may be a dataloader worker of listed pid(s) [{TRAINER}]"),
])
def test_a8_with_the_parent_chain_says_definitely_worker_or_zombie(parents: str, expect: str) -> None:
    """A chain through the trainer (at any depth) proves a worker; one that reaches pid 1 without it
    proves a zombie; a chain cut short (4242 ended meanwhile) proves nothing and keeps the hedge."""
    a8 = a8_on("rtx4090x1-training", load_samples()[("rtx4090x1-training", "Q_APPS")][1], 600, parents)
    assert expect in a8, a8
    plan = _judge([str(HOLDER), "1", "600", "u", "python", f"{TRAINER} 1"], {TRAINER}, frozenset(), 120, False)
    assert plan.verdict == "a child of a listed compute process (a dataloader worker): in use"


def test_a8_routes_an_old_unlisted_holder_on_an_idle_gpu_to_reap_vram() -> None:
    a8 = a8_on("rtx4090x1-idle-desktop", "", 600)
    assert a8.startswith("WARN") and "reap_vram stops such holders: call it for a plan" in a8, a8
    assert "explicit OK" in a8
    assert _judge([str(HOLDER), "1", "600", "u", "python", "1"], set(), frozenset(), 120, False).verdict == CANDIDATE


def test_a8_calls_nothing_a_zombie_where_pids_are_hidden_as_the_plan_does() -> None:
    hidden = load_samples()[("rtx4090x1-container-no-pid-access", "Q_APPS")][1]
    a8 = a8_on("rtx4090x1-training", hidden, 600)
    assert a8.startswith("WARN") and "process ids are not visible" in a8 and "reap_vram" not in a8, a8


def test_a8_sends_vram_held_by_an_unseen_process_to_restarting_that_container() -> None:
    a8 = a8_on("rtx4090x1-training", "", 30)
    assert "GPU 0: 21482 MiB used, no process listed" in a8 and "restart that container" in a8, a8


@pytest.mark.parametrize("listed", [set(), {TRAINER}])
@pytest.mark.parametrize("ancestors", [set(), {TRAINER}, {4242}])
@pytest.mark.parametrize(("age", "hidden"), [(5, False), (600, False), (600, True)])
def test_a8_offers_only_what_the_plan_could_reap(listed, ancestors, age, hidden) -> None:
    plan = holder_verdict(HOLDER, listed, ancestors=ancestors, age_s=age, hidden=hidden)
    audit = holder_verdict(HOLDER, listed, ancestors=None, age_s=age, hidden=hidden)
    if audit == CANDIDATE:
        assert plan == CANDIDATE, (audit, plan)
    if plan == CANDIDATE:
        assert audit in (CANDIDATE, PARENTS_UNREAD), "a zombie the plan would stop is reported by A8"
