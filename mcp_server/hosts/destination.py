"""Destination: an ssh destination as the user wrote it, validated before anything connects."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.errors import InputError

_DEST_RE = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]{0,63})@)?"
    r"(?P<host>[A-Za-z0-9_][A-Za-z0-9._-]{0,252}|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?$"
)


@dataclass(frozen=True)
class Destination:
    """An ssh destination as the user wrote it: an alias or [user@]host[:port]."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Destination:
        m = _DEST_RE.match(text or "")
        if not m or text.startswith("-"):
            raise InputError(
                "not an ssh destination",
                observed=text,
                expected="an inventory name, an ~/.ssh/config alias or user@host[:port]",
            )
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 1 <= port <= 65535:
            raise InputError("ssh port out of range", observed=port, expected="1..65535")
        return cls(host=m["host"].strip("[]"), user=m["user"], port=port)

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"
