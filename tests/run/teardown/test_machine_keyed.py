"""Teardown's verification gate is keyed by the machine, not by the inventory name: a verification
made through one name of a box lifts G2 for another name of the same box, and never for a
different machine, not even one under the same name. The machine is this one, told apart by
RGT_MACHINE_ID (what verify_identity.sh reads before /etc/machine-id)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_server.ledger import Event
from mcp_server.run.jobs.listing import HostRuns, RunSummary
from mcp_server.run.jobs.rundir import RunOutputs
from mcp_server.run.teardown.gates import g2
from mcp_server.verify.artifacts.identity import HostIdentity
from mcp_server.verify.artifacts.record import of_machine
from tests.conftest import Caller, Env, structured
from tests.run.teardown.test_gates import good


@pytest.fixture
def two_names(env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`a` and `b`: one local machine under two inventory names (same durable root), on a profile
    whose terminate loses the disk, so G2 applies. Returns the result root to verify."""
    monkeypatch.setenv("RGT_MACHINE_ID", "machine-a")
    results, durable = tmp_path / "results", tmp_path / "durable"
    results.mkdir()
    durable.mkdir()
    (results / "metrics.json").write_text('{"acc": 0.91}')
    entry = {"destination": "local", "profile": "runpod", "durable_root": str(durable), "instance_id": "pod-1",
             "verify_roots": [str(results)]}
    env.write_inventory({"a": entry, "b": entry})
    return results


async def finished_run(client: Caller, host: str) -> str:
    res = structured(await client.call_tool("launch_detached", {"host": host, "command": "true", "probe_s": 0}))
    run_id = str(res["outcomes"][0]["launch"]["run_id"])
    waited = structured(await client.call_tool("wait_for_run", {"host": host, "run_id": run_id, "timeout_s": 30}))
    assert waited["ended"] and waited["state"]["status"] == "succeeded", waited
    return run_id


async def verify(client: Caller, host: str, root: Path) -> None:
    for _ in range(20):
        r = structured(await client.call_tool("verify_artifacts", {"host": host, "root": str(root),
                                                                   "roster": ["metrics.json"]}))
        if r["done"]:
            assert r["passed"], r["findings"]
            return
    raise AssertionError("verification did not finish")


async def g2_of(client: Caller, host: str) -> dict[str, Any]:
    plan = structured(await client.call_tool("plan_teardown", {"host": host, "action": "terminate"}))
    return dict(next(g for g in plan["gates"] if g["id"] == "G2"))


async def test_a_verification_through_one_name_meets_the_gate_for_the_same_machine_under_another(
        two_names: Path, client: Caller) -> None:
    await finished_run(client, "a")
    await verify(client, "a", two_names)
    gate = await g2_of(client, "b")
    assert gate["state"] == "pass", gate
    assert "made through 'a'" in gate["evidence"]


async def test_a_verification_of_another_machine_never_counts_not_even_under_the_same_name(
        two_names: Path, client: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    await verify(client, "a", two_names)
    monkeypatch.setenv("RGT_MACHINE_ID", "machine-b")  # name `a` now reaches another machine
    for name in ("a", "b"):
        gate = await g2_of(client, name)
        assert gate["state"] == "fail" and "no passing verify_artifacts of this machine" in gate["evidence"], gate


def ident(machine_id: str = "", host_key: str = "", hostname: str = "pod") -> HostIdentity:
    return HostIdentity(machine_id=machine_id, machine_id_source="/etc/machine-id" if machine_id else "",
                        hostname=hostname, host_key=host_key)


def recorded(who: HostIdentity, host: str = "pod", **fields: Any) -> Event:
    data = good() | {"producer": who.model_dump(mode="json"), "host": host} | fields
    return Event(id=7, ts=100.0, kind="verification", host=host, run_id="r1", summary="", data=data)


MATCHES = {
    "the same machine-id under another name": (ident("m1"), "other", ident("m1", hostname="renamed"), True),
    "another machine-id under the same name": (ident("m1"), "pod", ident("m2"), False),
    "a machine-id on one side only": (ident("m1"), "pod", ident(""), False),
    "no machine-id, the same host key under another name": (ident(host_key="SHA256:k"), "other",
                                                             ident(host_key="SHA256:k"), True),
    "no machine-id, another host key": (ident(host_key="SHA256:k"), "pod", ident(host_key="SHA256:j"), False),
    "nothing but the hostname, under the same name": (ident(), "pod", ident(), True),
    "nothing but the hostname, under another name": (ident(), "other", ident(), False),
    "nothing but the hostname, another hostname": (ident(), "pod", ident(hostname="elsewhere"), False),
}


@pytest.mark.parametrize(("producer", "through", "box", "counts"), MATCHES.values(), ids=MATCHES.keys())
def test_which_recorded_verifications_are_the_boxs(producer: HostIdentity, through: str, box: HostIdentity,
                                                   counts: bool) -> None:
    verifs = of_machine([recorded(producer, through)], box, "pod")
    assert len(verifs.valid) == int(counts) and verifs.unreadable == []


def test_an_unreadable_record_is_disclosed_only_under_its_own_name() -> None:
    broken = recorded(ident("m1"), "pod", producer={"machine_id": 7})
    assert of_machine([broken], ident("m1"), "pod").unreadable
    assert not of_machine([broken], ident("m1"), "other").unreadable


def test_a_home_relative_root_verified_through_another_name_covers_nothing_there() -> None:
    """Two names of one machine may log in as two users: `~/out` through `a` is not `~/out` through `b`."""
    runs = HostRuns(host="b", live=0, missing_on_box=[], runs=[
        RunSummary(run_id="r1", status="succeeded", in_ledger=True, ended_at=50.0,
                   outputs=RunOutputs(root="~/out", patterns=["metrics.json"]))])
    verifs = of_machine([recorded(ident("m1"), "a", root="~/out", abs_root="/home/alice/out")], ident("m1"), "b")
    assert g2(runs, verifs, needed=True, host="b")[0].state == "fail"
    assert g2(runs, verifs, needed=True, host="a")[0].state == "pass", "under its own name `~` means the same"
