"""The doctor's route step: which interface this machine sends the box's packets through, and whether
that is a TUN device (Clash/Mihomo's TUN mode, and VPN clients, capture routes that way; knowledge
run.md §7.6). Read-only: it asks `ip route get` (Linux) or `route -n get` (macOS) and looks at the
device; nothing is changed. Windows is not checked (its route table needs PowerShell)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from mcp_server.hosts.doctor_models import DoctorStep, failed, passed, skipped
from mcp_server.hosts.doctor_openssh import have, run_tool

SYS_CLASS_NET = Path("/sys/class/net")
_LINUX_DEV = re.compile(r"\bdev\s+(\S+)")
_MACOS_INTERFACE = re.compile(r"^\s*interface:\s*(\S+)\s*$", re.M)
_SAFE_DEVICE = re.compile(r"^[A-Za-z0-9_.:@-]{1,64}$")


def linux_route_device(output: str) -> str | None:
    """The device in `ip route get ADDR` output (`... dev eth0 src ...`)."""
    m = _LINUX_DEV.search(output)
    return m.group(1) if m and _SAFE_DEVICE.match(m.group(1)) else None


def macos_route_device(output: str) -> str | None:
    """The interface in `route -n get ADDR` output (`  interface: en0`)."""
    m = _MACOS_INTERFACE.search(output)
    return m.group(1) if m and _SAFE_DEVICE.match(m.group(1)) else None


def is_tun(device: str, platform: str = sys.platform, sys_class_net: Path = SYS_CLASS_NET) -> bool:
    """Linux: the device has tun_flags (a TUN/TAP device); macOS: a utun device."""
    if platform.startswith("linux"):
        return (sys_class_net / device / "tun_flags").exists()
    return platform == "darwin" and device.startswith("utun")


def _command(address: str, port: int, platform: str) -> list[str] | None:
    if platform.startswith("linux") and have("ip"):
        # The port too: a proxy's rules may capture only some ports (policy routing by dport).
        return ["ip", "route", "get", address, "ipproto", "tcp", "dport", str(port)]
    if platform == "darwin" and have("route"):
        return ["route", "-n", "get", address]
    return None


async def route_step(address: str, port: int, timeout_s: float, *, platform: str = sys.platform,
                     sys_class_net: Path = SYS_CLASS_NET) -> DoctorStep:
    """Which device the route to `address` uses; a TUN device is a warning of class tun_interference
    (the later steps decide whether it broke anything)."""
    argv = _command(address, port, platform)
    if argv is None:
        return skipped("route", "skipped: no route tool on this OS (ip on Linux, route on macOS)")
    start = time.monotonic()
    run = await run_tool(argv, timeout_s)
    if run.rc != 0 and argv[0] == "ip":  # an iproute2 older than 4.17 knows no ipproto/dport
        argv = argv[:4]
        run = await run_tool(argv, timeout_s)
    took = time.monotonic() - start
    device = (linux_route_device if platform.startswith("linux") else macos_route_device)(run.stdout)
    if run.rc != 0 or device is None:
        return skipped("route", f"skipped: {argv[0]} could not tell the route to the box")
    evidence = [f"{' '.join(argv)} → dev {device}"]
    if is_tun(device, platform, sys_class_net):
        step = failed("route", took, "tun_interference", f"the route to the box goes through the TUN device "
                      f"{device} (a proxy or VPN captures it)", [*evidence, f"{device} is a TUN device"])
        step.status = "warn"
        return step
    return passed("route", took, f"through {device}", evidence)
