"""The Clash/Mihomo fallback ladder's pieces against real components: a local DoH endpoint over HTTPS
with a test CA (in a network namespace whose system resolver answers a fake IP), sockets bound to
`lo` and to 127.0.0.1 reading the banner of the real OpenSSH sshd, and the plan rule on doctor
reports. The macOS and Windows socket options are checked on their inputs only (not run here)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_server.errors import ConfigError, InputError, TransportError
from mcp_server.hosts.doctor import diagnose
from mcp_server.hosts.doctor_models import DoctorReport, EffectiveSettings, FailureClass, failed
from mcp_server.hosts.doh import doh_resolve
from mcp_server.hosts.fallback import (
    IP_BOUND_IF,
    IP_UNICAST_IF,
    fallback_plan,
    interface_option,
    open_bound_socket,
    pin_name,
)
from mcp_server.hosts.fallback_options import DEFAULT_DOH_RESOLVER, resolver_url_problem, validate_resolver_url
from mcp_server.settings import Settings
from tests.conftest import Env
from tests.hosts.test_doctor import NETNS_SCRIPT, namespaces_available
from tests.support.doh_server import DohServer, TlsFiles, make_tls
from tests.support.sshd import Sshd, free_port

REPO = Path(__file__).resolve().parents[2]
NAME = "box.example"


def a_record(ip: str, ttl: int = 300) -> dict[str, object]:
    return {"name": NAME, "type": 1, "TTL": ttl, "data": ip}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("doh-tls"))


@pytest.fixture
async def doh(tls: TlsFiles) -> AsyncIterator[DohServer]:
    server = await DohServer(tls).start()
    yield server
    await server.close()


# -- DoH --------------------------------------------------------------------------------------------

@pytest.mark.skipif(not namespaces_available(), reason="needs unshare -mn (root or user namespaces)")
def test_doh_answers_the_real_address_where_the_system_answers_a_clash_fake_ip(tls: TlsFiles, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n198.18.0.9 {NAME}\n")
    out = subprocess.run(
        ["unshare", "-mn", "--", "sh", str(NETNS_SCRIPT), str(hosts), "198.18.0.9,10.77.0.2",
         sys.executable, "-m", "tests.hosts.doh_probe", str(tls.ca.parent), NAME, "10.77.0.2"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout)

    assert seen["system"] == ["198.18.0.9"]
    assert seen["doh"]["answers"] == ["10.77.0.2"] and seen["doh"]["selected_ip"] == "10.77.0.2"
    assert seen["doh"]["response_sha256"] == hashlib.sha256(b'{"answers":["10.77.0.2"]}').hexdigest()
    assert seen["bound_to"] == "lo" and seen["banner"] == "SSH-2.0-OpenSSH_netns_box"


async def test_doh_asks_the_json_api_and_records_unique_ipv4_answers(doh: DohServer, tls: TlsFiles) -> None:
    doh.records[NAME] = [{"name": NAME, "type": 5, "TTL": 60, "data": "edge.example."},
                         a_record("203.0.113.7"), a_record("203.0.113.8"), a_record("203.0.113.7")]

    answer = await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca)

    assert doh.requests == [(f"/dns-query?name={NAME}&type=A", "application/dns-json")]
    assert (answer.name, answer.resolver_url) == (NAME, doh.url())
    assert answer.answers == ["203.0.113.7", "203.0.113.8"] and answer.selected_ip == "203.0.113.7"
    assert answer.observed_at.endswith("Z")


async def test_doh_response_hash_is_the_canonical_json_and_stable_across_queries(doh: DohServer, tls: TlsFiles) -> None:
    doh.records[NAME] = [a_record("203.0.113.7", ttl=300)]
    first = await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca)
    doh.records[NAME] = [a_record("203.0.113.7", ttl=17)]  # only the TTL moved
    second = await doh_resolve(NAME, doh.url("/resolve"), timeout_s=5, ca_file=tls.ca)

    expected = hashlib.sha256(b'{"answers":["203.0.113.7"]}').hexdigest()
    assert first.response_sha256 == second.response_sha256 == expected


async def test_doh_selects_the_first_answer_outside_the_fake_ip_range(doh: DohServer, tls: TlsFiles) -> None:
    doh.records[NAME] = [a_record("198.18.0.9"), a_record("203.0.113.7")]

    answer = await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca)

    assert answer.answers == ["198.18.0.9", "203.0.113.7"] and answer.selected_ip == "203.0.113.7"


async def test_doh_with_only_fake_ip_answers_is_an_error(doh: DohServer, tls: TlsFiles) -> None:
    doh.records[NAME] = [a_record("198.18.0.9")]

    with pytest.raises(TransportError, match="no usable IPv4"):
        await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca)


async def test_doh_nxdomain_says_the_name_has_no_address(doh: DohServer, tls: TlsFiles) -> None:
    with pytest.raises(TransportError, match="found no address") as caught:
        await doh_resolve("nothing.example", doh.url(), timeout_s=5, ca_file=tls.ca)
    assert caught.value.observed == "DNS status 3"


async def test_doh_a_record_that_is_not_ipv4_is_a_malformed_answer(doh: DohServer, tls: TlsFiles) -> None:
    doh.documents[NAME] = {"Status": 0, "Answer": [{"type": 1, "data": "not-an-ip"}]}

    with pytest.raises(TransportError, match="malformed") as caught:
        await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca)
    assert "not-an-ip" not in str(caught.value)


async def test_doh_refuses_a_resolver_certificate_its_ca_did_not_sign(doh: DohServer, tmp_path: Path) -> None:
    doh.records[NAME] = [a_record("203.0.113.7")]
    stranger = make_tls(tmp_path / "other-ca")

    with pytest.raises(TransportError, match="cannot query the DoH resolver") as caught:
        await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=stranger.ca)
    assert "says nothing about the box" in str(caught.value)
    assert doh.requests == []


async def test_doh_never_goes_through_the_environment_proxy(
        doh: DohServer, tls: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, dead)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    doh.records[NAME] = [a_record("203.0.113.7")]

    answer = await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca)

    assert answer.selected_ip == "203.0.113.7"


async def test_doh_query_can_leave_from_a_local_address(doh: DohServer, tls: TlsFiles) -> None:
    doh.records[NAME] = [a_record("203.0.113.7")]

    answer = await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca, local_address="127.0.0.1")
    assert answer.selected_ip == "203.0.113.7"
    with pytest.raises(TransportError):
        await doh_resolve(NAME, doh.url(), timeout_s=5, ca_file=tls.ca, local_address="192.0.2.55")


async def test_doh_a_silent_resolver_fails_within_the_bound(tls: TlsFiles) -> None:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        start = asyncio.get_running_loop().time()
        with pytest.raises(TransportError, match="no answer within 0.5 s"):
            await doh_resolve(NAME, f"https://127.0.0.1:{port}/dns-query", timeout_s=0.5, ca_file=tls.ca)
        assert asyncio.get_running_loop().time() - start < 3
    finally:
        server.close()


@pytest.mark.parametrize(("url", "reason"), [
    ("http://1.1.1.1/dns-query", "not_https"),
    ("ftp://1.1.1.1/dns-query", "not_https"),
    ("https:///dns-query", "no_host"),
    ("https://user:secret@1.1.1.1/dns-query", "userinfo"),
    ("https://user@1.1.1.1/dns-query", "userinfo"),
    ("https://1.1.1.1/dns-query?name=x", "query"),
    ("https://1.1.1.1/dns-query?", "query"),
    ("https://1.1.1.1/dns-query#frag", "fragment"),
    ("https://1.1.1.1/other", "path"),
    ("https://1.1.1.1/dns-query/", "path"),
    ("https://1.1.1.1:0/dns-query", "port"),
    ("https://1.1.1.1:99999/dns-query", "unparsable"),
    ("https://1.1.1.1/dns query", "path"),
])
def test_a_bad_resolver_url_is_refused_with_a_named_reason(url: str, reason: str) -> None:
    assert resolver_url_problem(url) == reason
    with pytest.raises(ConfigError) as caught:
        validate_resolver_url(url)
    assert caught.value.observed == reason
    assert url not in str(caught.value)


@pytest.mark.parametrize("url", [
    DEFAULT_DOH_RESOLVER, "https://dns.google/resolve", "https://1.1.1.1", "https://1.1.1.1/",
    "https://doh.example:8443/dns-query", "https://[2606:4700:4700::1111]/dns-query",
])
def test_a_resolver_url_of_the_accepted_forms_passes(url: str) -> None:
    assert resolver_url_problem(url) is None and validate_resolver_url(url) == url


async def test_doh_refuses_a_bad_url_and_an_ip_literal_before_any_query(doh: DohServer, tls: TlsFiles) -> None:
    with pytest.raises(ConfigError):
        await doh_resolve(NAME, doh.url().replace("https", "http"), timeout_s=5, ca_file=tls.ca)
    with pytest.raises(InputError, match="nothing to resolve"):
        await doh_resolve("203.0.113.7", doh.url(), timeout_s=5, ca_file=tls.ca)
    with pytest.raises(InputError, match="not a DNS host name"):
        await doh_resolve("-oProxyCommand=x", doh.url(), timeout_s=5, ca_file=tls.ca)
    assert doh.requests == []


# -- the bound socket -------------------------------------------------------------------------------

async def banner_of(sock: socket.socket) -> bytes:
    with sock:
        return await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 255), 5)


async def test_a_socket_bound_to_a_local_address_reaches_the_sshd(box: Sshd) -> None:
    sock = await open_bound_socket("127.0.0.1", box.port, interface=None, local_address="127.0.0.1", timeout_s=5)

    assert sock.getsockname()[0] == "127.0.0.1" and sock.getpeername() == ("127.0.0.1", box.port)
    assert (await banner_of(sock)).startswith(b"SSH-2.0-")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_BINDTODEVICE is Linux")
async def test_a_socket_bound_to_the_loopback_interface_reaches_the_sshd(box: Sshd) -> None:
    sock = await open_bound_socket("127.0.0.1", box.port, interface="lo", local_address=None, timeout_s=5)

    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, 16).rstrip(b"\0") == b"lo"
    assert (await banner_of(sock)).startswith(b"SSH-2.0-")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_BINDTODEVICE is Linux")
async def test_an_interface_this_machine_lacks_is_a_config_error(box: Sshd) -> None:
    with pytest.raises(ConfigError, match="no network interface") as caught:
        await open_bound_socket("127.0.0.1", box.port, interface="rgt-nosuch0", local_address=None, timeout_s=5)
    assert "rgt-nosuch0" not in str(caught.value)


async def test_a_local_address_not_on_this_machine_is_a_config_error(box: Sshd) -> None:
    with pytest.raises(ConfigError, match="not an address of this machine"):
        await open_bound_socket("127.0.0.1", box.port, interface=None, local_address="192.0.2.55", timeout_s=5)


@pytest.mark.parametrize("ip", ["localhost", "box.example", "::1", "127.1", ""])
async def test_the_bound_socket_never_resolves_a_name(ip: str) -> None:
    with pytest.raises(InputError, match="never resolves a name"):
        await open_bound_socket(ip, 22, interface=None, local_address=None, timeout_s=1)


async def test_the_bound_socket_refuses_a_clash_fake_ip() -> None:
    with pytest.raises(InputError, match="fake IP"):
        await open_bound_socket("198.18.0.9", 22, interface=None, local_address=None, timeout_s=1)


async def test_a_refused_port_is_a_transport_error_that_says_nothing_about_jobs() -> None:
    port = free_port()
    with pytest.raises(TransportError, match="refused") as caught:
        await open_bound_socket("127.0.0.1", port, interface=None, local_address="127.0.0.1", timeout_s=5)
    assert "says nothing about jobs" in str(caught.value)


def test_linux_binds_by_interface_name() -> None:
    assert interface_option("eth0", platform="linux") == (1, 25, b"eth0")
    with pytest.raises(InputError, match="longer than Linux allows"):
        interface_option("a" * 16, platform="linux")


def test_macos_binds_by_interface_index_in_host_order() -> None:
    assert interface_option("en0", platform="darwin", index_of={"en0": 4}.__getitem__) == (0, IP_BOUND_IF, 4)
    assert interface_option("9", platform="darwin") == (0, 25, 9)


def test_windows_binds_by_interface_index_in_network_byte_order() -> None:
    index_of = {"ethernet_32769": 7}.__getitem__
    assert interface_option("ethernet_32769", platform="win32", index_of=index_of) == (0, IP_UNICAST_IF,
                                                                                        b"\x00\x00\x00\x07")
    assert interface_option("300", platform="win32") == (0, 31, b"\x00\x00\x01\x2c")


def test_interface_names_are_checked_before_any_lookup() -> None:
    def no_such(name: str) -> int:
        raise OSError("no interface")

    with pytest.raises(ConfigError, match="no network interface"):
        interface_option("en9", platform="darwin", index_of=no_such)
    with pytest.raises(InputError, match="out of range"):
        interface_option("0", platform="win32")
    for bad in ("", "eth0; reboot", "../lo", "a b"):
        with pytest.raises(InputError, match="not an interface name"):
            interface_option(bad, platform="linux")
    with pytest.raises(ConfigError, match="not supported on this OS"):
        interface_option("em0", platform="freebsd14")


# -- the plan ---------------------------------------------------------------------------------------

def settings(host: str = NAME, port: int = 2222, **kw: str) -> EffectiveSettings:
    return EffectiveSettings(source="ssh -G", host=host, port=port, user="root", **kw)


def report_of(cls: FailureClass, s: EffectiveSettings | None = None) -> DoctorReport:
    step = failed("banner", 0.1, cls, "what failed", ["tcp_connected: true", "ssh_banner_received: false"])
    return DoctorReport(destination="rented", settings=s or settings(), steps=[step], failure_class=cls,
                        verdict="what failed", seconds=0.1)


def test_pin_name_is_the_known_hosts_label_of_the_logical_name() -> None:
    assert pin_name(NAME, 22) == NAME
    assert pin_name(NAME, 2222) == f"[{NAME}]:2222"


def test_a_banner_timeout_plans_the_fallback_pinned_to_the_logical_name() -> None:
    plan = fallback_plan(report_of("banner_timeout"), opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER)

    assert plan is not None
    assert (plan.logical_host, plan.port, plan.pin_name) == (NAME, 2222, f"[{NAME}]:2222")
    assert (plan.why, plan.resolver_url) == ("banner_timeout", DEFAULT_DOH_RESOLVER)
    assert "ssh_banner_received: false" in plan.evidence


@pytest.mark.parametrize("cls", ["fake_ip", "tun_interference"])
def test_fake_ip_and_tun_evidence_plan_the_fallback(cls: FailureClass) -> None:
    plan = fallback_plan(report_of(cls), opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER)

    assert plan is not None and plan.why == cls


def test_the_plan_pins_the_host_key_alias_when_the_config_sets_one() -> None:
    plan = fallback_plan(report_of("banner_timeout", settings(host_key_alias="gpu-box")), opted_in=True,
                         resolver_url=DEFAULT_DOH_RESOLVER)

    assert plan is not None and plan.pin_name == "gpu-box" and plan.logical_host == NAME


def test_an_address_as_host_name_needs_no_resolver() -> None:
    plan = fallback_plan(report_of("banner_timeout", settings("203.0.113.7")), opted_in=True,
                         resolver_url=DEFAULT_DOH_RESOLVER)

    assert plan is not None and plan.resolver_url is None and plan.pin_name == "[203.0.113.7]:2222"


async def test_a_real_banner_timeout_plans_a_resolver_free_fallback_to_the_written_address(env: Env) -> None:
    release = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        report = await diagnose(f"root@127.0.0.1:{port}", ssh_config=env.ssh_config,
                                known_hosts_path=Settings.from_env().known_hosts_path, banner_timeout_s=0.5)
    finally:
        release.set()
        server.close()
        await server.wait_closed()

    plan = fallback_plan(report, opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER)
    assert report.failure_class == "banner_timeout" and plan is not None
    assert (plan.logical_host, plan.pin_name, plan.resolver_url) == ("127.0.0.1", f"[127.0.0.1]:{port}", None)
    assert "ssh_banner_received: false" in plan.evidence


def test_no_fallback_without_opting_in() -> None:
    assert fallback_plan(report_of("banner_timeout"), opted_in=False, resolver_url=DEFAULT_DOH_RESOLVER) is None


def test_no_fallback_for_an_auth_failure() -> None:
    assert fallback_plan(report_of("auth_failed"), opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER) is None


def test_no_fallback_for_a_changed_host_key() -> None:
    assert fallback_plan(report_of("host_key_mismatch"), opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER) is None


async def test_no_fallback_for_a_refused_connection(env: Env) -> None:
    report = await diagnose(f"root@127.0.0.1:{free_port()}", ssh_config=env.ssh_config,
                            known_hosts_path=Settings.from_env().known_hosts_path)

    assert report.failure_class == "connection_refused"
    assert fallback_plan(report, opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER) is None


def test_no_fallback_for_a_generic_timeout() -> None:
    assert fallback_plan(report_of("timeout"), opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER) is None


def test_no_fallback_through_a_jump_host_or_to_an_ipv6_literal() -> None:
    for s in (settings(proxy_jump="bastion"), settings(proxy_command="nc %h %p"), settings("2001:db8::7")):
        assert fallback_plan(report_of("banner_timeout", s), opted_in=True, resolver_url=DEFAULT_DOH_RESOLVER) is None


def test_a_bad_resolver_url_in_the_plan_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        fallback_plan(report_of("fake_ip"), opted_in=True, resolver_url="http://1.1.1.1/dns-query")
    assert caught.value.observed == "not_https"
