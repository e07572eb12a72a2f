"""audit_box over the boxes of one job (`one_job`): A21 one shared filesystem and A30 the fabric
and network path, through the real MCP client, with one box as `local` and one over the test
sshd (the same machine: directories stand in for filesystems that are or are not shared). The
Fabric blocks A30 judges are real `nvidia-smi -q` captures (tests/fixtures/gpu/q-fabric-*)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import error_text, structured
from tests.support.fakegpu import capture


@pytest.fixture
def two_boxes(env, box, tmp_path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return a, b


def inventory(env, first: Path, second: Path) -> None:
    env.write_inventory({"n1": {"destination": "local", "durable_root": str(first)},
                         "n2": {"destination": "testbox", "durable_root": str(second)}})


async def job_checks(client, **args) -> dict[str, dict]:
    res = structured(await client.call_tool("audit_box", {"hosts": ["n1", "n2"], "one_job": True, **args}))
    assert all(o["error"] is None for o in res["outcomes"]), res["outcomes"]
    return {c["id"]: c for c in res["job_checks"]}


async def test_one_shared_directory_passes_a21_and_leaves_nothing_behind(env, two_boxes, client) -> None:
    shared, _ = two_boxes
    inventory(env, shared, shared)
    checks = await job_checks(client)
    assert checks["A21"]["status"] == "PASS" and "is seen by n2" in checks["A21"]["evidence"]
    assert list(shared.iterdir()) == [] or all(not p.name.startswith(".rgt-a21") for p in shared.iterdir())
    want = "PASS" if shutil.which("ping") else "WARN"
    assert checks["A30"]["status"] == want, checks["A30"]
    if want == "PASS":
        assert "9000-byte frames pass from n1 to every peer" in checks["A30"]["evidence"]


async def test_boxes_that_do_not_share_the_durable_root_fail_a21_naming_the_blind_box(env, two_boxes, client) -> None:
    a, b = two_boxes
    inventory(env, a, b)
    checks = await job_checks(client)
    a21 = checks["A21"]
    assert a21["status"] == "FAIL" and f"n2 (absent under {b})" in a21["evidence"], a21
    assert not any(p.name.startswith(".rgt-a21") for p in a.iterdir()), "the marker is removed"
    shared = await job_checks(client, shared_path=str(a))
    assert shared["A21"]["status"] == "PASS", "both see the directory given as shared_path"


@pytest.mark.parametrize(("name", "says"), [
    ("q-fabric-in-progress", "fabric registration 'In Progress'"),
    ("q-fabric-unhealthy", "fabric health Unhealthy"),
    ("q-fabric-insufficient", "fabric status 'Insufficient Resources'"),
])
async def test_a_broken_nvswitch_fabric_on_a_node_fails_a30(env, two_boxes, box, client, tmp_path, name,
                                                          says) -> None:
    shared, _ = two_boxes
    inventory(env, shared, shared)
    report = tmp_path / "q.txt"
    report.write_text(capture(name).text)
    (box.fakebin / "nvidia-smi").write_text(
        f'#!/bin/sh\ncase "$*" in *driver_version*) echo 580.159.04;; "-q") cat {report};; *) exit 2;; esac\n')
    (box.fakebin / "nvidia-smi").chmod(0o755)
    try:
        a30 = (await job_checks(client))["A30"]
    finally:
        (box.fakebin / "nvidia-smi").unlink()
    assert a30["status"] == "FAIL" and f"n2: {says}" in a30["evidence"], a30


async def test_one_job_needs_hosts(client) -> None:
    res = await client.call_tool("audit_box", {"host": "local", "one_job": True})
    assert res.is_error and "one_job needs `hosts`" in error_text(res)
