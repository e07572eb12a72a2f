"""DNS-over-HTTPS for the Clash/Mihomo fallback ladder (knowledge run.md §7.6): ask a resolver's JSON
API for a name's IPv4 addresses when the system resolver answers with a fake IP. The answer is
recorded (addresses, the one chosen, a hash of it, when) so the transport that connects can say why.
Read-only: nothing here touches routes, DNS settings or proxies, and no proxy from the environment
is used (Clash sets HTTP(S)_PROXY; the query must not go through it)."""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import re
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

from mcp_server.errors import ConfigError, InputError, TransportError
from mcp_server.hosts.doctor_network import is_fake_ip
from mcp_server.hosts.fallback_options import DohAnswer, validate_resolver_url

DNS_JSON = "application/dns-json"
_TYPE_A = 1
_NOERROR = 0
_PHASES = 3  # connect (TCP and TLS), write, read: each gets a third of the bound
_BODY_MAX = 64 * 1024  # a JSON answer for one name is a few hundred bytes
_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?)+$")
_ROUTE = "references://run-remote/ssh-transfer#windows-clash"


def canonical_json(value: Any) -> str:
    """The form the ladder's hashes are taken over: sorted keys, compact separators."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def response_sha256(answers: list[str]) -> str:
    return hashlib.sha256(canonical_json({"answers": answers}).encode()).hexdigest()


def _check_name(name: str) -> None:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        if _HOSTNAME.match(name):
            return
        raise InputError("the name to resolve over DoH is not a DNS host name",
                         expected="letters, digits, hyphens and dots, at most 253 characters") from None
    raise InputError("the name to resolve over DoH is already an IP address: there is nothing to resolve",
                     next_step="connect to that address directly")


def ipv4_answers(document: Any) -> list[str]:
    """The unique IPv4 `data` of the type-A records of a DoH JSON answer, in the resolver's order.
    CNAME and other records are skipped; a type-A record whose data is not an IPv4 address is an error."""
    if not isinstance(document, dict):
        raise _bad_answer("the answer is not a JSON object")
    if document.get("Status") != _NOERROR:
        raise TransportError("the DoH resolver found no address for the name", observed=f"DNS status "
                             f"{document.get('Status')}", next_step="check the host name in the ssh config "
                             f"or inventory ({_ROUTE})")
    records = document.get("Answer", [])
    if not isinstance(records, list):
        raise _bad_answer("Answer is not a list")
    found: list[str] = []
    for record in records:
        if not isinstance(record, dict) or record.get("type") != _TYPE_A:
            continue
        try:
            found.append(str(ipaddress.IPv4Address(str(record.get("data")))))
        except ValueError:
            raise _bad_answer("a type-A record does not hold an IPv4 address") from None
    return list(dict.fromkeys(found))


def _bad_answer(what: str) -> TransportError:
    return TransportError(f"the DoH resolver's answer is malformed: {what}",
                          expected="a DNS JSON answer (application/dns-json, as Cloudflare and Google send)",
                          next_step="use another resolver (doh_resolver in the inventory)")


def _tls_context(ca_file: Path | None) -> ssl.SSLContext | bool:
    """The CA bundle given, else httpx2's default trust (the system store)."""
    if ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("the DoH resolver's CA file cannot be read as PEM certificates", path=str(ca_file),
                          observed=type(exc).__name__, next_step="point it at the resolver's CA bundle") from exc


def _client(ca_file: Path | None, timeout_s: float, local_address: str | None) -> httpx2.AsyncClient:
    # Only a local address steers this query: httpcore2 sets socket options after connecting, too
    # late for an interface binding (SO_BINDTODEVICE, IP_BOUND_IF, IP_UNICAST_IF) to choose the route.
    transport = httpx2.AsyncHTTPTransport(verify=_tls_context(ca_file), trust_env=False,
                                          local_address=local_address)
    # httpx2's own per-phase bound fires first and closes its socket cleanly; cancelling a TLS
    # handshake from outside can leave the socket open, so the outer bound is only the backstop.
    return httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(timeout_s / _PHASES), trust_env=False,
                              follow_redirects=False)


async def _fetch(client: httpx2.AsyncClient, name: str, resolver_url: str) -> bytes:
    async with client.stream("GET", resolver_url, params={"name": name, "type": "A"},
                             headers={"accept": DNS_JSON}) as response:
        if response.status_code != 200:
            raise TransportError("the DoH resolver refused the query", observed=f"HTTP {response.status_code}",
                                 expected="HTTP 200", next_step="check the resolver URL's path "
                                 "(/dns-query for Cloudflare, /resolve for Google)")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > _BODY_MAX:
                raise _bad_answer(f"longer than {_BODY_MAX} bytes")
        return body


async def _fetch_mapped(name: str, resolver_url: str, timeout_s: float, ca_file: Path | None,
                        local_address: str | None) -> bytes:
    """The answer's bytes; httpx2's exceptions become ours here (the one boundary for this client)."""
    not_run = "a DoH failure says nothing about the box or its jobs"
    try:
        async with asyncio.timeout(timeout_s), _client(ca_file, timeout_s, local_address) as client:
            return await _fetch(client, name, resolver_url)
    except (TimeoutError, httpx2.TimeoutException) as exc:
        raise TransportError(f"the DoH resolver gave no answer within {timeout_s:g} s; {not_run}",
                             next_step="check the resolver is reachable from this machine, or name another "
                             "(doh_resolver in the inventory)") from exc
    except httpx2.HTTPError as exc:
        raise TransportError(f"cannot query the DoH resolver; {not_run}", observed=type(exc).__name__,
                             next_step="check the resolver URL and, for a private resolver, its CA "
                             "certificate") from exc


async def doh_resolve(name: str, resolver_url: str, *, timeout_s: float, ca_file: Path | None = None,
                      local_address: str | None = None) -> DohAnswer:
    """Resolve `name` to IPv4 over DoH's JSON API (`GET resolver?name=..&type=A`, accept
    application/dns-json), within `timeout_s` in all. `local_address` (the physical interface's
    address) sends the query out of that interface, past a TUN device.
    The chosen address is the first answer outside the Clash fake-IP range; none is an error."""
    validate_resolver_url(resolver_url)
    _check_name(name)
    body = await _fetch_mapped(name, resolver_url, timeout_s, ca_file, local_address)
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _bad_answer("not JSON") from None
    answers = ipv4_answers(document)
    selected = next((a for a in answers if not is_fake_ip(a)), None)
    if selected is None:
        raise TransportError("the DoH resolver gave no usable IPv4 address for the name",
                             observed=f"{len(answers)} address(es), none outside the fake-IP range "
                             "198.18.0.0/15", next_step=f"check the host name; a rental's address changes on "
                             f"re-create → re-read it from the console/API ({_ROUTE})")
    return DohAnswer(name=name, resolver_url=resolver_url, answers=answers, selected_ip=selected,
                     response_sha256=response_sha256(answers),
                     observed_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
