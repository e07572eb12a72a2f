"""Run inside the namespaces of tests/support/netns-fake-dns.sh: diagnose three names the system
resolver answers with Clash fake IPs, and print one report per line as JSON.
`silent`: a listener on the fake IP that never sends a banner; `closed`: the fake IP is on loopback
but nothing listens; `gone`: the fake IP is not on any interface (the route is missing)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from mcp_server.hosts.doctor import diagnose

SILENT_PORT = 40022
CLOSED_PORT = 40023


async def _never_greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()
    writer.close()


async def main(silent_ip: str) -> None:
    server = await asyncio.start_server(_never_greet, silent_ip, SILENT_PORT)
    known = Path(tempfile.mkdtemp()) / "known_hosts"
    for dest in (f"root@silent:{SILENT_PORT}", f"root@closed:{CLOSED_PORT}", f"root@gone:{CLOSED_PORT}"):
        report = await diagnose(dest, ssh_config=Path(os.devnull), known_hosts_path=known,
                                connect_timeout_s=2, banner_timeout_s=0.5)
        print(report.model_dump_json(), flush=True)
    server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
