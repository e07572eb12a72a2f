"""Models of an audit: the facts gathered in one round trip and the checks' verdicts."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_server.hosts.base import parse_kv
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import reference_uri
from mcp_server.limits import IdStr
from mcp_server.run.audit.nvidia import ComputeApp, Gpu, parse_apps, parse_clocks, parse_gpus
from mcp_server.run.audit.probe import ProbeSection
from mcp_server.run.audit.smi_report import parse_query_report
from mcp_server.run.audit.versions import DriverVersions

Status = Literal["PASS", "WARN", "FAIL", "SKIP"]
SEVERITY = {"FAIL": 3, "WARN": 2, "PASS": 1, "SKIP": 0}


def route(check_id: str) -> str:
    return reference_uri("run-remote/audit-checks", check_id.lower())


class Check(BaseModel):
    id: str = Field(description="check id from the Phase-0 table, e.g. A11")
    title: str
    status: Status
    evidence: str = Field(description="what the check saw, with numbers")
    route: str = Field(description="resource URI of the reference that explains the check and its fix")
    subject: str | None = Field(default=None, description="mount path, GPU index or file the check is about")


def check(cid: str, title: str, status: Status, evidence: str, subject: str | None = None) -> Check:
    return Check(id=cid, title=title, status=status, evidence=evidence[:1200], route=route(cid), subject=subject)


class ExpectGpu(BaseModel):
    """What the user rented, to compare against what the box has."""

    name: IdStr | None = Field(default=None, description="substring of the GPU name, e.g. 'H100 80GB'")
    count: int | None = Field(default=None, ge=1, le=64)
    min_memory_gib: float | None = Field(default=None, gt=0)


class MountReport(BaseModel):
    path: str = Field(description="path as asked (may not exist yet)")
    resolved: str = Field(description="the path with ~ expanded on the box")
    measured_at: str = Field(description="nearest existing path that was measured")
    roles: list[str]
    fstype: str | None = None
    filesystem: str | None = None
    mount_point: str | None = None
    bytes_total: int | None = None
    bytes_avail: int | None = None
    bytes_used_pct: float | None = None
    inodes_total: int | None = None
    inodes_free: int | None = None
    inodes_used_pct: float | None = None


class GpuReport(BaseModel):
    index: int
    name: str
    memory_total_mib: int | None
    memory_used_mib: int | None
    utilization_pct: int | None
    temperature_c: int | None
    sm_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    ecc_uncorrected: int | None
    active_throttle: list[str]
    compute_pids: list[int | None]


@dataclass
class Facts:
    """Parsed sections of one probe run, plus what the call asked for."""

    spec: HostSpec
    sections: dict[str, ProbeSection]
    mounts: list[MountReport]
    durable_abs: str
    expect_gpu: ExpectGpu | None
    expect_files: dict[str, str]
    code_dir: str | None
    local_epoch: float
    probe_error: str = ""
    gpus: list[Gpu] = field(default_factory=list)
    gpu_stray: list[str] = field(default_factory=list)
    gpu_bad_rows: list[str] = field(default_factory=list)
    apps: list[ComputeApp] = field(default_factory=list)
    versions: DriverVersions = field(default_factory=DriverVersions)

    def sec(self, name: str) -> ProbeSection | None:
        return self.sections.get(name)

    def text(self, name: str) -> str:
        s = self.sections.get(name)
        return s.text if s else ""

    def kv(self, name: str) -> dict[str, str]:
        return parse_kv(self.text(name))

    @property
    def has_nvidia_smi(self) -> bool:
        return bool(self.kv("tools").get("nvidia-smi"))

    def python_probe(self) -> dict[str, Any] | None:
        for line in reversed(self.text("python").splitlines()):
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    return None
                return value if isinstance(value, dict) else None
        return None

    def load_gpus(self) -> None:
        if "gpu" in self.sections:
            self.gpus, self.gpu_stray, self.gpu_bad_rows = parse_gpus(self.text("gpu"))
            self.apps = parse_apps(self.text("apps"))
            clocks = parse_clocks(self.text("clocks"))
            report = parse_query_report(self.text("perf"))
            self.versions = report.versions
            for pos, g in enumerate(self.gpus):
                if g.index in clocks:
                    temp, g.sm_clock_mhz, g.sm_clock_max_mhz = clocks[g.index]
                    if temp is not None:  # the A5 sample is taken after the inventory query
                        g.temperature_c = max(temp, g.temperature_c or temp)
                if pos < len(report.gpus):
                    g.active_throttle = report.gpus[pos].active_throttle

    def gpu_reports(self) -> list[GpuReport]:
        pids: dict[str, list[int | None]] = {}  # by GPU, in one pass: a box may list thousands of each
        for a in self.apps:
            pids.setdefault(a.gpu_uuid, []).append(a.pid)
        return [
            GpuReport(
                index=g.index, name=g.name, memory_total_mib=g.memory_total_mib,
                memory_used_mib=g.memory_used_mib, utilization_pct=g.utilization_pct,
                temperature_c=g.temperature_c, sm_clock_mhz=g.sm_clock_mhz,
                sm_clock_max_mhz=g.sm_clock_max_mhz, ecc_uncorrected=g.ecc_uncorrected,
                active_throttle=g.active_throttle,
                compute_pids=list(pids.get(g.uuid, ())),
            )
            for g in self.gpus
        ]


def gib(n: float | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def redact_url(value: str) -> str:
    """Drop credentials from a proxy URL (user:pass@host)."""
    return re.sub(r"//[^/@\s]+@", "//***@", value)
