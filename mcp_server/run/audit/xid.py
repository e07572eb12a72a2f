"""Xid codes judged by NVIDIA's Xid catalogue, and the kernel-log faults that carry no Xid.

Each entry is a row of the catalogue ("Analyzing Xid Errors with the Xid Catalog"): its mnemonic,
its description and its resolution buckets (the immediate action, e.g. RESET_GPU, and the
investigatory one, e.g. CONTACT_SUPPORT), restated as a class and an action a GPU renter can take.
The classes:

- application: the application's own fault, or a fault contained to it; restart or fix the job.
- driver: a driver or GPU-firmware (GSP) fault; the GPU needs a reset, the fix is new software.
- hardware-reset: a hardware fault cleared by a GPU reset or node reboot; support if it recurs.
- hardware-RMA: the hardware is failing (spares exhausted, memory degrading); it must be replaced.
- informational: an event that explains another Xid or a pending repair.

`needs_reset` is the catalogue's immediate action taking the GPU out of service (RESET_GPU,
RESTART_BM or a reset workflow): the audit FAILs the box on those and WARNs on the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcp_server.run.audit.kernel_log import UNNAMED, KernelEvent

CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
MEMORY_ERRORS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"

XidClass = Literal["application", "driver", "hardware-reset", "hardware-RMA", "informational"]


@dataclass(frozen=True)
class XidEntry:
    mnemonic: str
    meaning: str
    klass: XidClass
    needs_reset: bool
    action: str
    source: str = CATALOGUE


_GSP = "RESET_GPU now; the lasting fix is a driver/GSP-firmware update (INVESTIGATE_SW), which a tenant cannot make"
_NVLINK5 = ("the catalogue's NVLink5 workflow decodes the sub-code; a fatal one needs a GPU reset before the next job "
            "(a line marked Nonfatal does not)")

XIDS: dict[int, XidEntry] = {
    8: XidEntry("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "application", False,
                "RESTART_APP: restart the job; contact support if it recurs"),
    13: XidEntry("ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception (an out-of-bounds access or illegal "
                 "instruction in a kernel)", "application", False,
                 "RESTART_APP: fix the job (compute-sanitizer); the same SM faulting under different code points "
                 "to hardware"),
    31: XidEntry("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault (an illegal address in the job)",
                 "application", False, "RESTART_APP: debug the job (compute-sanitizer)"),
    43: XidEntry("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (the faulting job's channel "
                 "was reset)", "application", False, "IGNORE: the job that hit it must restart"),
    45: XidEntry("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup of a job's channels", "application",
                 False, "alone: the job was torn down, restart it; after another Xid: follow that Xid"),
    46: XidEntry("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped responding", "hardware-reset", True,
                 "RESET_GPU before the next job; contact support if it recurs"),
    48: XidEntry("ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit (uncorrectable) ECC error", "hardware-reset", True,
                 "reset the GPU or reboot the node (the bad row is remapped on reset); contact support if it recurs"),
    62: XidEntry("PMU_HALT_ERROR", "internal micro-controller halt", "hardware-reset", True,
                 "RESET_GPU; contact support if it recurs"),
    63: XidEntry("INFOROM_DRAM_RETIREMENT_EVENT", "a GPU memory row was marked for remapping", "informational",
                 False, "IGNORE: the remap takes effect at the next GPU reset; a rising count heads for Xid 64"),
    64: XidEntry("INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failed (no spare row left)",
                 "hardware-RMA", True, "RESET_GPU, then replace the GPU: a row-remapping failure is an RMA "
                 "condition", MEMORY_ERRORS),
    74: XidEntry("NVLINK_ERROR", "NVLink error towards a peer GPU or NVSwitch", "hardware-reset", True,
                 "a GPU reset or node reboot clears it; contact support if it recurs"),
    79: XidEntry("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "the GPU has fallen off the bus", "hardware-reset",
                 True, "RESTART_BM: only a node reboot brings it back; re-rent a different box (the operator must "
                 "check power, seating and firmware)"),
    92: XidEntry("EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", "hardware-RMA", False,
                 "IGNORE for now (single-bit errors are corrected), CONTACT_SUPPORT: the memory is degrading"),
    94: XidEntry("ROBUST_CHANNEL_CONTAINED_ERROR", "contained uncorrectable memory error (only the affected job "
                 "was stopped)", "application", False, "RESTART_APP: restart the job; the GPU stays usable"),
    95: XidEntry("ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained uncorrectable memory error", "hardware-reset",
                 True, "RESET_GPU: every job on the GPU was affected; reset it before reuse"),
    109: XidEntry("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context-switch timeout", "hardware-reset", True,
                  "RESET_GPU; contact support if it recurs"),
    119: XidEntry("GSP_RPC_TIMEOUT", "GSP RPC timeout (the GPU System Processor stopped answering the driver)",
                  "driver", True, _GSP),
    120: XidEntry("GSP_ERROR", "GSP firmware error", "driver", True, _GSP),
    140: XidEntry("UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error", "hardware-reset", True,
                  "RESET_GPU; contact support"),
    145: XidEntry("NVLINK_RLW_ERROR", "NVLink5 RLW error", "hardware-reset", True, _NVLINK5),
    149: XidEntry("NVLINK_NETIR_ERROR", "NVLink5 network (NETIR) error", "hardware-reset", True, _NVLINK5),
    154: XidEntry("GPU_RECOVERY_ACTION_CHANGED", "the driver's summary of the recovery another Xid requires",
                  "informational", False, "do what the line says"),
}


@dataclass(frozen=True)
class Finding:
    fail: bool
    device: str
    text: str


def _entry_text(e: XidEntry) -> str:
    return f"{e.mnemonic}: {e.meaning}; {e.klass}: {e.action}"


def _xid_finding(ev: KernelEvent, other_codes: set[int]) -> Finding | None:
    code = ev.xid or 0
    if code == 45 and ev.cause is not None and ev.cause in XIDS:
        cause = XIDS[ev.cause]
        return Finding(cause.needs_reset, ev.device,
                       f"Xid 45 on {ev.device} caused by Xid {ev.cause} ({_entry_text(cause)})")
    if code == 45 and other_codes:
        return None  # the catalogue: a 45 beside another Xid follows that Xid
    if code == 154:
        action = ev.recovery or "unknown"
        return Finding(action.lower() != "none", ev.device, f"Xid 154 on {ev.device}: the driver now requires "
                       f"'{action}' (GPU_RECOVERY_ACTION_CHANGED)")
    entry = XIDS.get(code)
    if entry is None:
        return Finding(False, ev.device, f"Xid {code} on {ev.device} is not in the audit's table: look it up in "
                       f"the catalogue ({CATALOGUE}); last line: {ev.line[:120]}")
    fail = entry.needs_reset and not (code in (145, 149) and "Nonfatal" in ev.line)
    return Finding(fail, ev.device, f"Xid {code} on {ev.device} ({_entry_text(entry)})")


def _gpu(device: str) -> str:
    return "a GPU (the line names no bus id)" if device == UNNAMED else f"GPU {device}"


def _lost(ev: KernelEvent) -> Finding:
    if ev.kind == "bus_loss":
        return Finding(True, ev.device, f"{_gpu(ev.device)} fell off the bus or was lost (kernel log: "
                       f"{ev.detail!r}; no Xid needed): only a node reboot brings it back; re-rent a different box")
    return Finding(True, ev.device, f"the driver could not bring up {_gpu(ev.device)} (RmInitAdapter failed "
                   f"{ev.detail}): it is unusable on this boot; re-rent (the operator must check power, BIOS "
                   "PCIe settings such as Above-4G decoding / Resizable BAR, and firmware)")


def assess(events: list[KernelEvent]) -> list[Finding]:
    """One finding per fault (per GPU and code), failures first."""
    codes: dict[str, set[int]] = {}
    for ev in events:
        if ev.kind == "xid" and ev.xid is not None and ev.xid != 45:
            codes.setdefault(ev.device, set()).add(ev.xid)
    found: dict[tuple[str, str, int | None, int | None, str | None], Finding] = {}
    for ev in events:
        if ev.kind == "bus_loss" and 79 in codes.get(ev.device, set()):
            continue  # the Xid 79 line already says it
        finding = _xid_finding(ev, codes.get(ev.device, set())) if ev.kind == "xid" else _lost(ev)
        key = (ev.kind, ev.device, ev.xid, ev.cause, ev.recovery)
        if finding is not None and key not in found:
            found[key] = finding
    return sorted(found.values(), key=lambda f: not f.fail)
