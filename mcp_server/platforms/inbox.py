"""In-box power-off (AutoDL 关机): `shutdown` run inside the instance keeps its disks.
Confirmed when the box stops answering (the console then shows it powered off)."""

from __future__ import annotations

from mcp_server.errors import RgtError
from mcp_server.hosts.base import Host
from mcp_server.platforms.base import PlatformState


class InBox:
    name = "in-box"

    def __init__(self, host: Host) -> None:
        self.host = host

    async def status(self) -> PlatformState:
        try:
            res = await self.host.run("echo up", timeout=5)
        except RgtError:
            return PlatformState(state="not answering", gone=True)
        return PlatformState(state="running" if res.ok else "unknown")

    async def act(self, action: str) -> str:
        # Detached with a short delay so this call returns before the connection goes away.
        res = await self.host.run(
            "if command -v shutdown >/dev/null 2>&1; then setsid -f sh -c 'sleep 1; shutdown -h now' "
            ">/dev/null 2>&1 </dev/null; echo scheduled; else echo 'no shutdown command'; exit 3; fi", timeout=10)
        return f"in-box shutdown: {res.text.strip() or res.err_text.strip()}"

    def stopped(self, action: str, state: PlatformState) -> bool:
        return state.gone
