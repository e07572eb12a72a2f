"""The connection doctor's report: one step per stage of reaching a box, each with a timing, short
evidence, a verdict and, when it fails, a failure class and the route to take. Also the one rule
that reads a report to decide whether the Clash/Mihomo fallback ladder may run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FailureClass = Literal[
    "ok", "dns_failed", "fake_ip", "tun_interference", "connection_refused", "timeout",
    "banner_timeout", "host_key_unknown", "host_key_mismatch", "auth_failed", "no_sftp",
    "other_error",
]
StepName = Literal["settings", "dns", "route", "tcp", "banner", "host_key", "auth", "sftp", "session", "rtt"]
StepStatus = Literal["ok", "warn", "fail", "skipped"]
HostKeyVerdict = Literal["known", "unknown", "changed", "not_checked"]

# Only these evidence classes let the single-socket fallback run (knowledge run.md §7.6): each says
# "the path misbehaves", never "the box said no". Auth, host key, refused and a generic timeout do not.
FALLBACK_CLASSES: frozenset[str] = frozenset({"banner_timeout", "fake_ip", "tun_interference"})

_SSH = "references://run-remote/ssh-transfer"
ROUTES: dict[str, str] = {
    "dns_failed": "the name does not resolve: check HostName in the ssh config or the inventory; "
    f"a rental's address changes on re-create → re-read it from the console/API ({_SSH}#ssh-setup)",
    "fake_ip": "the system resolver answers with a Clash/Mihomo fake IP (198.18.0.0/15): the box is "
    f"reached through the proxy; if no SSH banner arrives the bounded fallback applies ({_SSH}#windows-clash)",
    "tun_interference": "a TUN device captures the route to the box: the bounded fallback applies "
    f"({_SSH}#windows-clash)",
    "connection_refused": "nothing listens on that port: a rental's port changes on re-create or "
    "restart → re-read host and port from the console/API and update the inventory's destination "
    f"({_SSH}#ssh-setup)",
    "timeout": "no answer within the bound: the box may be stopped, a firewall may drop the packets or "
    "the address is stale → check the instance runs and re-read its address from the console/API "
    f"({_SSH}#ssh-setup)",
    "banner_timeout": "TCP connects but no SSH banner arrives (typical of Clash/Mihomo on a high port): "
    f"the bounded single-socket fallback applies ({_SSH}#windows-clash)",
    "host_key_unknown": "verify the fingerprint on the provider's console, then add it to known_hosts, "
    f'or pin it on first use with host_key_policy = "accept-new" in the inventory ({_SSH}#host-keys)',
    "host_key_mismatch": "the box presents another key than the trusted one: after a re-create, verify "
    "the new fingerprint on the console, then replace only the [host]:port entry (ssh-keygen -R); "
    f"never re-accept blindly ({_SSH}#host-keys)",
    "auth_failed": "check the user, that the public key is in the box's authorized_keys, and that the "
    f"key is usable without a prompt (an agent holding it, or an unencrypted IdentityFile) ({_SSH}#ssh-setup)",
    "no_sftp": "this endpoint carries no SFTP (a proxied SSH flavour): use the direct-TCP endpoint for "
    f"pulls ({_SSH}#ssh-flavours)",
    "other_error": f"see the evidence; the SSH chapter lists the usual causes ({_SSH}#ssh-setup)",
}
KEEPALIVE_ROUTE = ("set ServerAliveInterval 60 and ServerAliveCountMax 120 for this host in "
                   f"~/.ssh/config so a silent drop is noticed ({_SSH}#ssh-setup)")


class EffectiveSettings(BaseModel):
    """How the destination connects, as OpenSSH computes it (`ssh -G`) or as the user wrote it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Literal["ssh -G", "inventory"]
    host: str
    port: int
    user: str | None
    identity_files: list[str] = Field(default_factory=list)
    proxy_jump: str | None = None
    proxy_command: str | None = None
    strict_host_key_checking: str | None = None
    server_alive_interval: int | None = None
    server_alive_count_max: int | None = None
    host_key_alias: str | None = None
    known_hosts_files: list[str] = Field(default_factory=list)

    @property
    def proxied(self) -> bool:
        """Reached through a jump host or a command: direct probes of host:port do not apply."""
        return bool(self.proxy_jump or self.proxy_command)


class DoctorStep(BaseModel):
    """One stage of reaching the box."""

    model_config = ConfigDict(extra="forbid")

    name: StepName
    status: StepStatus
    seconds: float
    evidence: list[str] = Field(default_factory=list)
    verdict: str
    failure_class: FailureClass | None = None
    route: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "warn")


class DoctorReport(BaseModel):
    """Every step, the first failure's class and route, and what worked."""

    model_config = ConfigDict(extra="forbid")

    destination: str
    settings: EffectiveSettings | None
    steps: list[DoctorStep]
    failure_class: FailureClass
    verdict: str
    route: str | None = None
    seconds: float
    host_key: HostKeyVerdict = "not_checked"
    auth_method: str | None = None
    sftp: bool | None = None

    def step(self, name: StepName) -> DoctorStep | None:
        return next((s for s in self.steps if s.name == name), None)

    def lines(self) -> list[str]:
        """The report as text: the verdict, then one line per step that ran."""
        head = f"connection doctor ({self.seconds:.1f} s): {self.failure_class}: {self.verdict}"
        return [head, *(f"  {s.name}: {s.status} ({s.seconds * 1e3:.0f} ms) {s.verdict}"
                        for s in self.steps if s.status != "skipped")]


def passed(name: StepName, seconds: float, verdict: str, evidence: list[str] | None = None) -> DoctorStep:
    return DoctorStep(name=name, status="ok", seconds=round(seconds, 3), verdict=verdict,
                      evidence=evidence or [])


def failed(name: StepName, seconds: float, cls: FailureClass, verdict: str,
           evidence: list[str] | None = None, extra_route: str | None = None) -> DoctorStep:
    route = ROUTES.get(cls, ROUTES["other_error"])
    return DoctorStep(name=name, status="fail", seconds=round(seconds, 3), verdict=verdict,
                      evidence=evidence or [], failure_class=cls,
                      route=f"{extra_route}; {route}" if extra_route else route)


def skipped(name: StepName, why: str) -> DoctorStep:
    return DoctorStep(name=name, status="skipped", seconds=0.0, verdict=why)


def fallback_allowed(report: DoctorReport) -> bool:
    """True only when the report's failure is path evidence (banner timeout, fake IP, TUN)."""
    return report.failure_class in FALLBACK_CLASSES
