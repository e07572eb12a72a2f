"""prepare_box on the test box over sshd, with the AutoDL profile (behind the GFW: mirrors): the
plan shows diffs and writes nothing, confirm writes exactly them, a second plan is empty, a
launch afterwards sees the caches on the durable tier and the HF mirror, and a box changed
between plan and confirm refuses the token."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_server.run.audit.prepare import box_env
from tests.conftest import error_text, structured
from tests.support.wait import until


@pytest.fixture
def rental(env, box, tmp_path) -> Path:
    durable = tmp_path / "autodl-tmp"
    durable.mkdir()
    env.write_inventory({"rent": {"destination": "testbox", "profile": "autodl", "durable_root": str(durable)}})
    return durable


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its size and mtime."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


async def prepare(client, **args) -> dict:
    return structured(await client.call_tool("prepare_box", {"host": "rent", **args}))


def pip_has_index(home: Path) -> bool:
    return any(p.is_file() and re.search(r"^\s*index-url", p.read_text(), re.M)
               for p in (home / ".config/pip/pip.conf", home / ".pip/pip.conf", Path("/etc/pip.conf")))


async def test_plan_confirm_then_nothing_to_do_and_launches_see_it(rental, box, client) -> None:
    box_env_file = rental / ".rgt" / "box.env"
    plan = (await prepare(client))["plan"]
    assert not box_env_file.exists(), "the plan writes nothing"
    targets = {c["target"]: c for c in plan["changes"]}
    env_change = targets[f"{rental}/.rgt/box.env"]
    assert f"+export HF_HOME={rental}/.cache/huggingface" in env_change["diff"]
    assert "+export HF_ENDPOINT=https://hf-mirror.com" in env_change["diff"]
    assert "+export HF_HUB_DISABLE_XET=1" in env_change["diff"]
    assert not any("tmux" in t for t in targets), "tmux is installed here"
    if pip_has_index(box.home):
        assert any("already has an index" in a for a in plan["advice"])
    else:
        assert f"{box.home}/.config/pip/pip.conf" in targets
    before = tree(rental) | tree(box.home)
    done = (await prepare(client, token=plan["token"]))["result"]
    changed = {p for p, stamp in (tree(rental) | tree(box.home)).items() if before.get(p) != stamp}
    assert changed <= set(targets), f"only the listed files change: {sorted(changed - set(targets))}"
    assert "box.env" in done["applied"] and done["failed"] == []
    assert "export HF_ENDPOINT=https://hf-mirror.com" in box_env_file.read_text()

    again = (await prepare(client))["plan"]
    assert again["changes"] == [] and again["token"] is None and "nothing to do" in again["next_step"]

    run = structured(await client.call_tool("launch_detached", {
        "host": "rent", "command": "echo hf=$HF_HOME endpoint=$HF_ENDPOINT", "probe_s": 2}))["outcomes"][0]["launch"]

    async def ended() -> dict | None:
        t = structured(await client.call_tool("tail_logs", {"host": "rent", "run_id": run["run_id"]}))
        return t if t["state"]["status"] == "succeeded" else None
    tail = await until(ended, timeout=20, what="the launch to finish")
    assert f"hf={rental}/.cache/huggingface endpoint=https://hf-mirror.com" in tail["text"]


async def test_a_box_changed_after_the_plan_refuses_the_token_and_writes_nothing(rental, client) -> None:
    plan = (await prepare(client))["plan"]
    (rental / ".rgt").mkdir(exist_ok=True)
    (rental / ".rgt" / "box.env").write_text("export MINE=1\n")
    res = await client.call_tool("prepare_box", {"host": "rent", "token": plan["token"]})
    assert res.is_error and "changed since the plan" in error_text(res)
    assert (rental / ".rgt" / "box.env").read_text() == "export MINE=1\n"
    replan = (await prepare(client))["plan"]
    assert "-export MINE=1" in replan["changes"][0]["diff"], "the new plan shows what would be replaced"


def test_no_proxy_exemptions_only_when_a_proxy_is_set_keeping_the_existing_ones() -> None:
    assert "no_proxy" not in box_env("/d", mirror=True, proxy="", no_proxy="")
    text = box_env("/d", mirror=True, proxy="http://10.0.0.1:3128", no_proxy="internal.lan,localhost")
    assert "export no_proxy=internal.lan,localhost,127.0.0.1,::1,.modelscope.cn" in text
    assert ".modelscope.cn" not in box_env("/d", mirror=False, proxy="http://p:1", no_proxy="")
