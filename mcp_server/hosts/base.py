"""The Host protocol: where a command runs. Knows nothing of runs, manifests or tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from mcp_server.errors import CommandFailed

HostKind = Literal["local", "ssh", "kubernetes"]

# Per-call output kept in memory; callers that may produce more bound their own commands.
DEFAULT_MAX_OUTPUT = 32 * 1024 * 1024


@dataclass(frozen=True)
class CommandResult:
    """What one command did, the same for every kind of host."""

    host: str
    command: str
    exit_status: int
    stdout: bytes
    stderr: bytes
    duration_s: float
    stdout_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def err_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    def check(self, what: str, next_step: str | None = None) -> CommandResult:
        """Raise CommandFailed unless the command exited 0."""
        if not self.ok:
            raise CommandFailed(
                f"{what} failed",
                host=self.host,
                command=self.command,
                exit_status=self.exit_status,
                stderr=self.err_text or self.text,
                next_step=next_step,
            )
        return self


def parse_kv(text: str) -> dict[str, str]:
    """`key=value` lines a remote script printed (other lines ignored; the last one wins)."""
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        k = k.strip()
        if sep and k and " " not in k:
            out[k] = v.strip()
    return out


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float


@runtime_checkable
class Host(Protocol):
    """A box commands run on. What runs there is shell: on-box scripts live in
    `mcp_server/scripts/*.sh` (loaded by `mcp_server.scripts`, user values passed as quoted
    arguments); `hosts/commands.py` holds the quoting helpers and the one-line wrapper."""

    name: str
    round_trips: int  # commands run so far: what "one round trip per poll" is measured by

    @property
    def kind(self) -> HostKind:
        """Where the box is: this machine or over SSH."""
        ...

    async def run(
        self,
        script: str,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        slow: bool = False,
    ) -> CommandResult:
        """Run `script` with a clean non-login shell; kill its process group on timeout
        or cancellation. Never raises on a non-zero exit: see CommandResult.check. `slow`: the
        command holds its channel on purpose (a probe, a sampling window, a grace period): a
        host with a channel limit keeps some channels free of such commands for quick ones."""
        ...

    async def stat(self, path: str) -> FileStat | None:
        """Size and mtime of a regular file, None when it does not exist."""
        ...

    def read_stream(
        self, path: str, offset: int = 0, chunk_size: int = 256 * 1024, length: int | None = None
    ) -> AsyncIterator[bytes]:
        """Stream a file's bytes from `offset` to its end at the time of the call (at most
        `length` bytes when given: one range of a file pulled over several streams)."""
        ...

    async def close(self) -> None: ...
