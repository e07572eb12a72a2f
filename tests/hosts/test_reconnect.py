"""A pooled SSH connection that the box dropped (sshd restarted, a network blip) is replaced on
the next call: that call succeeds instead of failing once with a misleading error."""

from __future__ import annotations

from typing import Any

from tests.conftest import make_ssh_host


async def test_the_first_call_after_an_sshd_restart_reconnects_and_succeeds(box: Any, env: Any) -> None:
    host = make_ssh_host(env)
    try:
        assert (await host.run("echo one")).text == "one\n"
        box.restart()
        res = await host.run("echo two", timeout=20)
        assert res.ok and res.text == "two\n"
        assert host.connects == 2, "one new connection, no failed call"
    finally:
        await host.close()
