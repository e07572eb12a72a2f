"""The Clash/Mihomo fallback ladder's pieces (knowledge run.md §7.6): whether a doctor report allows
the fallback and what it would do, the known_hosts name the presented key must match (the logical
name, never the IP), and one IPv4 socket to the DoH-chosen address, bound to the physical interface
or a local address. Never resolves a name, never touches routes, DNS, proxies or the proxy's config."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import re
import socket
import struct
import sys
from collections.abc import Callable
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict

from mcp_server.errors import ConfigError, InputError, TransportError
from mcp_server.hosts.doctor_hostkey import host_label
from mcp_server.hosts.doctor_models import DoctorReport, fallback_allowed
from mcp_server.hosts.doctor_network import is_fake_ip
from mcp_server.hosts.fallback_options import validate_resolver_url
from mcp_server.hosts.known_hosts import known_hosts_label

FallbackClass = Literal["banner_timeout", "fake_ip", "tun_interference"]
SocketOption = tuple[int, int, int] | tuple[int, int, bytes]

# Option numbers from the OS headers, so every branch can be built (and tested) on any OS.
SO_BINDTODEVICE = 25  # Linux asm-generic/socket.h (level SOL_SOCKET = 1)
LINUX_SOL_SOCKET = 1
IPPROTO_IP = 0
IP_BOUND_IF = 25  # macOS netinet/in.h: the interface index, host byte order
IP_UNICAST_IF = 31  # Windows ws2ipdef.h: the interface index, network byte order
_LINUX_IFNAMSIZ = 15  # IFNAMSIZ 16 less the terminating NUL
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,64}$")
_ROUTE = "references://run-remote/ssh-transfer#windows-clash"
_NOTHING_ABOUT_JOBS = "a transport failure says nothing about jobs on the box"


class FallbackPlan(BaseModel):
    """What the ladder will do for a host whose direct connection failed with path evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    destination: str
    logical_host: str  # the HostName resolved over DoH; the key is checked against it, never the IP
    port: int
    pin_name: str  # the known_hosts label the presented key must match
    resolver_url: str | None  # None when HostName is already an IPv4 address: nothing to resolve
    why: FallbackClass
    evidence: list[str]


def pin_name(logical_host: str, port: int) -> str:
    """The known_hosts label for the logical name: `host`, or `[host]:port` off port 22."""
    return known_hosts_label(logical_host, port)


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def fallback_plan(report: DoctorReport, *, opted_in: bool, resolver_url: str) -> FallbackPlan | None:
    """The plan when the host opted in and the report's failure is path evidence (banner timeout,
    fake IP, TUN interference); None otherwise — never for auth, host key, refused or timeout,
    nor for a destination reached through ProxyJump/ProxyCommand or an IPv6 literal."""
    settings = report.settings
    if not opted_in or not fallback_allowed(report) or settings is None or settings.proxied:
        return None
    literal = settings.host.strip("[]")
    if ":" in literal:
        return None
    ipv4 = _is_ipv4(literal)
    if ipv4 and is_fake_ip(literal):
        return None  # the configured address itself is a fake IP: no real address to go to
    evidence = [line for s in report.steps if s.failure_class == report.failure_class for line in s.evidence]
    return FallbackPlan(
        destination=report.destination, logical_host=settings.host, port=settings.port,
        pin_name=host_label(settings), resolver_url=None if ipv4 else validate_resolver_url(resolver_url),
        why=cast(FallbackClass, report.failure_class), evidence=evidence)


def interface_option(interface: str, *, platform: str = sys.platform,
                     index_of: Callable[[str], int] = socket.if_nametoindex) -> SocketOption:
    """The socket option that pins a socket to `interface`: Linux SO_BINDTODEVICE (the name; needs
    CAP_NET_RAW), macOS IP_BOUND_IF (the index), Windows IP_UNICAST_IF (the index in network byte
    order). On macOS and Windows a decimal `interface` is taken as the index itself."""
    if not _INTERFACE.match(interface):
        raise InputError("the fallback interface name is not an interface name",
                         expected="letters, digits and _ . : @ -, at most 64 (e.g. eth0, en0, or an index)")
    if platform.startswith("linux"):
        if len(interface) > _LINUX_IFNAMSIZ:
            raise InputError("the fallback interface name is longer than Linux allows",
                             expected=f"at most {_LINUX_IFNAMSIZ} characters (ip -brief link lists them)")
        return (LINUX_SOL_SOCKET, SO_BINDTODEVICE, interface.encode())
    if platform not in ("darwin", "win32"):
        raise ConfigError("binding a socket to an interface is not supported on this OS",
                          next_step="set fallback_local_address to the physical interface's address instead")
    index = int(interface) if interface.isdecimal() else _index(interface, index_of)
    if not 0 < index < 2**32:
        raise InputError("the fallback interface index is out of range", expected="1 to 4294967295")
    if platform == "darwin":
        return (IPPROTO_IP, IP_BOUND_IF, index)
    return (IPPROTO_IP, IP_UNICAST_IF, struct.pack("!I", index))


