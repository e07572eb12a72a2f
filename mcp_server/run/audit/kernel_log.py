"""GPU faults in the kernel log: Xid events, and the ways a GPU is lost that carry no Xid at all
(a GPU that fell off the bus before the driver could assign one, the driver failing to bring a
GPU up). Pure functions over `dmesg` text, tested on real captured logs (tests/fixtures/gpu/)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# The lines the audit probe keeps from dmesg (scripts/audit_probe.sh, `kmsg`); a test keeps the
# script and this pattern in step. POSIX ERE: the probe runs it with `grep -E`.
KMSG_PATTERN = ("NVRM: Xid|NVRM: The NVIDIA GPU|fallen off the bus|RmInitAdapter failed|GPU lost from the bus"
                "|GPU is lost|Out of memory|oom-kill|oom_kill|Killed process")

_XID = re.compile(r"NVRM: Xid \((?P<dev>[^)]*)\): (?P<code>\d+)(?:, (?P<rest>.*))?")
_CAUSE = re.compile(r"caused by previous Xid (\d+)")
_RECOVERY = re.compile(r"recovery action changed from .*? to 0x[0-9a-fA-F]+ \((?P<action>[^)]*)\)")
_BUS_LOSS = re.compile(r"fallen off the bus|GPU lost from the bus|GPU is lost|NV_ERR_GPU_IS_LOST")
_INIT_FAILED = re.compile(r"RmInitAdapter failed!?\s*(?P<code>\([^)]*\))?")
_DEVICE = re.compile(r"(?:PCI:)?(?P<dev>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)")
_ANNOUNCED = re.compile(r"NVRM: The NVIDIA GPU (?P<dev>\S+)")

EventKind = Literal["xid", "bus_loss", "init_failure"]
UNNAMED = "unnamed"  # the device of a line that names no bus id


@dataclass(frozen=True)
class KernelEvent:
    kind: EventKind
    device: str
    line: str
    xid: int | None = None
    cause: int | None = None  # Xid 45 names the Xid that caused it ("caused by previous Xid 149")
    recovery: str | None = None  # Xid 154 states the recovery the driver now requires
    detail: str = ""


def device_id(dev: str) -> str:
    """One spelling per GPU: the Xid line says 'PCI:0000:65:00', the next line '0000:65:00.0'."""
    dev = dev.strip().lower().removeprefix("pci:")
    return re.sub(r"\.\d$", "", dev)


def _device(line: str, announced: str | None) -> str:
    m = _DEVICE.search(line.split("NVRM:", 1)[-1])
    if m:
        return device_id(m["dev"])
    return announced or UNNAMED


def _xid_event(m: re.Match[str], line: str) -> KernelEvent:
    rest = m["rest"] or ""
    cause, recovery = _CAUSE.search(rest), _RECOVERY.search(rest)
    return KernelEvent("xid", device_id(m["dev"]), line, xid=int(m["code"]),
                       cause=int(cause.group(1)) if cause else None,
                       recovery=recovery["action"] if recovery else None, detail=rest[:160])


def parse_kernel_log(text: str) -> list[KernelEvent]:
    """Kernel log lines -> GPU fault events, in log order. A multi-line driver message ("The NVIDIA
    GPU 0000:b3:00.0 / (PCI ID ...) installed in this system has / fallen off the bus ...") is
    attributed to the GPU its first line names."""
    events: list[KernelEvent] = []
    announced: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if m := _ANNOUNCED.search(line):
            announced = device_id(m["dev"])
        if m := _XID.search(line):
            events.append(_xid_event(m, line))
        elif m := _BUS_LOSS.search(line):
            said = line[max(0, m.start() - 40):m.end() + 20].strip()
            events.append(KernelEvent("bus_loss", _device(line, announced), line, detail=said))
        elif m := _INIT_FAILED.search(line):
            events.append(KernelEvent("init_failure", _device(line, announced), line, detail=m["code"] or ""))
    return events
