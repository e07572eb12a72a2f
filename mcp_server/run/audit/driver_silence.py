"""When nvidia-smi's list of compute processes proves nothing: it failed (a driver/library
mismatch after a driver upgrade, while the jobs keep running), hung, or is absent. Such a driver
lists no process, and every live job would look like a zombie; A8 and reap_vram both ask here
before calling anything one."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_server.run.audit.smi_errors import classify

MISMATCH_STEP = "reboot, or reload the nvidia kernel module after the jobs end"
_KILLED = (124, 137)  # timeout(1)'s exit status, and SIGKILL's: nvidia-smi hung and was stopped


@dataclass(frozen=True)
class Silence:
    """Why nvidia-smi's list of compute processes proves nothing, and what to do about it."""

    reason: str
    step: str


def smi_silence(rc: int | None, lines: list[str]) -> Silence | None:
    """Why nvidia-smi's process list proves nothing (it failed, hung or is absent), None when it
    answered. `rc` None: nvidia-smi is not installed. A driver that did not answer lists no
    process, and a live training job would then look like a zombie."""
    if rc is None:
        return Silence("nvidia-smi is not installed", "nothing can be judged without it; see A2 (audit_box)")
    if rc in _KILLED or rc < 0:
        return Silence("nvidia-smi did not answer in time (it hung and was stopped)",
                       "see A2 and A7 (audit_box) for the GPU's state")
    failure = classify(lines, rc)
    if failure is None:
        return None
    if failure.kind == "nvml_mismatch":
        return Silence(f"{failure.headline}: the driver was upgraded without a reboot; running jobs keep going",
                       MISMATCH_STEP)
    return Silence(failure.headline, "see A2 (audit_box) for what nvidia-smi said")
