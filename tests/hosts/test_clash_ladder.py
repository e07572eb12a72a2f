"""The Clash/Mihomo fallback ladder end to end (knowledge run.md §7.6), in network namespaces the test
creates: the system resolver answers Clash fake IPs, a listener accepts and never sends a banner, a
policy route captures the box's port into a TUN device nothing reads, and a local DoH endpoint over
HTTPS (test CA) answers the real address; the box is a real OpenSSH sshd. The ladder connects through
the fallback only for those three evidence classes and refuses it for a refused port, a changed host
key and an auth failure. One namespace run (tests/hosts/ladder_probe.py) serves every test here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_server.hosts.doctor_route import is_tun, linux_route_device, macos_route_device
from tests.hosts.ladder_probe import ADDRESSES, BOX, PORT, TUN, hosts_file
from tests.hosts.test_doctor import NETNS_SCRIPT, namespaces_available
from tests.support.doh_server import make_tls

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "net"
needs_namespaces = pytest.mark.skipif(not namespaces_available(), reason="needs unshare -mn (root or user namespaces)")


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every scenario's outcome, by name, from one run of the probe in fresh namespaces."""
    root = tmp_path_factory.mktemp("ladder")
    tls = make_tls(root / "tls")
    (root / "hosts").write_text(hosts_file())
    (root / "work").mkdir()
    out = subprocess.run(
        ["unshare", "-mn", "--", "sh", str(NETNS_SCRIPT), str(root / "hosts"), ",".join(ADDRESSES),
         sys.executable, "-m", "tests.hosts.ladder_probe", str(tls.ca.parent), str(root / "work")],
        capture_output=True, text=True, timeout=240, cwd=REPO,
        env={**os.environ, "RGT_TEST_TUN_CAPTURE": f"{TUN}:{PORT}"})
    assert out.returncode == 0, out.stderr[-3000:]
    return {d["scenario"]: d for d in map(json.loads, out.stdout.splitlines())}


def fallback_of(outcome: dict[str, Any]) -> dict[str, Any]:
    assert outcome["ok"], outcome.get("error")
    assert outcome["text"] == "reached\n", "a command ran on the box over the fallback connection"
    transport = outcome["transport"]
    assert transport["kind"] == "clash_fallback" and transport["bound_to"] == "interface lo"
    return transport


@needs_namespaces
def test_a_clash_fake_ip_connects_through_the_doh_address_on_a_bound_socket(ladder: dict[str, Any]) -> None:
    transport = fallback_of(ladder["fakebox"])
    assert transport["why"] == "fake_ip" and transport["address"] == BOX
    assert transport["doh"]["answers"] == [BOX] and transport["doh"]["name"] == "fakebox.example"
    assert "198.18.0.9 (Clash fake-IP range 198.18.0.0/15)" in " ".join(transport["evidence"])
    assert ladder["fakebox"]["doh_queries"] == 1, "the name is resolved once over DoH, never again"


@needs_namespaces
def test_a_banner_timeout_connects_through_the_fallback(ladder: dict[str, Any]) -> None:
    transport = fallback_of(ladder["silentbox"])
    assert transport["why"] == "banner_timeout" and transport["address"] == BOX
    assert ladder["silentbox"]["seconds"] < 15, "bounded: the direct try, a short doctor, then the fallback"


@needs_namespaces
def test_a_tun_device_capturing_the_route_is_found_and_bypassed(ladder: dict[str, Any]) -> None:
    transport = fallback_of(ladder["tunbox"])
    assert transport["why"] == "tun_interference" and transport["address"] == TUN
    assert any("tun7 is a TUN device" in line for line in transport["evidence"])


@needs_namespaces
def test_no_fallback_for_a_refused_port(ladder: dict[str, Any]) -> None:
    outcome = ladder["refusedbox"]
    assert not outcome["ok"] and outcome["error_class"] == "TransportError" and outcome["transport"] is None
    assert outcome["doh_queries"] == 0
    error = outcome["error"]
    assert "clash fallback: not tried (connection_refused is not path evidence" in error
    assert "a rental's port changes on re-create" in error and "update the inventory's destination" in error


@needs_namespaces
def test_no_fallback_for_a_changed_host_key_both_fingerprints_shown(ladder: dict[str, Any]) -> None:
    outcome = ladder["keybox"]
    assert not outcome["ok"] and outcome["error_class"] == "HostKeyError" and outcome["doh_queries"] == 0
    assert "HOST KEY CHANGED" in outcome["error"] and outcome["error"].count("SHA256:") >= 2
    assert "clash fallback: not tried (host_key_mismatch" in outcome["error"]


@needs_namespaces
def test_over_the_fallback_a_key_not_pinned_for_the_logical_name_is_refused(ladder: dict[str, Any]) -> None:
    outcome = ladder["fakekey"]
    assert not outcome["ok"] and outcome["error_class"] == "HostKeyError", "a changed key stays a key error"
    error = outcome["error"]
    assert "HOST KEY CHANGED for [fakekey.example]:40022" in error, "checked against the logical name's pin"
    assert "the clash fallback ran (fake_ip" in error and "says nothing about jobs on the box" in error
    assert error.count("SHA256:") >= 2


@needs_namespaces
def test_no_fallback_for_an_auth_failure(ladder: dict[str, Any]) -> None:
    outcome = ladder["authbox"]
    assert not outcome["ok"] and outcome["error_class"] == "AuthError" and outcome["doh_queries"] == 0
    assert "clash fallback: not tried (auth_failed" in outcome["error"]


@needs_namespaces
def test_audit_box_reports_the_transport_it_used_through_the_mcp_client(ladder: dict[str, Any]) -> None:
    outcome = ladder["mcp_audit_box"]
    assert outcome["ok"], outcome["error"]
    assert outcome["verdict"] in ("PASS", "WARN")
    assert outcome["transport"]["kind"] == "clash_fallback" and outcome["transport"]["why"] == "fake_ip"
    assert outcome["transport"]["doh"]["selected_ip"] == BOX


# -- the route step's parsers, on captured output ---------------------------------------------------

def fixture(name: str) -> str:
    return (FIXTURES / name).read_text().split("\n", 1)[1]  # the first line names the source


def test_linux_route_output_names_its_device() -> None:
    assert linux_route_device(fixture("ip-route-get-tun.txt")) == "tun7"
    assert linux_route_device(fixture("ip-route-get-local.txt")) == "lo"
    assert linux_route_device("RTNETLINK answers: Network is unreachable\n") is None


def test_macos_route_output_names_its_interface() -> None:
    assert macos_route_device(fixture("route-n-get-macos.txt")) == "en1"
    assert macos_route_device("route: writing to routing socket: not in table\n") is None


def test_a_device_is_tun_by_its_tun_flags_on_linux_and_its_name_on_macos(tmp_path: Path) -> None:
    (tmp_path / "Meta").mkdir()
    (tmp_path / "Meta" / "tun_flags").write_text("0x1002\n")
    (tmp_path / "eth0").mkdir()
    assert is_tun("Meta", "linux", tmp_path) and not is_tun("eth0", "linux", tmp_path)
    assert is_tun("utun4", "darwin") and not is_tun("en0", "darwin")
    assert not is_tun("utun4", "win32"), "not checked on Windows"
