"""The connection doctor: reach a box step by step (settings, DNS, TCP, banner, host key, auth,
SFTP, round trip) and say where it breaks, why, and what to do. Every step is bounded and the
whole run stays well under a tool call's 40 s; nothing changes the user's config, known_hosts,
DNS, routes or proxies; only fingerprints and parsed facts are reported, never key material.
A transport failure found here says nothing about jobs on the box."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from mcp_server.hosts.destination import Destination
from mcp_server.hosts.doctor_auth import auth_step, sftp_step
from mcp_server.hosts.doctor_hostkey import host_key_step
from mcp_server.hosts.doctor_models import (
    ROUTES,
    DoctorReport,
    DoctorStep,
    EffectiveSettings,
    FailureClass,
    HostKeyVerdict,
    StepName,
    failed,
    fallback_allowed,
    passed,
    skipped,
)
from mcp_server.hosts.doctor_network import dns_step, rtt_step, tcp_and_banner
from mcp_server.hosts.doctor_openssh import effective_settings, have
from mcp_server.hosts.doctor_route import route_step
from mcp_server.hosts.doctor_session import session_step

__all__ = ["diagnose", "fallback_allowed"]

TOTAL_BUDGET_S = 35.0
SETTINGS_BOUND_S = 5.0
DNS_BOUND_S = 5.0
ROUTE_BOUND_S = 3.0
SESSION_SAMPLE_S = 8.0  # the round trip and the throughput sample each way, all together
SESSION_EXTRA_S = 10.0  # an ssh/sftp run: its connect timeout plus this for kex, auth and exit


@dataclass
class _Run:
    """The state of one diagnosis: what it found and how much of its time is left."""

    dest: Destination
    ssh_config: Path | None
    known_hosts_path: Path
    connect_timeout_s: float
    banner_timeout_s: float
    budget_s: float = TOTAL_BUDGET_S
    start: float = field(default_factory=time.monotonic)
    steps: list[DoctorStep] = field(default_factory=list)
    host_key: HostKeyVerdict = "not_checked"
    auth_method: str | None = None
    sftp: bool | None = None

    def bound(self, own: float) -> float:
        """A step's bound: its own, cut to what is left of the total budget."""
        return max(0.5, min(own, self.budget_s - (time.monotonic() - self.start)))

    def add(self, step: DoctorStep) -> bool:
        self.steps.append(step)
        return step.ok

    def skip_rest(self, names: list[StepName], why: str) -> None:
        self.steps += [skipped(n, why) for n in names]


def _known_hosts(run: _Run, settings: EffectiveSettings) -> list[Path]:
    """The server's own pins first, then the user's files as OpenSSH would read them."""
    return list(dict.fromkeys([run.known_hosts_path, *(Path(f) for f in settings.known_hosts_files)]))


async def _settings(run: _Run) -> EffectiveSettings:
    start = time.monotonic()
    settings, tool = await effective_settings(run.dest, run.ssh_config, run.bound(SETTINGS_BOUND_S))
    took = time.monotonic() - start
    evidence = [f"source: {settings.source}", f"HostName {settings.host}", f"Port {settings.port}",
                f"User {settings.user}", *(f"IdentityFile {f}" for f in settings.identity_files),
                f"ProxyJump {settings.proxy_jump or 'none'}", f"ProxyCommand {settings.proxy_command or 'none'}",
                f"StrictHostKeyChecking {settings.strict_host_key_checking or 'unknown'}"]
    if tool is not None and tool.rc != 0:
        evidence.append("ssh -G failed; the destination is used as written")
        run.add(failed("settings", took, "other_error", "OpenSSH could not read the config for this "
                       "destination", evidence))
    else:
        run.add(passed("settings", took, f"effective settings from {settings.source}", evidence))
    return settings


async def _network(run: _Run, settings: EffectiveSettings) -> str | None:
    """DNS, TCP, banner: the address that answered with an SSH banner, or None (steps recorded)."""
    dns, addresses = await dns_step(settings.host, settings.port, run.bound(DNS_BOUND_S))
    run.add(dns)
    if not addresses:
        return None
    run.add(await route_step(addresses[0], settings.port, run.bound(ROUTE_BOUND_S)))
    tcp, banner = await tcp_and_banner(addresses[0], settings.port, run.bound(run.connect_timeout_s),
                                       run.bound(run.banner_timeout_s))
    if not run.add(tcp) or banner is None or not run.add(banner):
        return None
    return addresses[0]


