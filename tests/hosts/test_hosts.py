"""The host contract, run on LocalHost and on SshHost against a real sshd."""

from __future__ import annotations

import asyncio

import pytest

from mcp_server.errors import CommandTimeout, InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from tests.support.wait import until


async def gone(host: Host, pid: int) -> bool:
    """The process has exited (or is a zombie waiting to be reaped)."""
    state = (await host.run(f"ps -o stat= -p {pid} || true")).text.strip()
    return not state or state.startswith("Z")


async def test_run_returns_stdout_stderr_and_exit_status(any_host) -> None:
    res = await any_host.run("echo out; echo err >&2; exit 3")
    assert (res.text, res.err_text, res.exit_status) == ("out\n", "err\n", 3)
    assert not res.ok


async def test_stdin_reaches_the_command_byte_for_byte(any_host) -> None:
    data = bytes(range(256)) * 100
    res = await any_host.run("cat", stdin=data)
    assert res.stdout == data


async def test_commands_run_without_a_login_environment(any_host) -> None:
    res = await any_host.run("echo \"$0\"; shopt -q login_shell && echo login || echo nologin")
    assert res.text.split() == ["bash", "nologin"]


async def test_timeout_kills_the_whole_process_group(any_host, tmp_path) -> None:
    marker = tmp_path / "child-pid"
    with pytest.raises(CommandTimeout) as info:
        await any_host.run(f"sleep 300 & echo $! > {quote(str(marker))}; wait", timeout=1)
    assert "killed" in str(info.value)
    pid = int(marker.read_text())
    await until(lambda: gone(any_host, pid), timeout=5, interval=0.1, what=f"child {pid} to be killed")


async def test_cancelled_call_kills_what_it_started(any_host, tmp_path) -> None:
    marker = tmp_path / "cancel-pid"
    task = asyncio.create_task(any_host.run(f"sleep 300 & echo $! > {quote(str(marker))}; wait", timeout=60))
    pid = int(await until(lambda: marker.exists() and marker.read_text().strip(), timeout=5,
                          what="the remote command to start"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: gone(any_host, pid), timeout=5, interval=0.1, what=f"child {pid} to die with the call")


async def test_stat_and_read_stream_from_an_offset(any_host, tmp_path) -> None:
    f = tmp_path / "data.bin"
    f.write_bytes(b"0123456789" * 1000)
    st = await any_host.stat(str(f))
    assert st is not None and st.size == 10000
    got = b"".join([c async for c in any_host.read_stream(str(f), offset=9995, chunk_size=3)])
    assert got == b"56789"
    assert await any_host.stat(str(tmp_path / "missing")) is None


async def test_read_stream_reads_one_range_of_a_file(any_host, tmp_path) -> None:
    f = tmp_path / "data.bin"
    f.write_bytes(bytes(range(256)) * 4000)
    middle = b"".join([c async for c in any_host.read_stream(str(f), offset=1000, length=300_000)])
    assert middle == f.read_bytes()[1000:301_000]
    tail = b"".join([c async for c in any_host.read_stream(str(f), offset=1_000_000, length=50_000)])
    assert tail == f.read_bytes()[1_000_000:], "a range past the end stops at the end"


async def test_output_is_capped_and_flagged(any_host) -> None:
    res = await any_host.run("head -c 100000 /dev/zero", max_output=1000)
    assert len(res.stdout) == 1000 and res.stdout_truncated


async def test_ssh_reuses_one_pooled_connection(box, env) -> None:
    from tests.conftest import make_ssh_host

    host = make_ssh_host(env)
    try:
        results = await asyncio.gather(*(host.run(f"echo {i}") for i in range(20)))
        assert [r.text.strip() for r in results] == [str(i) for i in range(20)]
        assert host.connects == 1
    finally:
        await host.close()


async def test_ssh_reconnects_after_the_connection_drops(box, env) -> None:
    from tests.conftest import make_ssh_host

    host = make_ssh_host(env)
    try:
        assert (await host.run("echo one")).text == "one\n"
        box.drop_sessions()
        await until(lambda: host._conn is None or host._conn.is_closed(), timeout=5,
                    what="the client to see the dropped connection")
        assert (await host.run("echo two")).text == "two\n"
        assert host.connects == 2
    finally:
        await host.close()


@pytest.mark.parametrize("bad", ["-rf", "--help", "relative/path", "", "a\nb"])
def test_box_paths_that_could_be_options_or_ambiguous_are_refused(bad) -> None:
    with pytest.raises(InputError):
        path_word(bad)


async def test_shell_metacharacters_in_paths_are_literal_never_executed(any_host, tmp_path) -> None:
    weird = tmp_path / "a b;echo INJECTED;$(echo SUBST)`echo BACKTICK`'\"|&>x"
    weird.mkdir()
    res = await any_host.run(f"ls -d -- {path_word(str(weird))}")
    assert res.ok and res.text.splitlines() == [str(weird)]
    assert not (tmp_path / "x").exists()


async def test_tilde_paths_expand_to_the_box_home(any_host) -> None:
    res = await any_host.run(f"echo {path_word('~/x y')}")
    home = (await any_host.run('echo "$HOME"')).text.strip()
    assert res.text.strip() == f"{home}/x y"
