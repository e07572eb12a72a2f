"""The persistent command channel over the real sshd: warm commands take no new SSH channel, many
at once stay correct, a channel that hangs or dies is replaced and its caller gets a clear error
within its bound, and a box that cannot start it (no python3) keeps working over exec channels."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_server.errors import CommandTimeout, TransportError
from mcp_server.hosts import session as session_module
from mcp_server.hosts import ssh as ssh_module
from mcp_server.hosts.session import Session, grace_s
from mcp_server.hosts.ssh import SshHost
from tests.conftest import make_ssh_host, warm_command_channel
from tests.support.wait import until


def box_loop(host: SshHost) -> Session:
    assert host.command_channel is not None and host.command_channel.session is not None
    return host.command_channel.session


def dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_warm_commands_share_one_channel_and_open_no_other(box: Any, env: Any) -> None:
    host = make_ssh_host(env)
    try:
        await warm_command_channel(host)
        loop = box_loop(host)
        before = loop.calls
        results = [await host.run(f"echo {i}") for i in range(30)]
        assert [r.text for r in results] == [f"{i}\n" for i in range(30)]
        assert loop.calls - before == 30, "every warm command went over the command channel"
        assert host.connects == 1
    finally:
        await host.close()


async def test_concurrent_commands_on_one_channel_each_get_their_own_output(box: Any, env: Any) -> None:
    host = make_ssh_host(env)
    try:
        await warm_command_channel(host)

        async def one(i: int) -> None:
            size = 700_000 if i % 5 == 0 else i * 10
            payload = os.urandom(i * 100)
            res = await host.run(f"head -c {size} /dev/zero | tr '\\0' {chr(97 + i % 26)}; "
                                 f"echo err{i} >&2; cat | sha256sum | cut -c1-12; exit {i % 7}",
                                 stdin=payload, timeout=30)
            assert res.exit_status == i % 7
            assert res.stdout[:size] == chr(97 + i % 26).encode() * size
            assert res.stdout[size:].decode().strip() == hashlib.sha256(payload).hexdigest()[:12]
            assert res.stderr == f"err{i}\n".encode()

        await asyncio.gather(*(one(i) for i in range(40)))
        assert box_loop(host).calls >= 16, "the burst went over the command channel"
    finally:
        await host.close()


async def test_a_hung_channel_errors_within_its_bound_and_is_replaced(box: Any, env: Any) -> None:
    host = make_ssh_host(env)
    try:
        await warm_command_channel(host)
        hung = box_loop(host)
        os.kill(hung.box_pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(CommandTimeout, match="ran past 1 s"):
            await host.run("echo never", timeout=1)
        assert time.monotonic() - started <= 1 + grace_s(1) + 2
        assert (await host.run("echo after")).text == "after\n", "the next call works at once (exec)"
        await warm_command_channel(host)
        assert box_loop(host) is not hung and box_loop(host).box_pid != hung.box_pid
        assert (await host.run("echo fresh")).text == "fresh\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung.box_pid, signal.SIGKILL)
            os.kill(hung.box_pid, signal.SIGCONT)
        await host.close()


async def test_a_channel_that_dies_mid_command_reports_an_unknown_outcome(box: Any, env: Any) -> None:
    host = make_ssh_host(env)
    try:
        await warm_command_channel(host)
        dying = box_loop(host)
        call = asyncio.create_task(host.run("sleep 20", timeout=30))
        await asyncio.sleep(0.5)
        os.kill(dying.box_pid, signal.SIGKILL)
        with pytest.raises(TransportError, match="outcome on the box is unknown"):
            await asyncio.wait_for(call, 10)
        assert (await host.run("echo again")).text == "again\n"
    finally:
        await host.close()


async def test_closing_the_host_kills_commands_still_running_on_the_channel(box: Any, env: Any, tmp_path: Any) -> None:
    host = make_ssh_host(env)
    marker = tmp_path / "pid"
    await warm_command_channel(host)
    call = asyncio.create_task(host.run(f"sleep 300 & echo $! > {marker}; wait", timeout=60))
    pid = int(await until(lambda: marker.exists() and marker.read_text().strip(), what="the command to start"))
    await host.close()
    with contextlib.suppress(BaseException):
        await call
    await until(lambda: dead(pid), timeout=10, what="the command's child to die with the channel")


async def test_a_box_that_cannot_start_the_channel_keeps_working_over_exec(
        box: Any, env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A box with no python3: the loop's start command exits 127 there."""
    monkeypatch.setattr(ssh_module, "start_command", lambda: "exit 127")
    host = make_ssh_host(env)
    try:
        results = [await host.run(f"echo {i}") for i in range(5)]
        assert [r.text for r in results] == [f"{i}\n" for i in range(5)]
        await asyncio.sleep(0.5)
        assert host.command_channel is not None and not host.command_channel.up
        assert (await host.run("echo still")).text == "still\n"
    finally:
        await host.close()


class _Bytes:
    """A channel's reading side fed with fixed bytes (what a broken box could send)."""

    def __init__(self, data: bytes) -> None:
        self._stream = asyncio.StreamReader()
        self._stream.feed_data(data)

    async def readline(self) -> bytes:
        return await self._stream.readline()

    async def readexactly(self, n: int) -> bytes:
        return await self._stream.readexactly(n)


class _Sink:
    def write(self, data: bytes) -> None:
        pass


@pytest.mark.parametrize("frames", [
    b'{"id": 1, "o": 5}\nabc',                  # a frame shorter than it announced, then silence
    b"not json\n",                              # garbage where a frame belongs
    b'{"id": 1, "o": 99999999}\n',              # an output frame beyond the bound
    b'{"id": 1, "what": 1}\n',                  # a frame of no known kind
])
async def test_security_a_malformed_frame_breaks_the_channel_never_a_result(frames: bytes) -> None:
    reader = _Bytes(b'{"ready": 1, "pid": 1}\n' + frames)
    s = Session("box", reader, _Sink())
    await s.ready()
    reader._stream.feed_eof()
    with pytest.raises(TransportError, match="command channel"):
        await s.call("true", None, 5, 1000)
    assert not s.usable
    assert session_module.MAX_FRAME < 99999999


async def test_a_channel_closed_before_a_command_is_written_runs_it_over_exec(box: Any, env: Any) -> None:
    """A command that never reached the box (its channel was already closing) is not lost: it runs
    over an exec channel, once."""
    host = make_ssh_host(env)
    try:
        await warm_command_channel(host)
        assert host.command_channel is not None
        host.command_channel._close()  # type: ignore[misc]  # the channel closes under the session
        assert (await host.run("echo still here")).text == "still here\n"
    finally:
        await host.close()
