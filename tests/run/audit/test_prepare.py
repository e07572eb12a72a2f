"""prepare_box on the test box over sshd, with the AutoDL profile (behind the GFW: mirrors): the
plan shows diffs and writes nothing, confirm writes exactly them, a second plan is empty, a
launch afterwards sees the caches on the durable tier and the HF mirror, and a box changed
between plan and confirm refuses the token. A stand-in conda base (a real venv with a `torch`
package and a `conda` that logs its calls) plays AutoDL's /root/miniconda3: the conda mirror and
the interpreter a launch reaches (A18)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
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


FAKE_CONDA = """#!/bin/sh
# Stand-in for conda 24.9: answers --version, logs every call; prepare_box must never run it to
# create an environment (rental images: base is the environment).
echo "$*" >> "${0%/*}/../conda-calls.log"
case "$1" in
  --version|-V) echo "conda 24.9.2" ;;
  *) echo "stand-in conda: $1 is not supported here" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def conda_base(box, tmp_path) -> Iterator[Path]:
    """A conda base with the stack: python/python3 that can import torch, and conda beside them.
    The box's ~/.condarc and ~/.bash_profile (a session-wide home) are removed afterwards."""
    base = tmp_path / "miniconda3"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(base)], check=True)
    torch = next((base / "lib").glob("python3*/site-packages")) / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text('__version__ = "2.4.0+cu124"\n')
    (base / "bin" / "conda").write_text(FAKE_CONDA)
    (base / "bin" / "conda").chmod(0o755)
    yield base
    for f in (box.home / ".condarc", box.home / ".bash_profile", box.fakebin / "python", box.fakebin / "python3"):
        f.unlink(missing_ok=True)


async def launched(client, command: str) -> str:
    """The log text of a launch on `rent` once it succeeded."""
    run = structured(await client.call_tool("launch_detached", {
        "host": "rent", "command": command, "probe_s": 2}))["outcomes"][0]["launch"]

    async def ended() -> dict | None:
        t = structured(await client.call_tool("tail_logs", {"host": "rent", "run_id": run["run_id"]}))
        return t if t["state"]["status"] in ("succeeded", "failed") else None
    tail = await until(ended, timeout=20, what="the launch to finish")
    assert tail["state"]["status"] == "succeeded", tail["text"]
    return str(tail["text"])


async def a18(client) -> dict:
    """A18 of an audit of `rent` (the audit's own probe, not prepare_box's)."""
    res = structured(await client.call_tool("audit_box", {"host": "rent", "detail": "all"}))
    return next(c for c in res["outcomes"][0]["audit"]["checks"] if c["id"] == "A18")


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


