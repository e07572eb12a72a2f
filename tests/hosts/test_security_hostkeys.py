"""Host keys are never waved through: unknown refused, changed refused with both
fingerprints, accept-new pins in the server's own file and then refuses a change."""

from __future__ import annotations

import subprocess

import pytest

from mcp_server.errors import HostKeyError
from tests.conftest import make_ssh_host
from tests.support.sshd import Sshd, keygen


def fingerprint(pub_path) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", str(pub_path)], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


@pytest.fixture
def own_sshd(tmp_path):
    s = Sshd(tmp_path / "own")
    s.start()
    yield s
    s.stop()


async def test_unknown_host_key_is_refused_by_default(env, own_sshd) -> None:
    empty = env.root / "empty_known_hosts"
    empty.write_text("")
    env.ssh_config.write_text(own_sshd.client_config("testbox", known_hosts=empty))
    host = make_ssh_host(env)
    with pytest.raises(HostKeyError) as info:
        await host.run("true")
    msg = str(info.value)
    assert "unknown host key" in msg and fingerprint(own_sshd.root / "hostkey.pub") in msg
    assert not env.home.joinpath("known_hosts").exists(), "strict mode must not pin anything"


async def test_changed_host_key_is_refused_with_both_fingerprints(env, own_sshd, tmp_path) -> None:
    old = tmp_path / "oldkey"
    keygen(old)
    stale = env.root / "stale_known_hosts"
    stale.write_text(own_sshd.known_hosts_line(key=tmp_path / "oldkey.pub") + "\n")
    env.ssh_config.write_text(own_sshd.client_config("testbox", known_hosts=stale))
    for policy in ("strict", "accept-new"):
        host = make_ssh_host(env, policy=policy)
        with pytest.raises(HostKeyError) as info:
            await host.run("true")
        msg = str(info.value)
        assert "CHANGED" in msg, policy
        assert fingerprint(own_sshd.root / "hostkey.pub") in msg  # what the box presents
        assert fingerprint(tmp_path / "oldkey.pub") in msg  # what we trusted


async def test_accept_new_pins_the_key_then_refuses_a_change(env, own_sshd) -> None:
    empty = env.root / "empty_known_hosts"
    empty.write_text("")
    env.ssh_config.write_text(own_sshd.client_config("testbox", known_hosts=empty))
    host = make_ssh_host(env, policy="accept-new")
    assert (await host.run("echo hi")).text == "hi\n"
    await host.close()
    pinned = env.home / "known_hosts"
    assert f"[127.0.0.1]:{own_sshd.port}" in pinned.read_text()
    assert empty.read_text() == "", "the user's own known_hosts is never written"

    again = make_ssh_host(env, policy="accept-new")
    assert (await again.run("echo again")).text == "again\n"
    await again.close()

    own_sshd.replace_host_key()
    changed = make_ssh_host(env, policy="accept-new")
    with pytest.raises(HostKeyError) as info:
        await changed.run("true")
    assert "CHANGED" in str(info.value)
    assert fingerprint(own_sshd.root / "hostkey.pub") in str(info.value)


async def test_security_a_call_cannot_weaken_the_inventorys_host_key_policy(env, box, client) -> None:
    from tests.conftest import error_text

    env.write_inventory({"gpu1": {"destination": "testbox"}})
    res = await client.call_tool("audit_box", {"host": "gpu1", "host_key_policy": "accept-new"})
    text = error_text(res)
    assert "[BAD_INPUT]" in text and "never weaker" in text and "[hosts.gpu1]" in text


async def test_security_a_call_may_make_the_policy_stricter(env, box, client) -> None:
    from tests.conftest import structured

    env.write_inventory({"gpu1": {"destination": "testbox", "host_key_policy": "accept-new"}})
    res = structured(await client.call_tool("audit_box",
                                            {"host": "gpu1", "host_key_policy": "strict", "detail": "all"}))
    assert res
