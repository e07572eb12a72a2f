"""A DNS-over-HTTPS endpoint for the fallback ladder's tests: a test CA and a server certificate made
with `cryptography`, and an asyncio HTTPS server that answers the DoH JSON API
(`GET /dns-query?name=..&type=A`, `application/dns-json`) from a table, the way Cloudflare does."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def make_tls(folder: Path, ip: str = "127.0.0.1") -> TlsFiles:
    """A fresh CA and a server certificate for `ip` (and localhost) signed by it, as PEM files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("rgt test CA")).issuer_name(_name("rgt test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip)), x509.DNSName("localhost")])
    cert = (x509.CertificateBuilder().subject_name(_name("doh test")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(san, critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    return TlsFiles(
        ca=_pem(folder / "ca.pem", ca.public_bytes(serialization.Encoding.PEM)),
        cert=_pem(folder / "server.pem", cert.public_bytes(serialization.Encoding.PEM)),
        key=_pem(folder / "server.key", key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption())))


@dataclass
class DohServer:
    """Answers `records[name]` (a list of DNS JSON Answer entries) with Status 0, NXDOMAIN (3) for
    other names; `documents` may set a name's whole JSON document instead. Records each request."""

    tls: TlsFiles
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (target, accept header)
    port: int = 0
    _server: asyncio.Server | None = None

    async def start(self, host: str = "127.0.0.1") -> DohServer:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.tls.cert, self.tls.key)
        self._server = await asyncio.start_server(self._serve, host, 0, ssl=ctx)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url(self, path: str = "/dns-query", host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _document(self, target: str) -> Any:
        query = parse_qs(urlsplit(target).query)
        name = query.get("name", [""])[0]
        if name in self.documents:
            return self.documents[name]
        if name not in self.records or query.get("type") != ["A"]:
            return {"Status": 3, "Question": [{"name": name, "type": 1}]}
        return {"Status": 0, "TC": False, "RD": True, "RA": True, "AD": False, "CD": False,
                "Question": [{"name": name, "type": 1}], "Answer": self.records[name]}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            target = head[0].split(" ")[1]
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:] if h)}
            self.requests.append((target, headers.get("accept", "")))
            body = json.dumps(self._document(target)).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