async def test_conda_mirror_keys_and_the_named_interpreter_first_on_path(env, box, client, tmp_path,
                                                                        conda_base) -> None:
    durable = tmp_path / "autodl-tmp"
    durable.mkdir()
    env.write_inventory({"rent": {"destination": "testbox", "profile": "autodl", "durable_root": str(durable),
                                  "python": f"{conda_base}/bin/python"}})
    (box.home / ".condarc").write_text("auto_activate_base: false\n")
    (conda_base / ".condarc").write_text("custom_channels:\n  conda-forge: https://mirrors.example.cn/cloud\n")
    # h-prepare's disagreement: the named python runs fine (A18 used to PASS on it) while a launch's
    # bare python3 is another one. Now A18 warns, naming both, exactly as prepare plans the PATH line.
    check = await a18(client)
    assert check["status"] == "WARN" and "call prepare_box" in check["evidence"], check
    reached = re.search(r"a launch reaches .*python3 -> (\S+), not (\S+):", check["evidence"])
    assert reached and reached[2] == f"{conda_base}/bin/python", check["evidence"]
    assert reached[1].startswith("/") and not reached[1].startswith(str(conda_base)), "both paths are named"
    plan = (await prepare(client))["plan"]
    targets = {c["target"]: c for c in plan["changes"]}
    assert f'+export PATH={conda_base}/bin:"$PATH"' in targets[f"{durable}/.rgt/box.env"]["diff"]
    condarc = targets[f"{box.home}/.condarc"]["diff"]
    assert " auto_activate_base: false" in condarc, "the user's own keys stay"
    assert "+  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main" in condarc
    assert "custom_channels" not in condarc, "a key conda's root config already sets is left alone"
    assert any(f"custom_channels in {conda_base}/.condarc" in a for a in plan["advice"])
    assert (box.home / ".condarc").read_text() == "auto_activate_base: false\n", "the plan writes nothing"

    before = tree(durable) | tree(box.home) | tree(conda_base)
    done = (await prepare(client, token=plan["token"]))["result"]
    changed = {p for p, stamp in (tree(durable) | tree(box.home) | tree(conda_base)).items() if before.get(p) != stamp}
    assert changed <= set(targets), f"only the listed files change: {sorted(changed - set(targets))}"
    assert ".condarc" in done["applied"] and done["failed"] == []
    text = (box.home / ".condarc").read_text()
    assert text.startswith("auto_activate_base: false\n# remote-gpu-trainer") and text.count("default_channels:") == 1
    again = (await prepare(client))["plan"]
    assert again["changes"] == [] and again["token"] is None
    after = await a18(client)
    assert after["status"] == "PASS" and f"python3 -> {conda_base}/bin/python3" in after["evidence"], after

    out = await launched(client, "python3 -c 'import sys, torch; print(\"exe=\" + sys.executable, torch.__version__)'")
    assert f"exe={conda_base}/bin/python3 2.4.0+cu124" in out
    assert not (tmp_path / "conda-calls.log").exists() and not list((conda_base / "envs").glob("*")), \
        "conda is never run, no environment is created"


async def test_the_named_interpreter_already_first_on_path_plans_nothing_for_it(env, box, client, tmp_path,
                                                                                 conda_base) -> None:
    for name in ("python", "python3"):
        (box.fakebin / name).symlink_to(conda_base / "bin" / name)
    durable = tmp_path / "data"
    durable.mkdir()
    env.write_inventory({"rent": {"destination": "testbox", "profile": "autodl", "durable_root": str(durable),
                                  "python": f"{box.fakebin}/python"}})
    plan = (await prepare(client))["plan"]
    assert all("PATH=" not in c["diff"] for c in plan["changes"]), "A18 passes: nothing planned for it"
    check = await a18(client)
    assert check["status"] == "PASS" and f"python3 -> {box.fakebin}/python3" in check["evidence"], check
    await prepare(client, token=plan["token"])
    assert (await prepare(client))["plan"]["changes"] == []


async def test_the_login_shells_interpreter_with_torch_reaches_launches(env, box, client, tmp_path,
                                                                         conda_base) -> None:
    # Matpool-like: only a login shell puts the stack on PATH; a launch's python3 has no torch.
    (box.home / ".bash_profile").write_text(f'export PATH="{conda_base}/bin:$PATH"\n')
    durable = tmp_path / "data"
    durable.mkdir()
    env.write_inventory({"rent": {"destination": "testbox", "profile": "china", "durable_root": str(durable)}})
    plan = (await prepare(client))["plan"]
    env_diff = next(c["diff"] for c in plan["changes"] if c["target"].endswith("/.rgt/box.env"))
    assert f'+export PATH={conda_base}/bin:"$PATH"' in env_diff
    check = await a18(client)
    assert check["status"] == "WARN" and f"not {conda_base}/bin/python" in check["evidence"], check
    assert not any(c["target"].endswith(".condarc") for c in plan["changes"]), "conda is not reached: no condarc"
    await prepare(client, token=plan["token"])
    assert (await prepare(client))["plan"]["changes"] == []
    assert (await a18(client))["status"] == "PASS"
    out = await launched(client, "python3 -c 'import torch; print(\"torch=\" + torch.__version__)'")
    assert "torch=2.4.0+cu124" in out
