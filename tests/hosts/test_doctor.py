"""The connection doctor against a real OpenSSH sshd on loopback: a healthy box, a closed port, a
listener that never sends a banner, a changed and an unknown host key, a wrong and an encrypted
client key, a box behind a jump host, Clash fake-IP answers in a network namespace; the fake-IP
classifier and the fallback rule as tables."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import get_args

import pytest

from mcp_server.errors import InputError
from mcp_server.hosts.doctor import diagnose
from mcp_server.hosts.doctor_models import DoctorReport, FailureClass, fallback_allowed
from mcp_server.hosts.doctor_network import is_fake_ip
from mcp_server.settings import Settings
from tests.conftest import Env
from tests.support.listeners import silent_port
from tests.support.sshd import Sshd, free_port, keygen


def fingerprint_of(pub: Path) -> str:
    """The fingerprint as OpenSSH's own ssh-keygen prints it (independent of the doctor's maths)."""
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True,
                          check=True).stdout.split()[1]


async def run_doctor(env: Env, destination: str = "testbox", **kw: float) -> DoctorReport:
    return await diagnose(destination, ssh_config=env.ssh_config,
                          known_hosts_path=Settings.from_env().known_hosts_path, **kw)


def statuses(report: DoctorReport) -> dict[str, str]:
    return {s.name: s.status for s in report.steps}


async def test_a_healthy_box_passes_every_step_with_publickey_and_sftp(box: Sshd, env: Env) -> None:
    env.ssh_config.write_text(box.client_config("testbox") + "  ServerAliveInterval 60\n")

    report = await run_doctor(env)

    assert report.failure_class == "ok", report.model_dump_json(indent=1)
    assert statuses(report) == dict.fromkeys(
        ["settings", "dns", "route", "tcp", "banner", "host_key", "auth", "sftp", "session", "rtt"], "ok")
    session = report.step("session")
    assert session is not None and len(session.evidence) == 3
    assert session.evidence[0].startswith("round trip over the session: ") and "MB/s" in session.evidence[1]
    route = report.step("route")
    assert route is not None and route.verdict == "through lo", "loopback: the route names its device"
    assert (report.auth_method, report.sftp, report.host_key) == ("publickey", True, "known")
    assert report.settings is not None and report.settings.source == "ssh -G"
    assert (report.settings.host, report.settings.port, report.settings.user) == ("127.0.0.1", box.port, "root")
    host_key = report.step("host_key")
    assert host_key is not None
    assert f"presented: ssh-ed25519 {fingerprint_of(box.root / 'hostkey.pub')}" in host_key.evidence
    assert report.seconds < 20


async def test_the_report_carries_fingerprints_never_key_material(box: Sshd, env: Env) -> None:
    report = (await run_doctor(env)).model_dump_json()

    for key in (box.root / "hostkey.pub", box.root / "clientkey.pub"):
        assert key.read_text().split()[1] not in report
    assert "PRIVATE KEY" not in report


async def test_keepalive_off_is_a_warning_with_its_route(box: Sshd, env: Env) -> None:
    report = await run_doctor(env)

    rtt = report.step("rtt")
    assert rtt is not None and rtt.status == "warn"
    assert "ServerAliveInterval 0" in " ".join(rtt.evidence)
    assert rtt.route is not None and "ssh-transfer#ssh-setup" in rtt.route
    assert report.failure_class == "ok"


async def test_a_closed_port_is_connection_refused_and_names_the_rental_port_route(env: Env) -> None:
    report = await run_doctor(env, f"root@127.0.0.1:{free_port()}")

    assert report.failure_class == "connection_refused"
    assert statuses(report)["tcp"] == "fail"
    assert {statuses(report)[n] for n in ("banner", "host_key", "auth", "sftp", "rtt")} == {"skipped"}
    assert report.route is not None and "re-read" in report.route and "destination" in report.route
    assert not fallback_allowed(report)


@pytest.fixture
async def silent_listener() -> AsyncIterator[int]:
    async with silent_port() as port:
        yield port


async def test_tcp_up_without_a_banner_is_banner_timeout_within_the_bound(silent_listener: int, env: Env) -> None:
    report = await run_doctor(env, f"root@127.0.0.1:{silent_listener}", banner_timeout_s=0.5)

    assert report.failure_class == "banner_timeout"
    assert statuses(report)["tcp"] == "ok" and statuses(report)["banner"] == "fail"
    banner = report.step("banner")
    assert banner is not None and "ssh_banner_received: false" in banner.evidence
    assert report.seconds < 5
    assert fallback_allowed(report)


def config_with_known_hosts(box: Sshd, env: Env, known_hosts: Path) -> None:
    env.ssh_config.write_text(box.client_config("testbox", known_hosts=known_hosts))


async def test_a_changed_host_key_is_refused_with_both_fingerprints(box: Sshd, env: Env, tmp_path: Path) -> None:
    keygen(tmp_path / "old_hostkey")
    known = tmp_path / "known_hosts"
    known.write_text(box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n")
    config_with_known_hosts(box, env, known)

    report = await run_doctor(env)

    assert report.failure_class == "host_key_mismatch" and report.host_key == "changed"
    step = report.step("host_key")
    assert step is not None
    assert f"presented: ssh-ed25519 {fingerprint_of(box.root / 'hostkey.pub')}" in step.evidence
    assert f"trusted: ssh-ed25519 {fingerprint_of(tmp_path / 'old_hostkey.pub')}" in step.evidence
    assert statuses(report)["auth"] == "skipped"
    assert report.route is not None and "never re-accept" in report.route and "accept-new" not in report.route
    assert known.read_text() == box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n"
    assert not fallback_allowed(report)


async def test_a_hashed_known_hosts_entry_is_recognised(box: Sshd, env: Env, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(box.known_hosts_line() + "\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
    assert known.read_text().startswith("|1|")
    config_with_known_hosts(box, env, known)

    report = await run_doctor(env)

    assert report.host_key == "known" and report.failure_class == "ok"


async def test_an_unknown_host_key_is_refused_and_nothing_is_pinned(box: Sshd, env: Env, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    config_with_known_hosts(box, env, known)

    report = await run_doctor(env)

    assert report.failure_class == "host_key_unknown" and report.host_key == "unknown"
    assert statuses(report)["auth"] == "skipped"
    assert known.read_text() == "" and not Settings.from_env().known_hosts_path.exists()


def config_with_identity(box: Sshd, env: Env, key: Path) -> None:
    env.ssh_config.write_text(box.client_config("testbox").replace(str(box.clientkey), str(key)))


async def test_a_key_the_box_does_not_know_is_auth_failed_naming_the_agent(
        box: Sshd, env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    keygen(tmp_path / "stranger")
    config_with_identity(box, env, tmp_path / "stranger")

    report = await run_doctor(env)

    assert report.failure_class == "auth_failed"
    auth = report.step("auth")
    assert auth is not None
    assert "agent reachable: no" in auth.evidence and "server offers: publickey" in auth.evidence
    assert auth.route is not None and "SSH_AUTH_SOCK" in auth.route
    assert statuses(report)["sftp"] == "skipped" and report.auth_method is None
    assert not fallback_allowed(report)


async def test_an_encrypted_key_without_an_agent_is_named_as_such(
        box: Sshd, env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    key = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(key)], check=True)
    config_with_identity(box, env, key)

    report = await run_doctor(env)

    auth = report.step("auth")
    assert report.failure_class == "auth_failed" and auth is not None
    assert f"passphrase-protected: {key}" in auth.evidence
    assert auth.route is not None and "ssh-add" in auth.route


@pytest.mark.parametrize(("address", "fake"), [
    ("198.18.0.1", True), ("198.18.0.5", True), ("198.19.255.254", True), ("::ffff:198.18.3.4", True),
    ("198.17.255.255", False), ("198.20.0.1", False), ("127.0.0.1", False), ("10.0.0.1", False),
    ("2001:db8::1", False), ("not-an-address", False),
])
def test_clash_fake_ip_range_is_198_18_slash_15(address: str, fake: bool) -> None:
    assert is_fake_ip(address) is fake


ALLOWED = {"banner_timeout", "fake_ip", "tun_interference"}


@pytest.mark.parametrize("cls", get_args(FailureClass))
def test_fallback_is_allowed_only_for_path_evidence(cls: FailureClass) -> None:
    report = DoctorReport(destination="box", settings=None, steps=[], failure_class=cls, verdict="", seconds=0)

    assert fallback_allowed(report) is (cls in ALLOWED)


NETNS_SCRIPT = Path(__file__).resolve().parents[1] / "support" / "netns-fake-dns.sh"


def namespaces_available() -> bool:
    try:
        return subprocess.run(["unshare", "-mn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_in_fake_dns(tmp_path: Path) -> list[DoctorReport]:
    """The probe in fresh network+mount namespaces whose /etc/hosts answers Clash fake IPs."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n198.18.0.5 silent\n198.18.0.6 closed\n198.18.0.7 gone\n")
    out = subprocess.run(
        ["unshare", "-mn", "--", "sh", str(NETNS_SCRIPT), str(hosts), "198.18.0.5,198.18.0.6",
         sys.executable, "-m", "tests.hosts.fake_ip_probe", "198.18.0.5"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    return [DoctorReport.model_validate_json(line) for line in out.stdout.splitlines()]


@pytest.mark.skipif(not namespaces_available(), reason="needs unshare -mn (root or user namespaces)")
def test_a_clash_fake_ip_answer_is_flagged_and_only_path_failures_allow_the_fallback(tmp_path: Path) -> None:
    silent, closed, gone = run_in_fake_dns(tmp_path)

    for report, address in ((silent, "198.18.0.5"), (closed, "198.18.0.6"), (gone, "198.18.0.7")):
        dns = report.step("dns")
        assert dns is not None and dns.status == "warn" and dns.failure_class == "fake_ip"
        assert f"{address} (Clash fake-IP range 198.18.0.0/15)" in dns.evidence[0]
    assert silent.failure_class == "banner_timeout" and fallback_allowed(silent)
    assert closed.failure_class == "connection_refused" and not fallback_allowed(closed)
    assert gone.failure_class == "fake_ip" and fallback_allowed(gone)


def behind_jump(config: str) -> str:
    """The same box reached through `testbox` as its ProxyJump (a hop of one real sshd)."""
    return config.replace("  HostName 127.0.0.1\n", "  HostName 127.0.0.1\n  ProxyJump testbox\n")


async def test_a_box_behind_a_jump_host_is_checked_through_ssh_not_probed_directly(box: Sshd, env: Env) -> None:
    env.ssh_config.write_text(box.client_config("testbox") + behind_jump(box.client_config("viajump")))

    report = await run_doctor(env, "viajump")

    assert report.settings is not None and report.settings.proxy_jump == "testbox"
    assert {statuses(report)[n] for n in ("dns", "route", "tcp", "banner", "host_key", "rtt")} == {"skipped"}
    assert (report.failure_class, report.auth_method, report.sftp) == ("ok", "publickey", True)


async def test_a_changed_key_behind_a_jump_host_is_still_a_mismatch(box: Sshd, env: Env, tmp_path: Path) -> None:
    keygen(tmp_path / "old_hostkey")
    known = tmp_path / "known_hosts"
    known.write_text(box.known_hosts_line(tmp_path / "old_hostkey.pub") + "\n")
    via_jump = behind_jump(box.client_config("viajump", known_hosts=known))
    env.ssh_config.write_text(box.client_config("testbox") + via_jump)

    report = await run_doctor(env, "viajump")

    assert report.failure_class == "host_key_mismatch"
    assert statuses(report)["auth"] == "fail" and statuses(report)["sftp"] == "skipped"
    assert not fallback_allowed(report)


async def test_without_the_openssh_client_the_destination_is_used_as_written(
        box: Sshd, env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    report = await run_doctor(env, f"root@127.0.0.1:{box.port}")

    assert report.settings is not None
    assert (report.settings.source, report.settings.host, report.settings.port) == ("inventory", "127.0.0.1", box.port)
    assert statuses(report)["banner"] == "ok" and statuses(report)["auth"] == "skipped"
    auth = report.step("auth")
    assert auth is not None and "not on PATH" in auth.verdict


async def test_a_flag_shaped_destination_is_refused_before_anything_runs(env: Env) -> None:
    with pytest.raises(InputError):
        await run_doctor(env, "-oProxyCommand=touch /tmp/pwned")
