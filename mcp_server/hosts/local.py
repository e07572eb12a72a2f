"""LocalHost: the machine the server runs on, through asyncio subprocesses. POSIX only (bash, a
new session per command, its process group signalled to stop it): on Windows the host refuses to
exist with a coded error that names the ways that work there (portable.require_local_host)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat as stat_mod
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from mcp_server import portable
from mcp_server.errors import CommandTimeout, NotFoundError, TransportError
from mcp_server.hosts.base import DEFAULT_MAX_OUTPUT, CommandResult, FileStat
from mcp_server.hosts.commands import INLINE_SCRIPT_MAX, check_path, refuse_nul
from mcp_server.hosts.streams import read_capped
from mcp_server.settings import COMMAND_TIMEOUT_S

_KILL_GRACE_S = 2.0
# What a command on the local box (and so a job launched there) inherits from the server's
# environment: what a shell and a training job need, nothing else. The server's environment
# holds platform API keys and every secret an MCP client config passes; a job gets only the
# secrets its launch names (secret_env, on stdin).
_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONPATH", "SLURM_CONF", "KUBECONFIG", "RGT_MACHINE_ID",
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "HF_HOME", "HF_ENDPOINT", "HF_HUB_CACHE", "TORCH_HOME", "PIP_INDEX_URL",
})
_ENV_PREFIXES = ("LC_", "XDG_", "CUDA_", "NVIDIA_", "CONDA_")


def box_env(server_env: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of the server's environment that local commands see."""
    env = os.environ if server_env is None else server_env
    return {k: v for k, v in env.items() if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)}


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


class LocalHost:
    """Runs commands here. `~` means this user's home."""

    kind: Final = "local"

    def __init__(self, name: str = "local", command_timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        portable.require_local_host(name)
        self.name = name
        self.command_timeout_s = command_timeout_s
        self.round_trips = 0

    def local_path(self, path: str) -> Path:
        check_path(path)
        return Path(path).expanduser()

    async def run(
        self,
        script: str,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        slow: bool = False,  # no channel limit here: every command runs at once
    ) -> CommandResult:
        limit = self.command_timeout_s if timeout is None else timeout
        refuse_nul(script, "the command")
        self.round_trips += 1
        started = time.monotonic()
        # A long script goes to bash as a private temp file: one argument is capped at 128 KiB.
        held = _script_file(script) if len(script) > INLINE_SCRIPT_MAX else None
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash", "--noprofile", "--norc", *([held] if held else ["-c", script]),
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=box_env(),
            )
        except OSError as exc:
            raise TransportError("could not start a local shell", host=self.name, observed=str(exc)) from exc
        try:
            async with asyncio.timeout(limit):
                await _feed(proc, stdin)
                assert proc.stdout is not None and proc.stderr is not None
                (out, trunc), (err, _) = await asyncio.gather(
                    read_capped(proc.stdout, max_output), read_capped(proc.stderr, max_output)
                )
                status = await proc.wait()
        except TimeoutError:
            await self._reap(proc)
            raise CommandTimeout(
                f"command ran past {limit:g} s and was killed (process group)",
                host=self.name, command=script,
                next_step="raise the timeout or run the work detached (launch_detached)",
            ) from None
        except BaseException:
            await asyncio.shield(self._reap(proc))
            raise
        # A signal death shows as a negative return code; report it the shell's way.
        status = 128 - status if status < 0 else status
        return CommandResult(self.name, script, status, out, err, time.monotonic() - started, trunc)

    async def _reap(self, proc: asyncio.subprocess.Process) -> None:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
        except TimeoutError:
            _kill_group(proc.pid, signal.SIGKILL)
            await proc.wait()

    async def stat(self, path: str) -> FileStat | None:
        try:
            st = self.local_path(path).stat()
        except FileNotFoundError:
            return None
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        return FileStat(size=st.st_size, mtime=st.st_mtime)

    async def read_stream(
        self, path: str, offset: int = 0, chunk_size: int = 256 * 1024, length: int | None = None
    ) -> AsyncIterator[bytes]:
        p = self.local_path(path)
        try:
            f = await asyncio.to_thread(open, p, "rb")
        except FileNotFoundError:
            raise NotFoundError("file not found", host=self.name, path=path) from None
        try:
            end = os.fstat(f.fileno()).st_size
            f.seek(offset)
            left = max(0, end - offset) if length is None else max(0, min(length, end - offset))
            while left > 0:
                chunk = await asyncio.to_thread(f.read, min(chunk_size, left))
                if not chunk:
                    break
                left -= len(chunk)
                yield chunk
        finally:
            f.close()

    async def close(self) -> None:
        return None


def _script_file(script: str) -> str:
    """A private temp file holding the script, which removes it as its first line."""
    fd, path = tempfile.mkstemp(prefix="rgt-script-", suffix=".sh")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write('rm -f -- "$0"\n' + script)
    return path


async def _feed(proc: asyncio.subprocess.Process, stdin: bytes | None) -> None:
    """Write `stdin` and close it. A script may end without reading it (a start that refuses to
    begin): its exit status and output say what happened, not the broken pipe."""
    if stdin is None or proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(stdin)
        await proc.stdin.drain()
    proc.stdin.close()
