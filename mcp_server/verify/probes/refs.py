"""File inputs: where a probe's data lives on a box, and the bounded reader that fetches it.

Every file goes through the host layer (hosts/files.py); nothing here forms a shell string.
The reader keeps the provenance (host, path, size, sha256) of each file it used, which the
result carries and the input digest covers."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import check_path
from mcp_server.hosts.files import read_bytes
from mcp_server.limits import HostStr, PathStr
from mcp_server.paths import policy
from mcp_server.verify.probes.result import FileRead

FileFormat = Literal["auto", "yaml", "json", "toml", "csv", "tsv", "jsonl", "npy", "lines"]

DEFAULT_FILE_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 256 * 1024 * 1024
# All files of one probe call together; keeps a call inside the tool's time budget.
CALL_BUDGET_BYTES = 512 * 1024 * 1024
DEFAULT_HASH_BYTES = 1024 * 1024 * 1024
MAX_HASH_BYTES = 8 * 1024 * 1024 * 1024

HostOpener = Callable[[str], Awaitable[Host]]


class FileRef(BaseModel):
    """A file on a box, read through the host layer and bounded in size."""

    model_config = ConfigDict(extra="forbid")
    path: PathStr = Field(description="path on the box, absolute or ~/...", json_schema_extra={"x-rgt-path": "box"})
    host: HostStr | None = Field(default=None, description="box holding the file (default: the call's `host`)")
    format: FileFormat = Field(default="auto", description="how to parse it; auto = from the extension")
    max_bytes: int = Field(default=DEFAULT_FILE_BYTES, ge=1, le=MAX_FILE_BYTES,
                           description="refuse the file (before transferring it) when larger")


class InputReader:
    """Reads FileRefs for one probe call; remembers what it read."""

    def __init__(self, open_host: HostOpener | None, default_host: str = "local",
                 budget_bytes: int = CALL_BUDGET_BYTES) -> None:
        self._open_host = open_host
        self.default_host = default_host
        self._budget = budget_bytes
        self._cache: dict[tuple[str, str], bytes] = {}
        self.reads: list[FileRead] = []

    async def _host(self, ref: FileRef) -> tuple[str, Host, str]:
        """The file's host, and its path as the box resolves it once the path policy allows it."""
        name = ref.host or self.default_host
        if self._open_host is None:
            raise InputError("this probe was given a file but no host to read it from",
                             path=ref.path, next_step="pass the numbers inline, or call through run_probe")
        check_path(ref.path, "file path")
        host = await self._open_host(name)
        real = await policy.confine(host, "read", ref.path, policy.anywhere(host), what="file.path",
                                    done="nothing was read")
        return name, host, real

    async def read(self, ref: FileRef) -> bytes:
        """The whole file (bounded by its max_bytes and by what is left of the call's budget)."""
        key = (ref.host or self.default_host, ref.path)
        if key in self._cache:
            return self._cache[key]
        name, host, real = await self._host(ref)
        limit = min(ref.max_bytes, self._budget)
        data = await read_bytes(host, real, limit)
        self._budget -= len(data)
        self._cache[key] = data
        self.reads.append(FileRead(host=name, path=ref.path, bytes=len(data),
                                   sha256=hashlib.sha256(data).hexdigest()))
        return data

    async def sha256(self, ref: FileRef, max_bytes: int = DEFAULT_HASH_BYTES) -> FileRead:
        """Stream a file through sha256 without keeping it; refuse files over `max_bytes`."""
        name, host, real = await self._host(ref)
        st = await host.stat(real)
        if st is None:
            raise NotFoundError("file not found (or not a regular file)", host=name, path=ref.path)
        if st.size > max_bytes:
            raise InputError(
                f"file is {st.size} bytes, over the {max_bytes}-byte limit for hashing through "
                "this call", host=name, path=ref.path,
                next_step="pass its sha256 instead (from verify_artifacts' manifest or "
                "`sha256sum` on the box), or raise max_hash_bytes",
            )
        h, size = hashlib.sha256(), 0
        async for chunk in host.read_stream(real):
            h.update(chunk)
            size += len(chunk)
        found = FileRead(host=name, path=ref.path, bytes=size, sha256=h.hexdigest())
        self.reads.append(found)
        return found
