"""The two human-readable nvidia-smi reports: `nvidia-smi -q` (any `-d` filter; the audit probe
runs `-q -d PERFORMANCE`) and the default table users paste and jobs print at start. Both map onto
the same `Gpu` and `DriverVersions` the checks read, so one set of checks judges either."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_server.run.audit.nvidia import Gpu, na, number, unreadable
from mcp_server.run.audit.versions import DriverVersions, from_banner, from_header

_GPU_BLOCK = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
_THROTTLE_WORDS = ("slowdown", "power brake", "thermal")


@dataclass
class QueryGpu:
    """One GPU block of `-q`: what the audit reads from it."""

    name: str | None = None
    uuid: str | None = None
    active_throttle: list[str] = field(default_factory=list)


@dataclass
class QueryReport:
    header: dict[str, str]
    gpus: list[QueryGpu]

    @property
    def versions(self) -> DriverVersions:
        return from_header(self.header)


def parse_query_report(text: str) -> QueryReport:
    """`nvidia-smi -q`: the header facts and, per GPU block in order, its name, UUID and the
    throttle/clock-event reasons that read Active (both the older "Clocks Throttle Reasons" and the
    newer "Clocks Event Reasons" headings)."""
    header: dict[str, str] = {}
    gpus: list[QueryGpu] = []
    for raw in text.splitlines():
        line = raw.strip()
        if _GPU_BLOCK.match(line):
            gpus.append(QueryGpu())
            continue
        if ":" not in line:
            continue
        key, _, value = (s.strip() for s in line.partition(":"))
        if not gpus:
            header[key] = value
        elif key == "Product Name":
            gpus[-1].name = value
        elif key == "GPU UUID":
            gpus[-1].uuid = value
        elif value == "Active" and any(w in key.lower() for w in _THROTTLE_WORDS):
            gpus[-1].active_throttle.append(key)
    return QueryReport(header, gpus)


# The default table: each GPU is two (three with the MIG column) rows of '|'-separated cells.
# Row 1: index, name, persistence (or TCC/WDDM) | bus id, display | ECC (a count, N/A, On or Off).
# Row 2: fan, temperature, perf state, power/cap | memory used/total | utilisation, compute mode.
_ROW1 = re.compile(r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?:On|Off|WDDM|TCC)\s*\|\s*"
                   r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s+\S+\s*\|\s*(?P<ecc>\S+)\s*\|$")
_ROW2 = re.compile(r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<power>\S+)\s*/\s*\S+\s*\|"
                   r"\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*\|\s*(?P<util>\S+)\s+\S+\s*\|$")
_ROW3 = re.compile(r"^\|\s*\|\s*\|\s*(?P<mig>\S+)\s*\|$")


@dataclass
class SmiTable:
    versions: DriverVersions
    gpus: list[Gpu]


def _second_row(gpu: Gpu, m: re.Match[str]) -> None:
    gpu.temperature_c = number(m["temp"].rstrip("C"))
    gpu.memory_used_mib, gpu.memory_total_mib = number(m["used"]), number(m["total"])
    gpu.utilization_pct = number(m["util"])
    gpu.unreadable = [k for k in ("fan", "temp", "perf", "power", "used", "total", "util") if unreadable(m[k])]


def parse_table(text: str) -> SmiTable:
    """The default `nvidia-smi` table: banner versions and one Gpu per GPU block. The MIG-devices
    and processes sections have no bus id in their rows and are never read as GPUs."""
    versions = from_banner(text)
    gpus: list[Gpu] = []
    expect = 0  # which row of the current GPU block comes next (0: none)
    for raw in text.splitlines():
        line = raw.rstrip()
        first = _ROW1.match(line)
        if first:
            gpus.append(Gpu(index=int(first["index"]), name=first["name"].strip(), uuid="", memory_total_mib=None,
                            memory_used_mib=None, utilization_pct=None, temperature_c=None,
                            driver_version=versions.driver, ecc_uncorrected=number(first["ecc"])))
            expect = 2
        elif expect == 2 and (second := _ROW2.match(line)):
            _second_row(gpus[-1], second)
            expect = 3
        elif expect == 3 and (third := _ROW3.match(line)):
            gpus[-1].mig = na(third["mig"])
            expect = 0
        else:
            expect = 0
    return SmiTable(versions, gpus)
