"""Run inside the namespaces of tests/support/netns-fake-dns.sh, whose /etc/hosts answers the box's
name with a Clash fake IP: a DoH endpoint on loopback (test CA) answers the real address, where a
listener sends an SSH banner. Prints one JSON line: the system answer, the DoH answer, and the banner
read over a socket bound to `lo` (SO_BINDTODEVICE) to the DoH-chosen address.
Usage: python -m tests.hosts.doh_probe TLS_DIR NAME REAL_IP"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

from mcp_server.hosts.doctor_network import resolve
from mcp_server.hosts.doh import doh_resolve
from mcp_server.hosts.fallback import open_bound_socket
from tests.support.doh_server import DohServer, TlsFiles

SSH_PORT = 40022
BANNER = b"SSH-2.0-OpenSSH_netns_box\r\n"


async def _greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(BANNER)
    await writer.drain()
    await reader.read()
    writer.close()


async def _banner(sock: socket.socket) -> str:
    try:
        data = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 255), 5)
    finally:
        sock.close()
    return data.decode("ascii", errors="replace").strip()


async def main(tls_dir: Path, name: str, real_ip: str) -> None:
    tls = TlsFiles(ca=tls_dir / "ca.pem", cert=tls_dir / "server.pem", key=tls_dir / "server.key")
    record = {"name": name, "type": 1, "TTL": 300, "data": real_ip}
    doh = await DohServer(tls, records={name: [record]}).start()
    box = await asyncio.start_server(_greet, real_ip, SSH_PORT)
    try:
        system = await resolve(name, SSH_PORT, 5)
        answer = await doh_resolve(name, doh.url(), timeout_s=5, ca_file=tls.ca)
        sock = await open_bound_socket(answer.selected_ip, SSH_PORT, interface="lo", local_address=None,
                                       timeout_s=5)
        bound_to = sock.getsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, 16).rstrip(b"\0").decode()
        banner = await _banner(sock)
    finally:
        box.close()
        await doh.close()
    print(json.dumps({"system": system, "doh": answer.model_dump(), "bound_to": bound_to, "banner": banner}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
