"""Security (no denial of service): a burst of commands that hold their channel on purpose (a
launch probe, an inspect window, a cancel's grace, a file stream) never makes a quick call wait:
they get all but QUICK_RESERVE of a host's channels, over the real sshd."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_server.hosts.ssh import QUICK_RESERVE
from mcp_server.settings import MAX_CHANNELS
from tests.conftest import make_ssh_host, warm_command_channel

HOLD_S = 4.0


async def test_security_a_burst_of_slow_commands_leaves_channels_for_a_quick_call(box: Any, env: Any) -> None:
    host = make_ssh_host(env, command_channel=False)
    try:
        await host.run("true")
        slow = [asyncio.create_task(host.run(f"sleep {HOLD_S}", timeout=30, slow=True)) for _ in range(MAX_CHANNELS)]
        await asyncio.sleep(0.8)  # the slow ones hold every channel they may take
        started = time.monotonic()
        quick = await host.run("echo quick", timeout=30)
        waited = time.monotonic() - started
        assert quick.text == "quick\n"
        assert waited < HOLD_S / 2, f"the quick call waited {waited:.1f} s behind slow ones"
        assert not all(t.done() for t in slow)
        results = await asyncio.gather(*slow)
        assert all(r.ok for r in results), "the slow ones all ran, in turn"
        assert QUICK_RESERVE >= 1
    finally:
        await host.close()


async def test_without_the_slow_mark_a_burst_fills_every_channel(box: Any, env: Any) -> None:
    """The control: the same burst unmarked makes the quick call wait (what the mark prevents)."""
    host = make_ssh_host(env, command_channel=False)
    try:
        await host.run("true")
        burst = [asyncio.create_task(host.run(f"sleep {HOLD_S}", timeout=30)) for _ in range(MAX_CHANNELS)]
        await asyncio.sleep(0.8)
        started = time.monotonic()
        await host.run("true", timeout=30)
        assert time.monotonic() - started > HOLD_S / 2
        await asyncio.gather(*burst)
    finally:
        await host.close()


async def test_security_a_burst_on_the_command_channel_never_makes_a_quick_call_wait(box: Any, env: Any) -> None:
    """With the persistent command channel, long commands (more than it runs at once, plus every
    exec channel) are queued nowhere: a quick call still answers at once."""
    host = make_ssh_host(env)
    try:
        await warm_command_channel(host)
        burst = [asyncio.create_task(host.run(f"sleep {HOLD_S}", timeout=30)) for _ in range(20)]
        await asyncio.sleep(0.8)
        started = time.monotonic()
        quick = await host.run("echo quick", timeout=30)
        waited = time.monotonic() - started
        assert quick.text == "quick\n"
        assert waited < HOLD_S / 2, f"the quick call waited {waited:.1f} s behind the burst"
        assert all(r.ok for r in await asyncio.gather(*burst)), "the burst all ran"
    finally:
        await host.close()
