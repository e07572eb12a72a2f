"""The doctor's network steps, on plain sockets: the system resolver's answer (Clash fake IPs
flagged), a TCP connect, the SSH banner on that connection, and the connect round-trip time.
Read-only: nothing here touches routes, DNS settings or proxies."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import socket
import statistics
import time

from mcp_server.hosts.doctor_models import (
    KEEPALIVE_ROUTE,
    DoctorStep,
    EffectiveSettings,
    failed,
    passed,
)

# Clash/Mihomo hand out fake IPs from 198.18.0.0/15 (default fake-ip-range 198.18.0.1/16).
FAKE_IP_NETWORK = ipaddress.ip_network("198.18.0.0/15")
_BANNER_MAX = 255  # RFC 4253: the identification line is at most 255 bytes
_REFUSED = {errno.ECONNREFUSED, errno.ECONNRESET}
RTT_SAMPLES = 3


def is_fake_ip(address: str) -> bool:
    """An address in the Clash/Mihomo fake-IP range (an IPv4-mapped IPv6 form counts too)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip in FAKE_IP_NETWORK


async def resolve(host: str, port: int, timeout_s: float) -> list[str]:
    """The system resolver's addresses for `host`, in its order, each once."""
    infos = await asyncio.wait_for(
        asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout_s)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def dns_step(host: str, port: int, timeout_s: float) -> tuple[DoctorStep, list[str]]:
    """Resolve `host`; a fake-IP answer is a failure of class `fake_ip`, with every address shown."""
    start = time.monotonic()
    try:
        addresses = await resolve(host, port, timeout_s)
    except TimeoutError:
        return failed("dns", time.monotonic() - start, "dns_failed",
                      f"the system resolver gave no answer within {timeout_s:g} s"), []
    except OSError as exc:
        return failed("dns", time.monotonic() - start, "dns_failed", "the system resolver found no address",
                      [f"getaddrinfo: {exc.strerror or type(exc).__name__}"]), []
    took = time.monotonic() - start
    evidence = [f"{a} (Clash fake-IP range 198.18.0.0/15)" if is_fake_ip(a) else a for a in addresses]
    if any(is_fake_ip(a) for a in addresses):
        # A warning, not a failure: Clash may still carry the connection; the later steps decide.
        step = failed("dns", took, "fake_ip", "the system answer is a Clash/Mihomo fake IP, not the box",
                      ["system resolver: " + ", ".join(evidence)])
        step.status = "warn"
        return step, addresses
    return passed("dns", took, f"resolves to {len(addresses)} address(es)",
                  ["system resolver: " + ", ".join(evidence)]), addresses


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


async def _connect(address: str, port: int, timeout_s: float) -> socket.socket:
    """A connected non-blocking socket to (address, port), or an OSError/TimeoutError."""
    sock = socket.socket(_family(address), socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (address, port)), timeout_s)
    except BaseException:
        sock.close()
        raise
    return sock


def _connect_failure(exc: BaseException, target: str, took: float, timeout_s: float) -> DoctorStep:
    if isinstance(exc, TimeoutError):
        return failed("tcp", took, "timeout", f"no TCP answer from {target} within {timeout_s:g} s")
    if isinstance(exc, OSError) and exc.errno in _REFUSED:
        return failed("tcp", took, "connection_refused", f"{target} refused the connection",
                      ["ECONNREFUSED: no listener on that port"])
    name = errno.errorcode.get(exc.errno or 0, type(exc).__name__) if isinstance(exc, OSError) else "error"
    return failed("tcp", took, "other_error", f"cannot connect to {target}", [f"{name}"])


async def _read_banner(sock: socket.socket, timeout_s: float) -> bytes:
    """Bytes up to the first newline (the identification line), within `timeout_s`."""
    loop = asyncio.get_running_loop()
    data = b""
    deadline = loop.time() + timeout_s
    while b"\n" not in data and len(data) < _BANNER_MAX:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, _BANNER_MAX), max(deadline - loop.time(), 0.001))
        if not chunk:
            break
        data += chunk
    return data


