"""prepare_box: get a fresh box ready, behind plan → confirm like teardown, writing only what the
plan lists. The changes, from the profile's facts: one box env file every launch sources
(`<durable_root>/.rgt/box.env`: the HF/pip/torch caches on the durable tier; behind the GFW the
HF mirror with Xet off; `no_proxy` exemptions when, and only when, a proxy is set), a pip mirror
where the profile needs one and pip has no index configured, and tmux when it is missing. Each is
shown as a diff; the token is bound to the plan's content; a second plan shows nothing to do.
Behind the GFW, conda's mirror keys that no config file sets go into ~/.condarc (when conda is on
the box). A launch that would reach the wrong interpreter (A18) gets the right one's directory first
on PATH in the box env file; no environment is ever created on a rental image."""

from __future__ import annotations

import base64
import difflib
import hashlib
import secrets

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import GateRefused
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.audit.system_checks import box_env_dir, launch_python
from mcp_server.run.teardown.execute import check_token

ACTION = "prepare_box"
HF_MIRROR = "https://hf-mirror.com"
PIP_MIRROR = "https://pypi.tuna.tsinghua.edu.cn/simple"
LOCAL = ("localhost", "127.0.0.1", "::1")
CONDA_MIRROR = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"
# TUNA's layout (references://run-remote/china-network#mirrors): main for `defaults`, cloud/ for
# conda-forge and pytorch; never pytorch-nightly, which mirrors do not carry. One key, one block.
CONDA_KEYS = {
    "default_channels": f"default_channels:\n  - {CONDA_MIRROR}/pkgs/main\n",
    "custom_channels": f"custom_channels:\n  conda-forge: {CONDA_MIRROR}/cloud\n  pytorch: {CONDA_MIRROR}/cloud\n",
}
CHINA_DIRECT = (".modelscope.cn",)  # reached directly from Chinese rentals, slower through the proxy (AD2)


class Change(BaseModel):
    target: str = Field(description="the file written, or the command run")
    why: str
    diff: str = Field(description="unified diff of the file (empty for a command)")


class PreparePlan(BaseModel):
    host: str
    changes: list[Change]
    advice: list[str] = Field(description="what the plan does not change, and what to do about it")
    token: str | None = Field(description="confirm with it to apply exactly these changes; none when nothing to do")
    next_step: str


class PrepareResult(BaseModel):
    host: str
    applied: list[str]
    failed: list[str]


def box_env(durable: str, mirror: bool, proxy: str, no_proxy: str, python_dir: str = "") -> str:
    """The box env file's content for these facts."""
    lines = ["# remote-gpu-trainer prepare_box: sourced by every launch on this box (before the launch's own env)",
             f"export HF_HOME={quote(durable + '/.cache/huggingface')}",
             f"export PIP_CACHE_DIR={quote(durable + '/.cache/pip')}",
             f"export TORCH_HOME={quote(durable + '/.cache/torch')}"]
    if mirror:
        lines += [f"export HF_ENDPOINT={HF_MIRROR}", "export HF_HUB_DISABLE_XET=1  # Xet downloads bypass the mirror"]
    if python_dir:
        lines += [f'export PATH={quote(python_dir)}:"$PATH"  # python/python3 of a launch: the interpreter A18 wants']
    if proxy:
        have = [h for h in no_proxy.split(",") if h]
        want = have + [h for h in (*LOCAL, *(CHINA_DIRECT if mirror else ())) if h not in have]
        lines += [f"export no_proxy={quote(','.join(want))} NO_PROXY={quote(','.join(want))}"]
    return "\n".join(lines) + "\n"


def _diff(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"{path} (now)", tofile=f"{path} (after)"))


class _Plan(BaseModel):
    changes: list[Change]
    advice: list[str]
    env: str = ""
    env_before: str = ""  # what the plan replaces: a box changed since the plan refuses the token
    pip_conf: str = ""
    pip: str = ""
    tmux: bool = False
    condarc: str = ""
    conda: str = ""
    conda_before: str = ""


def conda_mirror(f: dict[str, str], mirror: bool) -> tuple[str, str, list[str]]:
    """(the old and new .condarc text, advice): the mirror keys no config file sets yet, appended;
    ("", "", …) when the box is not behind the GFW, has no conda, or conda already has them all."""
    if not mirror or not f.get("conda"):
        return "", "", []
    elsewhere = {k: f[f"conda_set_{k}"] for k in CONDA_KEYS if f.get(f"conda_set_{k}")}
    advice = [f"conda already sets {k} in {where}: left as it is" for k, where in elsewhere.items()]
    missing = [k for k in CONDA_KEYS if k not in elsewhere]
    if not missing:
        return "", "", advice
    old = base64.b64decode(f["condarc_text"]).decode() if f.get("condarc_text", "-") != "-" else ""
    head = old + ("\n" if old and not old.endswith("\n") else "")
    new = head + "# remote-gpu-trainer prepare_box: conda packages from the TUNA mirror (behind the GFW)\n"
    return old, new + "".join(CONDA_KEYS[k] for k in missing), advice