async def _session(run: _Run, settings: EffectiveSettings) -> None:
    """Authentication, then SFTP, through the real OpenSSH client."""
    files = [str(f) for f in _known_hosts(run, settings)]
    own = run.connect_timeout_s + SESSION_EXTRA_S
    step, run.auth_method = await auth_step(run.dest, run.ssh_config, settings, files,
                                            run.connect_timeout_s, run.bound(own))
    if not run.add(step):
        run.skip_rest(["sftp", "session"], "skipped: authentication failed")
        return
    step, run.sftp = await sftp_step(run.dest, run.ssh_config, files, run.connect_timeout_s, run.bound(own))
    run.add(step)
    run.add(await session_step(run.dest, run.ssh_config, files, run.connect_timeout_s, run.bound(SESSION_SAMPLE_S)))


async def _direct(run: _Run, settings: EffectiveSettings) -> None:
    address = await _network(run, settings)
    if address is None:
        run.skip_rest(_after(run), "skipped: the box is not reachable at the SSH level")
        return
    step, run.host_key = await host_key_step(settings, _known_hosts(run, settings), run.bound(run.connect_timeout_s))
    if not run.add(step):
        run.skip_rest(["auth", "sftp", "session"], "skipped: the host key is not trusted (never re-accepted here)")
    else:
        await _session(run, settings)
    run.add(await rtt_step(address, settings, run.bound(run.connect_timeout_s)))


def _after(run: _Run) -> list[StepName]:
    order: list[StepName] = ["dns", "route", "tcp", "banner", "host_key", "auth", "sftp", "session", "rtt"]
    done = {s.name for s in run.steps}
    return [n for n in order if n not in done]


async def _proxied(run: _Run, settings: EffectiveSettings) -> None:
    via = f"ProxyJump {settings.proxy_jump}" if settings.proxy_jump else "ProxyCommand"
    run.skip_rest(["dns", "route", "tcp", "banner", "host_key"],
                  f"skipped: the box is reached through {via}; ssh checks the path and the host key")
    await _session(run, settings)
    run.skip_rest(["rtt"], f"skipped: reached through {via}")


# With a fake-IP answer, a connect that times out or breaks was Clash's doing, not the box's; through
# a TUN device, so is a connect or a banner that never comes.
_MASKED_BY_FAKE_IP = frozenset({"timeout", "other_error"})
_MASKED_BY_TUN = frozenset({"timeout", "other_error", "banner_timeout"})


def _warned(run: _Run, name: StepName, cls: FailureClass) -> bool:
    return any(s.name == name and s.failure_class == cls for s in run.steps)


def _failure_class(run: _Run, failure: DoctorStep) -> FailureClass:
    if failure.name in ("tcp", "banner"):
        if _warned(run, "dns", "fake_ip") and failure.failure_class in _MASKED_BY_FAKE_IP:
            return "fake_ip"
        if _warned(run, "route", "tun_interference") and failure.failure_class in _MASKED_BY_TUN:
            return "tun_interference"
    return failure.failure_class or "other_error"


def _report(run: _Run, settings: EffectiveSettings) -> DoctorReport:
    failure = next((s for s in run.steps if s.status == "fail"), None)
    cls: FailureClass = "ok" if failure is None else _failure_class(run, failure)
    if failure is None:
        verdict = f"reachable: authenticated with {run.auth_method}, SFTP {'yes' if run.sftp else 'no'}"
    else:
        verdict = f"{failure.name} failed: {failure.verdict}; this says nothing about jobs on the box"
    return DoctorReport(
        destination=str(run.dest), settings=settings, steps=run.steps, failure_class=cls,
        verdict=verdict, route=None if failure is None else ROUTES.get(cls, failure.route),
        seconds=round(time.monotonic() - run.start, 3), host_key=run.host_key,
        auth_method=run.auth_method, sftp=run.sftp,
    )


async def diagnose(destination: str, *, ssh_config: Path | None, known_hosts_path: Path,
                   connect_timeout_s: float = 10, banner_timeout_s: float = 5,
                   budget_s: float = TOTAL_BUDGET_S) -> DoctorReport:
    """Reach `destination` step by step and report each step, the first failure and its route.

    `destination` is an ~/.ssh/config alias or user@host[:port] (an InputError otherwise)."""
    run = _Run(Destination.parse(destination), ssh_config, known_hosts_path, connect_timeout_s, banner_timeout_s,
               budget_s=min(budget_s, TOTAL_BUDGET_S))
    settings = await _settings(run)
    if not have("ssh"):
        await _network(run, settings)
        run.skip_rest(_after(run), "skipped: the OpenSSH client (ssh) is not on PATH")
    elif settings.proxied:
        await _proxied(run, settings)
    else:
        await _direct(run, settings)
    return _report(run, settings)

