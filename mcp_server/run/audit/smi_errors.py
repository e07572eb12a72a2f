"""What nvidia-smi means when it prints an error instead of GPUs. The message text decides (the
exit code alone is ambiguous and often not what the man page lists); the exit code is the fallback."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["no_driver", "nvml_mismatch", "no_devices", "gpu_lost", "nvml_missing", "other"]

_MESSAGES: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (re.compile(r"couldn.t communicate with the NVIDIA driver", re.I), "no_driver"),
    (re.compile(r"Driver/library version mismatch", re.I), "nvml_mismatch"),
    (re.compile(r"No devices were found", re.I), "no_devices"),
    (re.compile(r"Unable to determine the device handle|GPU is lost|fallen off the bus", re.I), "gpu_lost"),
    (re.compile(r"NVML Shared Library Not Found", re.I), "nvml_missing"),
)
# nvidia-smi(1), RETURN VALUE; 18 is what a version mismatch exits with in the wild.
_EXIT_CODES: dict[int, Kind] = {
    9: "no_driver", 18: "nvml_mismatch", 6: "no_devices", 15: "gpu_lost", 12: "nvml_missing",
}

MEANING: dict[Kind, str] = {
    "no_driver": "the NVIDIA driver is not loaded (nvidia-smi couldn't communicate with it): in a container the "
                 "GPU was not attached (--gpus all / the NVIDIA runtime); on a host the kernel module is not "
                 "loaded (a kernel update without a DKMS rebuild, or nouveau holds the card)",
    "nvml_mismatch": "driver/library version mismatch: the user-space NVML library differs from the loaded kernel "
                     "module (the driver was upgraded without a reboot); reboot the box, which on a rental is "
                     "the operator's job",
    "no_devices": "the driver is loaded but brought up no GPU (look for RmInitAdapter failures in the kernel log; "
                  "in a VM the GPU may not be passed through)",
    "gpu_lost": "a GPU is unreachable (it fell off the bus or hung): only a reboot or power cycle brings it back; "
                "re-rent a different box",
    "nvml_missing": "the NVML library was not found (a partial driver install or a container without the "
                    "driver's user-space libraries)",
    "other": "nvidia-smi failed",
}


@dataclass(frozen=True)
class SmiFailure:
    kind: Kind
    said: str  # the first line nvidia-smi printed, for the evidence

    @property
    def meaning(self) -> str:
        return MEANING[self.kind]

    @property
    def headline(self) -> str:
        """The meaning's first clause ('the NVIDIA driver is not loaded'), for checks that only skip."""
        return self.meaning.split(" (", 1)[0].split(":", 1)[0]


def classify(lines: list[str], rc: int) -> SmiFailure | None:
    """The failure nvidia-smi reported in `lines` (its non-row output) or by a non-zero `rc`;
    None when it reported none."""
    for line in lines:
        for pattern, kind in _MESSAGES:
            if pattern.search(line):
                return SmiFailure(kind, line.strip())
    if rc == 0:
        return None
    said = lines[0].strip() if lines else f"exit status {rc}"
    return SmiFailure(_EXIT_CODES.get(rc, "other"), said)