def _index(interface: str, index_of: Callable[[str], int]) -> int:
    try:
        return index_of(interface)
    except OSError as exc:
        raise ConfigError("this machine has no network interface of the fallback interface's name",
                          next_step="list them (ifconfig on macOS, Get-NetAdapter on Windows: ifIndex) and set "
                          "fallback_interface to the physical one, not the TUN device") from exc


def _ipv4(text: str, what: str) -> str:
    """`text` as a canonical IPv4 address; a name is refused (the ladder never resolves again)."""
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise InputError(f"{what} is not an IPv4 address (the fallback never resolves a name)",
                         expected="a dotted IPv4 address") from None


def _prepared(ip: str, port: int, interface: str | None, local_address: str | None) -> tuple[socket.socket, str]:
    """A fresh IPv4 TCP socket, bound as asked, not yet connected; and the checked target address."""
    target = _ipv4(ip, "the fallback's target")
    if is_fake_ip(target):
        raise InputError("the fallback's target is a Clash fake IP (198.18.0.0/15), not the box",
                         next_step="connect to the address the DoH resolver chose")
    if not 0 < port < 65536:
        raise InputError("the fallback's port is out of range", expected="1 to 65535")
    option = interface_option(interface) if interface else None
    local = _ipv4(local_address, "the fallback's local address") if local_address else None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if option is not None:
            _set_interface(sock, option)
        if local is not None:
            _bind_local(sock, local)
    except BaseException:
        sock.close()
        raise
    return sock, target


def _set_interface(sock: socket.socket, option: SocketOption) -> None:
    try:
        sock.setsockopt(*option)
    except PermissionError as exc:
        raise ConfigError("binding the socket to an interface was refused by the OS",
                          next_step="run the server with CAP_NET_RAW (Linux SO_BINDTODEVICE), or set "
                          "fallback_local_address to the interface's address instead") from exc
    except OSError as exc:
        raise ConfigError("this machine has no network interface of the fallback interface's name",
                          observed=errno.errorcode.get(exc.errno or 0, type(exc).__name__),
                          next_step="list them (ip -brief link) and set fallback_interface to the physical "
                          "one, not the TUN device") from exc


def _bind_local(sock: socket.socket, local: str) -> None:
    try:
        sock.bind((local, 0))
    except OSError as exc:
        raise ConfigError("the fallback's local address is not an address of this machine",
                          observed=errno.errorcode.get(exc.errno or 0, type(exc).__name__),
                          next_step="set fallback_local_address to the physical interface's IPv4 address "
                          "(ip -brief addr, ipconfig)") from exc


def _connect_error(exc: BaseException, timeout_s: float) -> TransportError:
    if isinstance(exc, TimeoutError):
        return TransportError(f"the fallback socket got no TCP answer within {timeout_s:g} s; "
                              f"{_NOTHING_ABOUT_JOBS}", next_step="check the instance runs and that the "
                              f"interface is the physical one ({_ROUTE})")
    code = errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)
    if code == "ECONNREFUSED":
        return TransportError(f"the DoH-chosen address refused the connection; {_NOTHING_ABOUT_JOBS}",
                              observed=code, next_step="a rental's port changes on re-create → re-read "
                              "host and port from the console/API")
    return TransportError(f"the fallback socket could not connect; {_NOTHING_ABOUT_JOBS}", observed=code,
                          next_step=f"check the interface or local address is the physical one ({_ROUTE})")


async def open_bound_socket(ip: str, port: int, *, interface: str | None, local_address: str | None,
                            timeout_s: float) -> socket.socket:
    """One fresh IPv4 TCP socket connected to ip:port, bound to `interface` and/or `local_address`
    first; closed if the connect is cancelled or fails. `ip` must be an address: nothing is
    resolved. The socket is what `asyncssh.connect(sock=...)` takes."""
    sock, target = _prepared(ip, port, interface, local_address)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (target, port)), timeout_s)
    except OSError as exc:  # TimeoutError included
        sock.close()
        raise _connect_error(exc, timeout_s) from exc
    except BaseException:
        sock.close()
        raise
    return sock
