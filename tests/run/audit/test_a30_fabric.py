"""A30's verdicts (multi-node fabric and network path), each from the facts the real on-box
scripts print: audit_fabric.sh and audit_mtu.sh run here through LocalHost, with fake
nvidia-smi / nv-fabricmanager / systemctl / ping on PATH replaying real captured output (the
Fabric blocks are tests/fixtures/gpu/q-fabric-*; the others are cited where they are defined).
Interface lists are given in the "name mtu" form audit_fabric.sh prints."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcp_server.hosts.local import LocalHost
from mcp_server.run.audit import multibox
from mcp_server.run.audit.multibox import Node, judge_a30
from tests.support.fakegpu import capture

# Fabric manager 530.30.02 installed against driver 530.41.03; the service then fails to start:
# https://github.com/NVIDIA/gpu-operator/issues/544
FM_MISMATCH = ("530.41.03", "530.30.02", "failed")

# `ping -M do` of a frame larger than the path MTU, as printed on a real Linux box (first a hop's
# ICMP "Frag needed", then the kernel's cached path MTU refusing further sends):
# https://jasonmurray.org/posts/2020/linuxmtucache
TOO_BIG = ("From xe-0-0-1-900w-mmr-wu-rt-0.net.wustl.edu (128.252.100.126) icmp_seq=1 Frag needed and DF set "
           "(mtu = 1500)\nping: local error: Message too long, mtu=1500\n")
# 8972-byte DF pings fail while 1472-byte ones pass between two jumbo-configured hosts:
# https://github.com/ipxe/ipxe/issues/690


def fake(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


# What audit_fabric.sh and audit_mtu.sh call besides the faked tools; ping is left out on purpose.
TOOLS = ("bash", "sh", "hostname", "cut", "timeout", "head", "awk", "grep", "ip", "sed", "cat", "tr", "printf")


@pytest.fixture
def fakebin(tmp_path, monkeypatch) -> Path:
    bindir, tools = tmp_path / "bin", tmp_path / "tools"
    bindir.mkdir()
    tools.mkdir()
    for tool in TOOLS:
        if found := shutil.which(tool):
            (tools / tool).symlink_to(found)
    monkeypatch.setenv("PATH", f"{bindir}:{tools}")
    return bindir


def gpu_node(bindir: Path, tmp_path: Path, driver: str, q_capture: str | None) -> None:
    report = tmp_path / "q.txt"
    report.write_text(capture(q_capture).text if q_capture else "")
    fake(bindir, "nvidia-smi", f'case "$*" in *driver_version*) echo {driver};; "-q") cat {report};; *) exit 2;; '
         "esac\n")


def fabric_manager(bindir: Path, version: str, state: str) -> None:
    # the version line in the layout nv-fabricmanager prints (reconstructed: only the number is read)
    fake(bindir, "nv-fabricmanager", f'echo "Fabric Manager version is : {version}"\n')
    fake(bindir, "systemctl", f'echo {state}\n[ "{state}" = active ]\n')


async def read_node(name: str) -> Node:
    return await multibox._node(LocalHost(), name)


def peer(name: str, *ifaces: str, addr: str = "10.0.0.2") -> Node:
    return Node(name, {"addr": addr, "ping": "/usr/bin/ping"}, sorted(ifaces), [])


async def test_fabric_manager_version_unequal_to_the_driver_fails_naming_both(fakebin, tmp_path) -> None:
    driver, fm, state = FM_MISMATCH
    gpu_node(fakebin, tmp_path, driver, "q-fabric-in-progress")
    fabric_manager(fakebin, fm, state)
    n1 = await read_node("n1")
    assert (n1.kv["driver"], n1.kv["fm_version"], n1.kv["fm_active"]) == (driver, fm, state)
    a30 = judge_a30([n1, peer("n2")], [{"size8972": "ok", "size1472": "ok"}])
    assert a30.status == "FAIL", a30
    assert f"n1: fabric manager {fm} differs from driver {driver}" in a30.evidence
    assert f"install nvidia-fabricmanager {driver}" in a30.evidence
    assert "n1: nvidia-fabricmanager is failed" in a30.evidence
    assert "fabric registration 'In Progress'" in a30.evidence


async def test_an_inactive_fabric_manager_fails_even_with_matching_versions(fakebin, tmp_path) -> None:
    gpu_node(fakebin, tmp_path, "580.159.04", None)
    fabric_manager(fakebin, "580.159.04", "inactive")
    n1 = await read_node("n1")
    a30 = judge_a30([n1, peer("n2")], [{"size8972": "ok", "size1472": "ok"}])
    assert a30.status == "FAIL" and "n1: nvidia-fabricmanager is inactive" in a30.evidence, a30
    assert "differs from driver" not in a30.evidence
    assert "sudo systemctl start nvidia-fabricmanager" in a30.evidence


async def test_an_active_matching_manager_adds_nothing_to_a_fabric_fault(fakebin, tmp_path) -> None:
    gpu_node(fakebin, tmp_path, "580.159.04", "q-fabric-unhealthy")
    fabric_manager(fakebin, "580.159.04", "active")
    n1 = await read_node("n1")
    assert n1.fabric and all(f[0] == "Completed" for f in n1.fabric)
    a30 = judge_a30([n1, peer("n2")], [{"size8972": "ok"}])
    assert a30.status == "FAIL" and "fabric health Unhealthy" in a30.evidence, "the capture's GPU is Unhealthy"
    assert "nvidia-fabricmanager is" not in a30.evidence


def test_an_inactive_manager_where_no_gpu_reports_a_fabric_only_warns() -> None:
    pcie = Node("n1", {"driver": "580.159.04", "fm_version": "580.159.04", "fm_active": "inactive"}, [],
                [("N/A", "N/A", "")])
    a30 = judge_a30([pcie, peer("n2")], [{"size8972": "ok"}])
    assert a30.status == "WARN" and "nvidia-fabricmanager is inactive" in a30.evidence, a30
    assert "on PCIe cards this is harmless" in a30.evidence


async def probe(bindir: Path, answers: dict[str, tuple[str, int]]) -> dict[str, str]:
    """audit_mtu.sh's answer when ping, per payload size, prints `text` and exits with `rc`."""
    cases = "".join(f'  *"-s {size}"*) printf %s \'{text}\'; exit {rc};;\n' for size, (text, rc) in answers.items())
    fake(bindir, "ping", f'case "$*" in\n{cases}esac\nexit 1\n')
    return await multibox._mtu(LocalHost(), "10.0.0.2")