def _banner_step(data: bytes, took: float, timeout_s: float) -> DoctorStep:
    line = data.split(b"\n", 1)[0].rstrip(b"\r").decode("ascii", errors="replace")
    if line.startswith("SSH-"):
        return passed("banner", took, "the server speaks SSH", [line[:80]])
    if not data:
        return failed("banner", took, "banner_timeout",
                      f"TCP is up but the connection closed with no SSH banner within {timeout_s:g} s")
    return failed("banner", took, "other_error", "the server's first line is not an SSH banner",
                  [f"{len(data)} bytes, not starting with SSH-"])


async def tcp_and_banner(address: str, port: int, connect_timeout_s: float,
                         banner_timeout_s: float) -> tuple[DoctorStep, DoctorStep | None]:
    """Connect, then read the banner on the same connection (None when TCP failed)."""
    target = f"{address} port {port}"
    start = time.monotonic()
    try:
        sock = await _connect(address, port, connect_timeout_s)
    except (OSError, TimeoutError) as exc:
        return _connect_failure(exc, target, time.monotonic() - start, connect_timeout_s), None
    took = time.monotonic() - start
    tcp = passed("tcp", took, f"connected to {target}", ["tcp_connected: true", f"connect_ms: {took * 1000:.1f}"])
    start = time.monotonic()
    try:
        data = await _read_banner(sock, banner_timeout_s)
    except TimeoutError:
        return tcp, failed("banner", time.monotonic() - start, "banner_timeout",
                           f"TCP is up but no SSH banner arrived within {banner_timeout_s:g} s",
                           ["tcp_connected: true", "ssh_banner_received: false"])
    except OSError as exc:
        return tcp, failed("banner", time.monotonic() - start, "banner_timeout",
                           "TCP is up but the connection dropped before an SSH banner",
                           [errno.errorcode.get(exc.errno or 0, type(exc).__name__)])
    finally:
        sock.close()
    return tcp, _banner_step(data, time.monotonic() - start, banner_timeout_s)


async def connect_rtt_ms(address: str, port: int, timeout_s: float, samples: int = RTT_SAMPLES) -> float:
    """Median TCP connect time over `samples` fresh connections, in milliseconds."""
    times = []
    for _ in range(samples):
        start = time.monotonic()
        sock = await _connect(address, port, timeout_s)
        times.append((time.monotonic() - start) * 1000)
        with contextlib.suppress(OSError):
            sock.close()
    return statistics.median(times)


def _keepalive(settings: EffectiveSettings) -> tuple[list[str], bool]:
    if settings.source != "ssh -G":
        return ["keepalive: unknown (no OpenSSH client to compute it)"], True
    interval, count = settings.server_alive_interval, settings.server_alive_count_max
    return [f"ServerAliveInterval {interval}, ServerAliveCountMax {count}"], bool(interval)


async def rtt_step(address: str, settings: EffectiveSettings, timeout_s: float) -> DoctorStep:
    """Connect RTT (median of a few) and the keepalive the session would use."""
    start = time.monotonic()
    try:
        rtt = await connect_rtt_ms(address, settings.port, timeout_s / RTT_SAMPLES)
    except (OSError, TimeoutError):
        return failed("rtt", time.monotonic() - start, "timeout",
                      "the box stopped answering while the round trip was measured")
    keepalive, keepalive_on = _keepalive(settings)
    step = passed("rtt", time.monotonic() - start, f"TCP connect round trip {rtt:.1f} ms (median of "
                  f"{RTT_SAMPLES})", [f"rtt_ms: {rtt:.1f}", *keepalive])
    if not keepalive_on:
        step.status, step.route = "warn", KEEPALIVE_ROUTE
        step.verdict += "; keepalive is off"
    return step
