"""prepare_box: get a fresh box ready, behind plan → confirm like teardown, writing only what the
plan lists. The changes, from the profile's facts: one box env file every launch sources
(`<durable_root>/.rgt/box.env`: the HF/pip/torch caches on the durable tier; behind the GFW the
HF mirror with Xet off; `no_proxy` exemptions when, and only when, a proxy is set), a pip mirror
where the profile needs one and pip has no index configured, and tmux when it is missing. Each is
shown as a diff; the token is bound to the plan's content; a second plan shows nothing to do.
A wrong interpreter (A18) is pointed at, never fixed by creating an environment on a rental image."""

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
from mcp_server.run.teardown.execute import check_token

ACTION = "prepare_box"
HF_MIRROR = "https://hf-mirror.com"
PIP_MIRROR = "https://pypi.tuna.tsinghua.edu.cn/simple"
LOCAL = ("localhost", "127.0.0.1", "::1")
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


def box_env(durable: str, mirror: bool, proxy: str, no_proxy: str) -> str:
    """The box env file's content for these facts."""
    lines = ["# remote-gpu-trainer prepare_box: sourced by every launch on this box (before the launch's own env)",
             f"export HF_HOME={quote(durable + '/.cache/huggingface')}",
             f"export PIP_CACHE_DIR={quote(durable + '/.cache/pip')}",
             f"export TORCH_HOME={quote(durable + '/.cache/torch')}"]
    if mirror:
        lines += [f"export HF_ENDPOINT={HF_MIRROR}", "export HF_HUB_DISABLE_XET=1  # Xet downloads bypass the mirror"]
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


async def _read(host: Host, spec: HostSpec) -> _Plan:
    res = await host.run(scripts.command_words("box_prepare_read", path_word(spec.durable_root, "durable root"),
                                               quote(spec.profile.proxy_hook or "")), timeout=30)
    res.check("reading the box's setup")
    f = parse_kv(res.text)
    mirror = spec.profile.china_mirror_needed is True
    durable = f.get("durable") or spec.durable_root
    plan = _Plan(changes=[], advice=[])
    old = base64.b64decode(f["box_env"]).decode() if f.get("box_env", "-") != "-" else ""
    new = box_env(durable, mirror, f.get("proxy", ""), f.get("no_proxy", ""))
    if old != new:
        target = f"{durable}/.rgt/box.env"
        plan.changes.append(Change(target=target, diff=_diff(target, old, new),
                                   why="caches on the durable tier" + (", the HF mirror" if mirror else "")
                                   + (", no_proxy for local and direct hosts" if f.get("proxy") else "")))
        plan.env, plan.env_before = new, old
    if mirror and not f.get("pip_index") and f.get("pip_conf_exists"):
        plan.advice.append(f"pip has no index but {f['pip_conf']} exists: add `index-url = {PIP_MIRROR}` under "
                           "[global] yourself (the file is never replaced)")
    elif mirror and not f.get("pip_index"):
        plan.pip_conf, plan.pip = f["pip_conf"], f"[global]\nindex-url = {PIP_MIRROR}\n"
        plan.changes.append(Change(target=plan.pip_conf, why="pip has no index and the box is behind the GFW",
                                   diff=_diff(plan.pip_conf, "", plan.pip)))
    elif mirror and f.get("pip_index"):
        plan.advice.append(f"pip already has an index configured ({f['pip_index']}): left as it is")
    if not f.get("tmux"):
        if f.get("uid") == "0" and f.get("apt"):
            plan.tmux = True
            plan.changes.append(Change(target="apt-get install -y tmux", why="tmux is missing (backend tmux)",
                                       diff=""))
        else:
            plan.advice.append("tmux is missing and cannot be installed here (not root, or no apt-get): use the "
                               "shell backend, which needs only setsid")
    plan.advice.append("the interpreter a job uses is the profile's or the inventory's `python`; when audit_box A18 "
                       "says it is the wrong one, set `python` for the host (no environment is created)")
    return plan


def _hash(spec: HostSpec, p: _Plan) -> str:
    parts = [spec.name, p.env_before, p.env, p.pip_conf, p.pip, str(p.tmux)]
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
                                               quote("1" if p.tmux else "0")), timeout=35)
    res.check("applying the prepared changes")
    lines = [ln.partition("=") for ln in res.text.splitlines()]
    result = PrepareResult(host=spec.name, applied=[v for k, _, v in lines if k == "done"],
                           failed=[v for k, _, v in lines if k == "failed"])
    ledger.record("prepare_box", host=spec.name, summary=f"applied {result.applied}, failed {result.failed}",
                  data=result.model_dump())
    return result
