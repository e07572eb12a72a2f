"""Parsers for the nvidia-smi outputs the audit probe gathers (csv queries, dmon) and for fuser/ps
output. Pure functions over text, tested on real captured output (tests/fixtures/gpu/)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from typing import NamedTuple

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

_UNAVAILABLE = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "err!", ""}
# A value the driver failed to read (as opposed to one the product does not have): worth a warning.
_UNREADABLE = {"[unknown error]", "err!"}


def na(value: str) -> str | None:
    """nvidia-smi's 'not available' spellings become None (never 0)."""
    v = value.strip()
    return None if v.lower() in _UNAVAILABLE else v


def unreadable(value: str) -> bool:
    """The driver tried and failed to read this value (`[Unknown Error]` in CSV, `ERR!` in the table)."""
    return value.strip().lower() in _UNREADABLE


def number(value: str) -> int | None:
    """The integer part of a value with or without its unit ('24564 MiB', '98 %', '72'), or None."""
    v = na(value)
    m = re.match(r"^-?\d+(\.\d+)?", v or "")
    return int(float(m.group(0))) if m else None


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
    unreadable: list[str] = field(default_factory=list)  # fields the driver failed to read
    mig: str | None = None  # MIG mode when the output says (Enabled / Disabled)


@dataclass
class ComputeApp:
    pid: int | None
    used_memory_mib: int | None
    gpu_uuid: str


class CsvTable(NamedTuple):
    """`--format=csv` output split strictly: rows with exactly the asked fields, the lines that are
    messages (an error nvidia-smi printed instead of, or between, the rows), and each row whose field
    count is wrong, named by its line number, never silently accepted or repaired."""

    rows: list[dict[str, str]]
    messages: list[str]
    bad_rows: list[str]


def _header_name(cell: str) -> str:
    return cell.split(" [", 1)[0].strip()


def parse_csv(text: str, fields: tuple[str, ...] | None = None) -> CsvTable:
    """Split csv output into rows keyed by field. With `fields` the output has no header
    (`noheader`); without, the first line is the header and its names (units dropped) are the keys."""
    rows: list[dict[str, str]] = []
    messages: list[str] = []
    bad: list[str] = []
    names = list(fields) if fields is not None else None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in next(csv.reader([line], skipinitialspace=True))]
        if names is None:
            names = [_header_name(c) for c in cells]
        elif len(cells) == len(names):
            rows.append(dict(zip(names, cells, strict=True)))
        elif len(cells) == 1:
            messages.append(line.strip())
        else:
            bad.append(f"line {n}: {len(cells)} fields where {len(names)} were asked for: {line.strip()[:160]!r}")
    return CsvTable(rows, messages, bad)


class GpuRows(NamedTuple):
    """Q_GPU output: the GPUs, the message lines, and the malformed rows (see `CsvTable`)."""

    gpus: list[Gpu]
    stray: list[str]
    bad_rows: list[str]


def gpu_from_row(row: dict[str, str], position: int) -> Gpu:
    """One csv row (any subset of the Q_GPU fields, by name) as a Gpu; a missing index is the row's position."""
    def get(name: str) -> str:
        return row.get(name, "")

    index = number(get("index"))
    return Gpu(
        index=position if index is None else index,
        name=get("name"), uuid=get("uuid"), memory_total_mib=number(get("memory.total")),
        memory_used_mib=number(get("memory.used")), utilization_pct=number(get("utilization.gpu")),
        temperature_c=number(get("temperature.gpu")), driver_version=na(get("driver_version")),
        ecc_uncorrected=number(get("ecc.errors.uncorrected.volatile.total")),
        unreadable=[k for k, v in row.items() if unreadable(v)],
    )


# Far above any node (an NVL72 rack spreads its 72 GPUs over 18 nodes): a longer listing is
# broken or hostile, and each row read costs the audit time and memory.
MAX_GPU_ROWS = 1024


def parse_gpus(text: str) -> GpuRows:
    """Q_GPU rows -> GPUs, plus the lines that were not rows and the rows that were malformed."""
    table = parse_csv(text, Q_GPU_FIELDS)
    gpus, bad = [], list(table.bad_rows)
    if len(table.rows) > MAX_GPU_ROWS:
        bad.append(f"{len(table.rows) - MAX_GPU_ROWS} rows after the first {MAX_GPU_ROWS} not read: no node has "
                   "that many GPUs, so the listing is broken or hostile")
    for pos, row in enumerate(table.rows[:MAX_GPU_ROWS]):
        if number(row["index"]) is None:
            bad.append(f"row {pos + 1}: index {row['index']!r} is not a number: {', '.join(row.values())[:160]!r}")
            continue
        gpus.append(gpu_from_row(row, pos))
    return GpuRows(gpus, table.messages, bad)


def parse_apps(text: str) -> list[ComputeApp]:
    """Q_APPS rows; a pid hidden from this container reads [Not Supported] and becomes None."""
    return [ComputeApp(pid=number(r["pid"]), used_memory_mib=number(r["used_memory"]), gpu_uuid=r["gpu_uuid"])
            for r in parse_csv(text, ("pid", "used_memory", "gpu_uuid")).rows if r["gpu_uuid"].startswith("GPU-")]


def parse_clocks(text: str) -> dict[int, tuple[int | None, int | None, int | None]]:
    """index -> (temperature C, current SM MHz, max SM MHz)."""
    out = {}
    for r in parse_csv(text, ("index", "temperature.gpu", "clocks.current.sm", "clocks.max.sm")).rows:
        idx = number(r["index"])
        if idx is not None:
            out[idx] = (number(r["temperature.gpu"]), number(r["clocks.current.sm"]), number(r["clocks.max.sm"]))
    return out


def parse_dmon(text: str) -> int:
    """Number of data rows in `nvidia-smi dmon` output (header lines start with #)."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
               and line.split()[0].isdigit())


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