PASSES = ("1480 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.2 ms\n", 0)


async def test_jumbo_frames_set_but_dropped_on_the_path_warn_mn4(fakebin) -> None:
    result = await probe(fakebin, {"8972": (TOO_BIG, 1), "1472": PASSES})
    assert result == {"size8972": "fail", "size1472": "ok"}
    first, second = peer("n1", "eth0 9000"), peer("n2", "eth0 9000")
    a30 = judge_a30([first, second], [result])
    assert a30.status == "WARN", a30
    assert "n1 -> n2 (10.0.0.2): 9000-byte frames do not pass, 1500-byte ones do" in a30.evidence
    assert "n1 eth0 mtu 9000" in a30.evidence and "(MN4)" in a30.evidence


async def test_a_1500_byte_network_with_no_jumbo_interface_passes(fakebin) -> None:
    result = await probe(fakebin, {"8972": (TOO_BIG, 1), "1472": PASSES})
    a30 = judge_a30([peer("n1", "eth0 1500", "docker0 1500"), peer("n2", "eth0 1500")], [result])
    assert a30.status == "PASS", a30
    assert a30.evidence.startswith("1500-byte frames pass from n1 to every peer")


async def test_interfaces_below_1500_are_not_reported_as_a_dead_peer(fakebin) -> None:
    result = await probe(fakebin, {"8972": (TOO_BIG, 1), "1472": (TOO_BIG, 1)})
    assert result == {"size8972": "fail", "size1472": "fail"}
    a30 = judge_a30([peer("n1", "ens4 1460"), peer("n2", "ens4 1460")], [result])
    assert a30.status == "WARN" and "path MTU was not measured" in a30.evidence, a30
    assert "ping -M do -s 1432 10.0.0.2" in a30.evidence and "firewalled" not in a30.evidence


async def test_a_peer_that_answers_nothing_warns(fakebin) -> None:
    lost = ("\n--- 10.0.0.2 ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n", 1)
    result = await probe(fakebin, {"8972": lost, "1472": lost})
    a30 = judge_a30([peer("n1", "eth0 1500"), peer("n2", "eth0 1500")], [result])
    assert a30.status == "WARN" and "no answer to a 1500-byte ping" in a30.evidence, a30


async def test_no_ping_on_the_first_box_warns_that_the_path_was_not_measured(fakebin, tmp_path) -> None:
    gpu_node(fakebin, tmp_path, "580.159.04", None)
    n1 = await read_node("n1")
    assert n1.kv["ping"] == "" and n1.kv["driver"] == "580.159.04"
    a30 = judge_a30([n1, peer("n2")], None)
    assert a30.status == "WARN" and "ping is not installed on n1" in a30.evidence, a30


def test_ping_missing_is_reported_even_when_the_box_has_other_tools() -> None:
    a30 = judge_a30([Node("n1", {"ping": ""}, ["eth0 1500"], []), peer("n2", "eth0 1500")], None)
    assert a30.status == "WARN" and "ping is not installed on n1" in a30.evidence, a30
    assert "install iputils-ping" in a30.evidence


def test_a_shared_interface_name_among_others_is_named_for_nccl() -> None:
    nodes = [peer("n1", "eth0 1500", "ib0 2044"), peer("n2", "eth0 1500")]
    a30 = judge_a30(nodes, [{"size8972": "fail", "size1472": "ok"}])
    assert a30.status == "WARN", a30
    assert "set NCCL_SOCKET_IFNAME to the one of eth0 that links them" in a30.evidence


def test_no_common_interface_name_suggests_a_prefix_list() -> None:
    nodes = [peer("n1", "eth0 1500"), peer("n2", "ens5 1500")]
    a30 = judge_a30(nodes, [{"size8972": "fail", "size1472": "ok"}])
    assert a30.status == "WARN" and "NCCL_SOCKET_IFNAME to a list" in a30.evidence and "=ens5,eth0" in a30.evidence


def test_container_plumbing_that_differs_per_node_is_not_a_hint() -> None:
    nodes = [peer("n1", "eth0 1500", "veth3f2a1b0@if5 1500", "docker0 1500"), peer("n2", "eth0 1500", "br-9c1d 1500")]
    a30 = judge_a30(nodes, [{"size8972": "fail", "size1472": "ok"}])
    assert a30.status == "PASS", a30


def test_the_same_interface_with_different_mtus_warns_mn4() -> None:
    nodes = [peer("n1", "eth0 9000"), peer("n2", "eth0 1500")]
    a30 = judge_a30(nodes, [{"size8972": "fail", "size1472": "ok"}])
    assert a30.status == "WARN" and "eth0 has different MTUs (n1 9000, n2 1500)" in a30.evidence, a30
