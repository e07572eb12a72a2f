"""Reaching a box before the first command: an SSH box that cannot be reached is diagnosed step by
step (doctor.py) and the error says where it broke and what to do, instead of one transport
string. Used where a tool meets a box first (audit_box)."""

from __future__ import annotations

import time

from mcp_server.errors import TransportError
from mcp_server.hosts.base import Host
from mcp_server.hosts.doctor_models import DoctorReport
from mcp_server.hosts.pool import HostPool, HostSpec
from mcp_server.hosts.transport import CALL_BUDGET_S, doctor_report, explained

DOCTOR_BANNER_DEFAULT_S = 5.0


async def reach(pool: HostPool, spec: HostSpec) -> Host:
    """The box, connected. A failed SSH connection raises the same error, with the doctor's steps
    in its message and the failure's route as its next step."""
    host = await pool.host(spec)
    if spec.kind != "ssh":
        return host
    from mcp_server.hosts.ssh import SshHost  # already loaded: the pool made an SshHost

    if not isinstance(host, SshHost) or host.diagnoses_failures:
        return host  # a host with the Clash fallback diagnoses its own failures before it raises
    started = time.monotonic()
    try:
        await host.connection()
    except TransportError as exc:
        raise await diagnosed(exc, pool, spec, CALL_BUDGET_S - (time.monotonic() - started)) from exc
    return host


async def diagnosed(exc: TransportError, pool: HostPool, spec: HostSpec, budget_s: float) -> TransportError:
    """`exc` again, its message followed by the doctor's report and its next step the report's route."""
    report = await connection_report(pool, spec, budget_s)
    return exc if report is None else explained(exc, report)


async def connection_report(pool: HostPool, spec: HostSpec, budget_s: float) -> DoctorReport | None:
    """The connection doctor's report for an SSH box, within `budget_s`; None (logged) if the doctor
    itself failed."""
    settings = pool.settings
    return await doctor_report(spec.destination, ssh_config=settings.ssh_config,
                               known_hosts_path=settings.known_hosts_path,
                               connect_timeout_s=min(settings.connect_timeout_s, 10.0),
                               banner_timeout_s=DOCTOR_BANNER_DEFAULT_S, budget_s=budget_s)
