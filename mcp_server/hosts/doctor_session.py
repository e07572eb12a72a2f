"""The doctor's session step through the real OpenSSH client: the round trip over an open session
(a line echoed by `cat` on the box, after the handshake) and a bounded throughput sample each way
(`head -c` from the box's /dev/zero; `wc -c` counting what is sent). Each sample is its own batch-mode
ssh with the doctor's probe options (strict keys, nothing written, no forwards)."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from pathlib import Path

from mcp_server.hosts.destination import Destination
from mcp_server.hosts.doctor_models import DoctorStep, failed, passed
from mcp_server.hosts.doctor_openssh import probe_args, tool_env

SAMPLE_BYTES = 4 * 1024 * 1024
ECHOES = 5
_CHUNK = 64 * 1024
_PRIMED = 4 * _CHUNK  # written before the upload clock starts: the pipe and ssh's buffers hold that much


class _Ssh:
    """One ssh process running `command` on the box, stdin and stdout piped."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> asyncio.subprocess.Process:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=tool_env())
        return self.proc

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()


async def _echo_rtt_ms(argv: list[str]) -> float:
    async with _Ssh([*argv, "cat"]) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        samples = []
        for i in range(ECHOES + 1):  # the first echo waits for the handshake: not a sample
            start = time.monotonic()
            proc.stdin.write(b"rgt-doctor-echo\n")
            await proc.stdin.drain()
            if await proc.stdout.readline() != b"rgt-doctor-echo\n":
                raise OSError("the box did not echo the line back")
            if i:
                samples.append((time.monotonic() - start) * 1e3)
        return statistics.median(samples)


async def _download_mb_s(argv: list[str]) -> float:
    async with _Ssh([*argv, "head", "-c", str(SAMPLE_BYTES), "/dev/zero"]) as proc:
        assert proc.stdout is not None
        first = await proc.stdout.read(_CHUNK)
        start, got = time.monotonic(), len(first)
        while chunk := await proc.stdout.read(_CHUNK):
            got += len(chunk)
        if got != SAMPLE_BYTES:
            raise OSError("the download sample ended early")
        return (got - len(first)) / max(time.monotonic() - start, 1e-6) / 1e6


async def _upload_mb_s(argv: list[str]) -> float:
    async with _Ssh([*argv, "wc", "-c"]) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        block, sent, start = bytes(_CHUNK), 0, 0.0
        while sent < SAMPLE_BYTES:
            proc.stdin.write(block)
            await proc.stdin.drain()
            sent += _CHUNK
            if sent == _PRIMED:
                start = time.monotonic()
        proc.stdin.close()
        counted = (await proc.stdout.read()).strip()
        if counted != str(SAMPLE_BYTES).encode():
            raise OSError("the box did not count the upload sample")
        return (SAMPLE_BYTES - _PRIMED) / max(time.monotonic() - start, 1e-6) / 1e6


async def session_step(dest: Destination, ssh_config: Path | None, known_hosts: list[str],
                       connect_timeout_s: float, timeout_s: float) -> DoctorStep:
    """Round trip over the session and a throughput sample each way, within `timeout_s` in all."""
    argv = ["ssh", "-T", *probe_args(dest, ssh_config, connect_timeout_s, known_hosts), "--", dest.host]
    start = time.monotonic()
    try:
        async with asyncio.timeout(timeout_s):
            rtt = await _echo_rtt_ms(argv)
            down = await _download_mb_s(argv)
            up = await _upload_mb_s(argv)
    except TimeoutError:
        return failed("session", time.monotonic() - start, "timeout",
                      f"the session samples did not finish within {timeout_s:g} s (a slow or lossy link)")
    except OSError as exc:
        return failed("session", time.monotonic() - start, "other_error", f"a session sample failed: {exc}")
    mib = SAMPLE_BYTES // (1024 * 1024)
    evidence = [f"round trip over the session: {rtt:.1f} ms (median of {ECHOES})",
                f"download: {down:.1f} MB/s ({mib} MiB sample)", f"upload: {up:.1f} MB/s ({mib} MiB sample)"]
    return passed("session", time.monotonic() - start,
                  f"round trip {rtt:.1f} ms; {down:.1f} MB/s down, {up:.1f} MB/s up", evidence)
