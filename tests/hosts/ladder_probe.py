"""Run inside tests/support/netns-fake-dns.sh (with RGT_TEST_TUN_CAPTURE): the Clash fallback ladder end
to end, through SshHost and through audit_box over the real MCP client, against a real OpenSSH sshd
listening on the namespace's addresses and a local DoH endpoint over HTTPS (test CA). Prints one JSON
line per scenario: {"scenario", "ok", "text" | "error_class", "error", "transport", "doh_queries"}.
Usage: python -m tests.hosts.ladder_probe TLS_DIR WORK_DIR"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp_server.errors import RgtError
from mcp_server.hosts.destination import Destination
from mcp_server.hosts.fallback_options import FallbackOptions
from mcp_server.hosts.ssh import SshHost
from tests.support.doh_server import DohServer, TlsFiles
from tests.support.sshd import Sshd, keygen

PORT = 40022
BOX, SILENT, TUN, CLOSED = "10.77.0.2", "10.77.0.3", "10.77.0.4", "10.77.0.5"
ADDRESSES = (BOX, SILENT, TUN, CLOSED)
# name -> (what the namespace's /etc/hosts answers, what the DoH endpoint answers)
NAMES = {
    "fakebox": ("198.18.0.9", BOX),  # a Clash fake IP with no route: connect fails at once
    "silentbox": (SILENT, BOX),  # TCP connects, no banner ever comes
    "tunbox": (TUN, TUN),  # the right address, but the route goes into a TUN device
    "refusedbox": (CLOSED, BOX),  # nothing listens: never a fallback
    "keybox": (BOX, BOX),  # reachable, but the pinned key is another one: never a fallback
    "fakekey": ("198.18.0.10", BOX),  # fake IP; over the fallback the box presents a key not pinned
    "authbox": (BOX, BOX),  # reachable, the key offered is not authorized: never a fallback
}
WRONG_PIN = ("keybox", "fakekey")


def hosts_file() -> str:
    """The /etc/hosts the namespace gets (written by the test before the namespace starts)."""
    return "127.0.0.1 localhost\n" + "".join(f"{system} {name}.example\n" for name, (system, _) in NAMES.items())


def _box(work: Path) -> Sshd:
    box = Sshd(work / "sshd")
    box.port = PORT
    box._write_config()
    config = box.root / "sshd_config"
    config.write_text(config.read_text().replace(
        "ListenAddress 127.0.0.1\n", f"ListenAddress 127.0.0.1\nListenAddress {BOX}\nListenAddress {TUN}\n"))
    return box


def _client_files(work: Path, box: Sshd) -> Path:
    """The ssh config (one Host block per name) and its known_hosts: the box's key pinned for each
    logical name, another key for the names whose pin is wrong."""
    keygen(work / "other_hostkey")
    keygen(work / "stranger")
    real = (box.root / "hostkey.pub").read_text().split()
    other = (work / "other_hostkey.pub").read_text().split()
    known = work / "known_hosts"
    known.write_text("".join(f"[{n}.example]:{PORT} {' '.join((other if n in WRONG_PIN else real)[:2])}\n"
                             for n in NAMES))
    config = work / "ssh_config"
    config.write_text("".join(
        f"Host {n}\n  HostName {n}.example\n  Port {PORT}\n  User root\n"
        f"  IdentityFile {work / 'stranger' if n == 'authbox' else box.clientkey}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known}\n" for n in NAMES))
    return config


async def _attempt(name: str, work: Path, config: Path, options: FallbackOptions, doh: DohServer) -> dict[str, Any]:
    host = SshHost(name, Destination.parse(name), known_hosts_path=work / "rgt-home" / "known_hosts",
                   ssh_config=config, connect_timeout_s=3, command_channel=False, fallback=options)
    before, started = len(doh.requests), time.monotonic()
    out: dict[str, Any] = {"scenario": name}
    try:
        res = await host.run("echo reached")
        out |= {"ok": True, "text": res.text}
    except RgtError as exc:
        out |= {"ok": False, "error_class": type(exc).__name__, "error": str(exc)}
    finally:
        transport = host.transport
        await host.close()
    out["transport"] = transport.model_dump(mode="json") if transport else None
    out["doh_queries"] = len(doh.requests) - before
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


async def _through_mcp(work: Path, config: Path, options: FallbackOptions) -> dict[str, Any]:
    """audit_box on an inventory host that opted in, through the real MCP client."""
    from mcp import Client

    from mcp_server.server import build_server
    from mcp_server.settings import Settings

    inventory = work / "hosts.toml"
    inventory.write_text(f'[hosts.gpu1]\ndestination = "fakebox"\ndurable_root = "{work}"\n'
                         f'transport_fallback = "clash"\ndoh_resolver = "{options.resolver_url}"\n'
                         f'doh_ca_file = "{options.ca_file}"\nfallback_interface = "lo"\n')
    os.environ |= {"RGT_HOME": str(work / "rgt-home"), "RGT_CONFIG": str(inventory),
                   "RGT_SSH_CONFIG": str(config), "RGT_CONNECT_TIMEOUT": "3"}
    async with Client(build_server(Settings.from_env())) as client:
        result = await client.call_tool("audit_box", {"host": "gpu1"})
    (outcome,) = (result.structured_content or {})["outcomes"]
    audit = outcome.get("audit") or {}
    return {"scenario": "mcp_audit_box", "ok": outcome.get("error") is None, "verdict": audit.get("verdict"),
            "transport": audit.get("transport"), "error": outcome.get("error")}


async def main(tls_dir: Path, work: Path) -> None:
    tls = TlsFiles(ca=tls_dir / "ca.pem", cert=tls_dir / "server.pem", key=tls_dir / "server.key")
    records = {f"{n}.example": [{"name": f"{n}.example", "type": 1, "TTL": 60, "data": doh_ip}]
               for n, (_, doh_ip) in NAMES.items()}
    doh = await DohServer(tls, records=records).start()
    silent = await asyncio.start_server(lambda r, w: r.read(), SILENT, PORT)  # accepts, never greets
    box = _box(work)
    box.start()
    try:
        config = _client_files(work, box)
        options = FallbackOptions(resolver_url=doh.url(), interface="lo", ca_file=tls.ca)
        for name in NAMES:
            print(json.dumps(await _attempt(name, work, config, options, doh)), flush=True)
        print(json.dumps(await _through_mcp(work, config, options)), flush=True)
    finally:
        box.stop()
        silent.close()
        await doh.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