def _env_change(plan: _Plan, f: dict[str, str], spec: HostSpec, mirror: bool) -> None:
    durable = f.get("durable") or spec.durable_root
    old = base64.b64decode(f["box_env"]).decode() if f.get("box_env", "-") != "-" else ""
    # A18's own decision: the PATH line changes exactly when A18 warns that a launch reaches another.
    lp = launch_python(f, spec.python, spec.profile.env_contract, box_env_dir(old))
    python_dir = lp.path_dir
    plan.advice += [lp.advice] if lp.advice else []
    new = box_env(durable, mirror, f.get("proxy", ""), f.get("no_proxy", ""), python_dir)
    if old != new:
        target = f"{durable}/.rgt/box.env"
        why = ["caches on the durable tier"] + (["the HF mirror"] if mirror else []) \
            + ([f"launches find python in {python_dir} first (A18)"] if python_dir else []) \
            + (["no_proxy for local and direct hosts"] if f.get("proxy") else [])
        plan.changes.append(Change(target=target, diff=_diff(target, old, new), why=", ".join(why)))
        plan.env, plan.env_before = new, old


def _pip_change(plan: _Plan, f: dict[str, str], mirror: bool) -> None:
    if mirror and not f.get("pip_index") and f.get("pip_conf_exists"):
        plan.advice.append(f"pip has no index but {f['pip_conf']} exists: add `index-url = {PIP_MIRROR}` under "
                           "[global] yourself (the file is never replaced)")
    elif mirror and not f.get("pip_index"):
        plan.pip_conf, plan.pip = f["pip_conf"], f"[global]\nindex-url = {PIP_MIRROR}\n"
        plan.changes.append(Change(target=plan.pip_conf, why="pip has no index and the box is behind the GFW",
                                   diff=_diff(plan.pip_conf, "", plan.pip)))
    elif mirror and f.get("pip_index"):
        plan.advice.append(f"pip already has an index configured ({f['pip_index']}): left as it is")


async def _read(host: Host, spec: HostSpec) -> _Plan:
    read = scripts.command_words("box_prepare_read", path_word(spec.durable_root, "durable root"),
                                 quote(spec.profile.proxy_hook or ""), quote(spec.python or ""),
                                 quote(" ".join(CONDA_KEYS)))
    res = await host.run(scripts.load("box_interp") + read, timeout=60)
    res.check("reading the box's setup")
    f = parse_kv(res.text)
    mirror = spec.profile.china_mirror_needed is True
    plan = _Plan(changes=[], advice=[])
    _env_change(plan, f, spec, mirror)
    _pip_change(plan, f, mirror)
    old, new, advice = conda_mirror(f, mirror)
    plan.advice += advice
    if new:
        plan.condarc, plan.conda, plan.conda_before = f["condarc"], new, old
        plan.changes.append(Change(target=plan.condarc, diff=_diff(plan.condarc, old, new),
                                   why=f"conda ({f['conda']}) has no mirror and the box is behind the GFW"))
    if not f.get("tmux"):
        if f.get("uid") == "0" and f.get("apt"):
            plan.tmux = True
            plan.changes.append(Change(target="apt-get install -y tmux", why="tmux is missing (backend tmux)",
                                       diff=""))
        else:
            plan.advice.append("tmux is missing and cannot be installed here (not root, or no apt-get): use the "
                               "shell backend, which needs only setsid")
    return plan


def _hash(spec: HostSpec, p: _Plan) -> str:
    parts = [spec.name, p.env_before, p.env, p.pip_conf, p.pip, str(p.tmux), p.condarc, p.conda_before, p.conda]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


async def plan_prepare(host: Host, spec: HostSpec, ledger: Ledger) -> PreparePlan:
    """What prepare_box would change, as diffs; nothing on the box changes."""
    p = await _read(host, spec)
    token = None
    if p.changes:
        token = secrets.token_hex(16)
        ledger.issue_token(token, host=spec.name, action=ACTION, plan_hash=_hash(spec, p))
    step = ("show the user the diffs; to apply exactly these call prepare_box again with token=" + token if token
            else "nothing to do: the box is prepared")
    return PreparePlan(host=spec.name, changes=p.changes, advice=p.advice, token=token, next_step=step)


async def apply_prepare(host: Host, spec: HostSpec, ledger: Ledger, token: str) -> PrepareResult:
    """Apply the planned changes if, and only if, the box is still as it was planned."""
    rec = check_token(ledger, token, spec, ACTION, tool="prepare_box")
    p = await _read(host, spec)
    if _hash(spec, p) != rec.plan_hash:
        raise GateRefused("the box changed since the plan: nothing was written", host=spec.name,
                          next_step="call prepare_box again for a new plan and review its diffs")
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan executes once (replay refused)", host=spec.name)
    res = await host.run(scripts.command_words("box_prepare_apply", path_word(spec.durable_root, "durable root"),
                                               quote(p.env), quote(p.pip_conf), quote(p.pip),
                                               quote("1" if p.tmux else "0"), quote(p.condarc),
                                               quote(p.conda)), timeout=35)
    res.check("applying the prepared changes")
    lines = [ln.partition("=") for ln in res.text.splitlines()]
    result = PrepareResult(host=spec.name, applied=[v for k, _, v in lines if k == "done"],
                           failed=[v for k, _, v in lines if k == "failed"])
    ledger.record("prepare_box", host=spec.name, summary=f"applied {result.applied}, failed {result.failed}",
                  data=result.model_dump())
    return result
