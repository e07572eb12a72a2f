"""Driver and CUDA versions as nvidia-smi prints them, whichever keys the driver uses.

Up to the 5xx series the header says `Driver Version` and `CUDA Version`. From the 610 series the
table banner says `KMD Version` / `CUDA UMD Version`, and `-q` keeps the old keys with a
deprecation note appended (`13.3 [Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version
instead]`) next to the new ones. Where the user-mode driver is not visible (a vGPU host, a
container started without the NVIDIA runtime's compute libraries) the CUDA field reads `N/A` or
`Not Found`; a sensor the driver could not read reads `ERR!`. Those are unknowns, never versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(r"^\d+(\.\d+)+")
_BANNER_DRIVER = re.compile(r"(?:KMD|Driver) Version:\s*(\S+)")
_BANNER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(.+?)\s*(?:\||$)")

# Why a driver prints no CUDA version: the A4 evidence says this, so the user knows what to fix.
UNKNOWN_CUDA_MEANING = (
    "the driver's user-mode CUDA library is not visible here (a vGPU host or a guest without the "
    "licensed CUDA driver, or a container started without the NVIDIA runtime's compute libraries), "
    "so the CUDA ceiling of this driver cannot be read"
)


@dataclass(frozen=True)
class DriverVersions:
    """What the driver said about itself. A field is None when it was absent or not a version;
    `cuda_printed` keeps what was printed instead (e.g. 'N/A') so a check can say it."""

    driver: str | None = None
    cuda: str | None = None
    cuda_printed: str | None = None

    @property
    def cuda_unreadable(self) -> bool:
        """The driver printed something for CUDA, and it was not a version."""
        return self.cuda is None and self.cuda_printed is not None


def version_of(value: str | None) -> str | None:
    """The leading dotted number of a printed value ('13.3 [Deprecated; ...]' -> '13.3'), or None
    for 'N/A', 'Not Found', 'ERR!' and anything else that is not a version."""
    m = _NUMBER.match((value or "").strip())
    return m.group(0) if m else None


def version_tuple(value: str | None) -> tuple[int, ...] | None:
    """'12.4' -> (12, 4), for ordering; None when there is no version."""
    v = version_of(value)
    return tuple(int(x) for x in v.split(".")[:2]) if v else None


def _printed(*values: str | None) -> str | None:
    for v in values:
        if v is not None and v.strip():
            return v.strip().split(" [", 1)[0]
    return None


def from_header(header: dict[str, str]) -> DriverVersions:
    """Versions from the header of `nvidia-smi -q` (any section filter): the new keys win."""
    cuda_raw = [header.get("CUDA UMD Version"), header.get("CUDA Version")]
    driver_raw = [header.get("KMD Version"), header.get("Driver Version")]
    cuda = next((v for v in map(version_of, cuda_raw) if v), None)
    driver = next((v for v in map(version_of, driver_raw) if v), None)
    return DriverVersions(driver=driver, cuda=cuda, cuda_printed=_printed(*cuda_raw))


def from_banner(text: str) -> DriverVersions:
    """Versions from the banner line of the default `nvidia-smi` table."""
    for line in text.splitlines():
        if "NVIDIA-SMI" in line:
            d, c = _BANNER_DRIVER.search(line), _BANNER_CUDA.search(line)
            printed = c.group(1) if c else None
            return DriverVersions(driver=version_of(d.group(1)) if d else None, cuda=version_of(printed),
                                  cuda_printed=_printed(printed))
    return DriverVersions()
