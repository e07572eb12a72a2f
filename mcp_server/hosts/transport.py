"""How an SSH connection reached its box: directly, or through the Clash/Mihomo fallback ladder
(knowledge run.md §7.6). The ladder runs only for a host whose inventory entry opted in, only after
the direct connection failed, and only when the connection doctor finds path evidence (banner
timeout, Clash fake IP, TUN interference): never for an auth failure, a changed host key, a refused
port or a plain timeout. It resolves the logical name over DoH, opens fresh sockets to that address
bound to the physical interface (or a local address), and hands each to the SSH layer, which checks
the presented key against the pin for the logical name before authenticating. Nothing here touches
routes, DNS, proxies or the proxy's config, and no failure here says anything about jobs on the box."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from mcp_server.errors import RgtError, TransportError
from mcp_server.hosts.doctor_models import DoctorReport
from mcp_server.hosts.doh import doh_resolve
from mcp_server.hosts.fallback import FallbackPlan, fallback_plan, open_bound_socket
from mcp_server.hosts.fallback_options import DohAnswer, FallbackOptions, TransportRecord

log = logging.getLogger(__name__)

T = TypeVar("T")
FreshSocket = Callable[[], Awaitable[socket.socket]]

CALL_BUDGET_S = 35.0  # a tool call returns in under ~40 s: the ladder gets what the direct try left
FALLBACK_RESERVE_S = 12.0  # kept back from the doctor for the DoH query and the fallback's own connect
MIN_DOCTOR_S = 5.0
DOH_TIMEOUT_S = 5.0
DOCTOR_CONNECT_S = 5.0
DOCTOR_BANNER_S = 3.0
_NOTHING_ABOUT_JOBS = "this says nothing about jobs on the box"


DIRECT = TransportRecord(kind="direct")


def explained(exc: TransportError, report: DoctorReport, *extra: str) -> TransportError:
    """`exc` again, its message followed by the doctor's report (and `extra` lines), its next step
    the report's route."""
    message = "\n".join([exc.message, *report.lines(), *extra])
    return type(exc)(message, host=exc.host, observed=exc.observed, expected=exc.expected,
                     next_step=report.route or exc.next_step)


def _bound_to(options: FallbackOptions) -> str | None:
    parts = [p for p in (options.interface and f"interface {options.interface}",
                         options.local_address and f"local address {options.local_address}") if p]
    return ", ".join(parts) or None


async def _address(plan: FallbackPlan, options: FallbackOptions) -> tuple[str, DohAnswer | None]:
    if plan.resolver_url is None:
        return plan.logical_host, None
    answer = await doh_resolve(plan.logical_host, plan.resolver_url, timeout_s=DOH_TIMEOUT_S,
                               ca_file=options.ca_file, local_address=options.local_address)
    return answer.selected_ip, answer


async def doctor_report(destination: str, *, ssh_config: Path | None, known_hosts_path: Path,
                        connect_timeout_s: float, banner_timeout_s: float, budget_s: float) -> DoctorReport | None:
    """The connection doctor's report within `budget_s` (at least MIN_DOCTOR_S); None, logged, when the
    doctor itself failed: it must never hide the error or the result it was asked to add to."""
    from mcp_server.hosts.doctor import diagnose  # the doctor loads only when it is asked for

    try:
        return await diagnose(destination, ssh_config=ssh_config, known_hosts_path=known_hosts_path,
                              connect_timeout_s=connect_timeout_s, banner_timeout_s=banner_timeout_s,
                              budget_s=max(MIN_DOCTOR_S, budget_s))
    except Exception:
        log.exception("connection doctor failed for %s", destination)
        return None


async def connect_with_fallback(direct: TransportError, *, destination: str, options: FallbackOptions,
                                ssh_config: Path | None, known_hosts_path: Path, started: float,
                                connect_timeout_s: float,
                                connect_over: Callable[[FallbackPlan, FreshSocket], Awaitable[T]],
                                ) -> tuple[T, TransportRecord]:
    """After the direct connection failed with `direct`: diagnose, and when the evidence allows it,
    connect over the fallback. Raises `direct` explained by the doctor when the fallback does not
    apply, or the fallback's own failure after both attempts are named."""
    report = await doctor_report(destination, ssh_config=ssh_config, known_hosts_path=known_hosts_path,
                                 connect_timeout_s=min(connect_timeout_s, DOCTOR_CONNECT_S),
                                 banner_timeout_s=min(connect_timeout_s, DOCTOR_BANNER_S),
                                 budget_s=CALL_BUDGET_S - (time.monotonic() - started) - FALLBACK_RESERVE_S)
    if report is None:
        raise direct
    plan = fallback_plan(report, opted_in=True, resolver_url=options.resolver_url)
    if plan is None:
        raise explained(direct, report, f"clash fallback: not tried ({report.failure_class} is not path "
                                        "evidence; it runs only for banner_timeout, fake_ip, tun_interference)")
    log.warning("ssh %s: direct connection failed (%s); trying the clash fallback", destination, plan.why)
    try:
        address, answer = await _address(plan, options)

        async def fresh() -> socket.socket:
            return await open_bound_socket(address, plan.port, interface=options.interface,
                                           local_address=options.local_address, timeout_s=connect_timeout_s)

        conn = await connect_over(plan, fresh)
    except RgtError as exc:
        raise _both_failed(direct, report, plan, exc) from exc
    record = TransportRecord(kind="clash_fallback", why=plan.why, evidence=plan.evidence, address=address,
                             bound_to=_bound_to(options), doh=answer)
    return conn, record


def _both_failed(direct: TransportError, report: DoctorReport, plan: FallbackPlan, exc: RgtError) -> RgtError:
    """The fallback's failure (its own class: a changed key stays a HostKeyError), its message
    saying the direct attempt failed first and why the fallback ran."""
    lead = (f"the direct connection failed ({direct.message.splitlines()[0]}); the clash fallback ran "
            f"({plan.why}: {'; '.join(plan.evidence) or 'see the doctor below'}) and failed too; {_NOTHING_ABOUT_JOBS}")
    message = "\n".join([exc.message, lead, *report.lines()])
    return type(exc)(message, host=exc.host or direct.host, observed=exc.observed, expected=exc.expected,
                     next_step=exc.next_step or report.route)
