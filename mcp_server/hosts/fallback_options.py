"""The Clash/Mihomo fallback's settings (an inventory entry's `transport_fallback = "clash"`, knowledge
run.md §7.6), the rules a DoH resolver URL must meet, and what a connection records about the path it
took. Light on purpose: the inventory, the host pool and result models read it at start; the ladder
itself (DoH over HTTPS, sockets, the doctor) loads on a failed connect."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import ConfigError

DEFAULT_DOH_RESOLVER = "https://1.1.1.1/dns-query"
RESOLVER_PATHS = frozenset({"", "/", "/dns-query", "/resolve"})


@dataclass(frozen=True)
class FallbackOptions:
    """Where the fallback asks for the box's address and which way its socket leaves this machine."""

    resolver_url: str = DEFAULT_DOH_RESOLVER
    interface: str | None = None  # the physical interface (eth0, en0, an index on Windows), not the TUN device
    local_address: str | None = None  # or the physical interface's IPv4 address
    ca_file: Path | None = None  # a CA bundle the resolver's certificate chains to (a corporate CA)


def resolver_url_problem(url: str) -> str | None:
    """Why `url` is not an acceptable DoH resolver (a named reason), or None when it is."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "unparsable"
    checks = (
        (parts.scheme != "https", "not_https"),
        (not parts.hostname, "no_host"),
        (parts.username is not None or parts.password is not None or "@" in parts.netloc, "userinfo"),
        (bool(parts.query) or "?" in url, "query"),
        (bool(parts.fragment) or "#" in url, "fragment"),
        (parts.path not in RESOLVER_PATHS, "path"),
        (port == 0, "port"),
        (any(c.isspace() for c in url), "whitespace"),
    )
    return next((reason for bad, reason in checks if bad), None)


def validate_resolver_url(url: str) -> str:
    """`url` when it is https with no userinfo, query or fragment and a DoH path; else a ConfigError
    whose `observed` is the named reason (the URL itself is not quoted back)."""
    reason = resolver_url_problem(url)
    if reason is not None:
        raise ConfigError(
            "the DoH resolver URL is not accepted", observed=reason,
            expected='https://<host>[:port] with path "", "/", "/dns-query" or "/resolve", '
            "no user, query or fragment",
            next_step=f'fix doh_resolver in the inventory, or leave it out for {DEFAULT_DOH_RESOLVER}')
    return url


class DohAnswer(BaseModel):
    """One DoH lookup as evidence: the unique IPv4 answers in the resolver's order, the first that is
    not a Clash fake IP, and the sha256 of the canonical JSON of `{"answers": [...]}` (sorted keys,
    compact separators), which anyone holding the record can recompute."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    resolver_url: str
    answers: list[str] = Field(min_length=1)
    selected_ip: str
    response_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    observed_at: str


class TransportRecord(BaseModel):
    """Which transport connected, and why: what a result reports about the path it took."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["direct", "clash_fallback"]
    why: str | None = None  # the evidence class that allowed the fallback
    evidence: list[str] = []
    address: str | None = None  # the address connected to (the DoH answer, or the written IPv4)
    bound_to: str | None = None  # the interface or local address the socket left from
    doh: DohAnswer | None = None
