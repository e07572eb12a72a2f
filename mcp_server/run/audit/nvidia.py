"""Parsers for real nvidia-smi output formats (csv,noheader,nounits; -q -d PERFORMANCE;
dmon) and for fuser/ps output. Pure functions over text: table-tested."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The exact queries the audit probe (scripts/audit_probe.sh) runs; the parsers below read their
# output, and a test keeps the script and these strings in step.
Q_GPU_FIELDS = (
    "index", "name", "uuid", "memory.total", "memory.used", "utilization.gpu",
    "temperature.gpu", "driver_version", "ecc.errors.uncorrected.volatile.total",
)
Q_GPU = "nvidia-smi --query-gpu=" + ",".join(Q_GPU_FIELDS) + " --format=csv,noheader,nounits"
Q_APPS = "nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits"
Q_CLOCKS = ("nvidia-smi --query-gpu=index,temperature.gpu,clocks.current.sm,clocks.max.sm "
            "--format=csv,noheader,nounits")
Q_PERF = "nvidia-smi -q -d PERFORMANCE"
Q_DMON = "nvidia-smi dmon -s pucvmet -c 5"

_UNAVAILABLE = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", ""}
_XID = re.compile(r"NVRM: Xid \((?P<dev>[^)]*)\): (?P<code>\d+)")


def na(value: str) -> str | None:
    """nvidia-smi's 'not available' spellings become None (never 0)."""
    v = value.strip()
    return None if v.lower() in _UNAVAILABLE else v


def _int(value: str) -> int | None:
    v = na(value)
    try:
        return None if v is None else int(float(v))
    except ValueError:
        return None


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str
    memory_total_mib: int | None
    memory_used_mib: int | None
    utilization_pct: int | None
    temperature_c: int | None
    driver_version: str | None
    ecc_uncorrected: int | None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    active_throttle: list[str] = field(default_factory=list)


@dataclass
class ComputeApp:
    pid: int | None
    used_memory_mib: int | None
    gpu_uuid: str


def split_csv(line: str, n: int) -> list[str] | None:
    """Split one csv,noheader line into n fields, or None when it is not such a line
    (an error message interleaved with the rows). Fields are joined by ', '."""
    parts = [p.strip() for p in line.split(", ")]
    if len(parts) == n:
        return parts
    if len(parts) > n and n >= 3:
        # A name containing ", " (none today, but possible): the name is field 1 of Q_GPU.
        head, tail = parts[:1], parts[-(n - 2):]
        return [*head, ", ".join(parts[1 : len(parts) - (n - 2)]), *tail]
    return None


def parse_gpus(text: str) -> tuple[list[Gpu], list[str]]:
    """Q_GPU rows -> GPUs, plus the lines that were not rows (reported, not dropped)."""
    gpus, stray = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = split_csv(line, len(Q_GPU_FIELDS))
        idx = _int(f[0]) if f else None
        if f is None or idx is None:
            stray.append(line.strip())
            continue
        gpus.append(Gpu(
            index=idx, name=f[1], uuid=f[2], memory_total_mib=_int(f[3]), memory_used_mib=_int(f[4]),
            utilization_pct=_int(f[5]), temperature_c=_int(f[6]), driver_version=na(f[7]),
            ecc_uncorrected=_int(f[8]),
        ))
    return gpus, stray


def parse_apps(text: str) -> list[ComputeApp]:
    apps = []
    for line in text.splitlines():
        f = split_csv(line, 3)
        if f is None or not f[2].startswith("GPU-"):
            continue
        apps.append(ComputeApp(pid=_int(f[0]), used_memory_mib=_int(f[1]), gpu_uuid=f[2]))
    return apps


def parse_clocks(text: str) -> dict[int, tuple[int | None, int | None, int | None]]:
    """index -> (temperature C, current SM MHz, max SM MHz)."""
    out = {}
    for line in text.splitlines():
        f = split_csv(line, 4)
        idx = _int(f[0]) if f else None
        if f is not None and idx is not None:
            out[idx] = (_int(f[1]), _int(f[2]), _int(f[3]))
    return out


_THROTTLE_WORDS = ("slowdown", "power brake", "thermal")


def parse_performance(text: str) -> tuple[dict[str, str], dict[int, list[str]]]:
    """`nvidia-smi -q -d PERFORMANCE`: header facts (Driver Version, CUDA Version) and, per
    GPU in order, the throttle/clock-event reasons that read Active. Both the older
    "Clocks Throttle Reasons" and the newer "Clocks Event Reasons" headings are accepted."""
    header: dict[str, str] = {}
    active: dict[int, list[str]] = {}
    gpu = -1
    for raw in text.splitlines():
        line = raw.strip()
        if re.match(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d", line):
            gpu += 1
            active[gpu] = []
            continue
        if ":" not in line:
            continue
        key, _, value = (s.strip() for s in line.partition(":"))
        if gpu < 0:
            header[key] = value
        elif value == "Active" and any(w in key.lower() for w in _THROTTLE_WORDS):
            active[gpu].append(key)
    return header, active


def parse_dmon(text: str) -> int:
    """Number of data rows in `nvidia-smi dmon` output (header lines start with #)."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
               and line.split()[0].isdigit())


def parse_xids(text: str) -> list[tuple[int, str, str]]:
    """dmesg lines -> (xid code, device, the line)."""
    out = []
    for line in text.splitlines():
        m = _XID.search(line)
        if m:
            out.append((int(m["code"]), m["dev"], line.strip()))
    return out


def parse_pids(text: str) -> list[int]:
    """fuser prints pids (with access letters when verbose) on stdout."""
    return sorted({int(m) for m in re.findall(r"\b(\d+)[a-zA-Z]*\b", text)})


def parse_ps(text: str) -> dict[int, tuple[int, str]]:
    """`ps -o pid=,etimes=,stat=,comm=` -> pid -> (age seconds, 'stat comm')."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            out[int(parts[0])] = (int(parts[1]), " ".join(parts[2:]))
    return out
