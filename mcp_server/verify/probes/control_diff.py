"""VP1 control diff: does the run differ from its control in exactly the declared ablation?"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.limits import ValueStr
from mcp_server.verify.probes.refs import InputReader
from mcp_server.verify.probes.result import ProbeFinding, listed, next_probe
from mcp_server.verify.probes.sources import ConfigSource, load_config

CATALOG = ["VP1"]
QUESTION = "Does the comparison differ from its control in exactly the ablated variable(s)?"
_MISSING = "<absent>"
_VALUE_CUT = 120


class ControlDiffInputs(BaseModel):
    """Resolved configs of a run and its control, and the keys declared as the change."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["control_diff"]
    run: ConfigSource = Field(description="resolved config of the run (inline mapping or YAML/JSON/TOML file)")
    control: ConfigSource = Field(description="resolved config of the control / baseline / failing run")
    ablated: list[ValueStr] = Field(default_factory=list, max_length=50,
                               description="dotted keys declared as the change; a key covers its sub-keys "
                               "(`optimizer` covers `optimizer.lr`)")
    ignore: list[ValueStr] = Field(default_factory=list, max_length=100,
                              description="dotted keys or globs allowed to differ without meaning "
                              "(run name, output dir, tracker ids), e.g. `wandb.*`")
    compare: Literal["ablation", "working_vs_failing"] = Field(
        default="ablation",
        description="ablation: the differing set must equal `ablated`; working_vs_failing: count the "
        "axes a working config differs from a failing one in (>= 2 is confounded)")


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings and lists to dotted keys (`model.layers.0.dim`); empty containers are leaves."""
    if isinstance(cfg, dict) and cfg:
        out: dict[str, Any] = {}
        for k, v in cfg.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(cfg, list) and cfg:
        out = {}
        for i, v in enumerate(cfg):
            out.update(flatten(v, f"{prefix}{i}."))
        return out
    return {prefix[:-1]: cfg} if prefix else {}


def same_value(a: Any, b: Any) -> bool:
    """Equality that treats 1 and 1.0 as one value but keeps True apart from 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return float(a) == float(b)
    return bool(a == b)


def covered(key: str, patterns: list[str]) -> str | None:
    """The first pattern covering `key` (itself, a parent key, or a glob)."""
    for p in patterns:
        if key == p or key.startswith(p + ".") or fnmatch.fnmatchcase(key, p):
            return p
    return None


def _show(v: Any) -> str:
    text = _MISSING if v is _MISSING else repr(v)
    return text if len(text) <= _VALUE_CUT else text[: _VALUE_CUT - 3] + "..."


def differing_keys(run: dict[str, Any], control: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, run value, control value) for every key whose values differ or exist on one side."""
    out = []
    for key in sorted(set(run) | set(control)):
        a, b = run.get(key, _MISSING), control.get(key, _MISSING)
        if a is _MISSING or b is _MISSING or not same_value(a, b):
            out.append((key, a, b))
    return out


async def run(inp: ControlDiffInputs, reader: InputReader) -> ProbeFinding:
    run_cfg = flatten(await load_config(inp.run, reader))
    ctl_cfg = flatten(await load_config(inp.control, reader))
    diffs = differing_keys(run_cfg, ctl_cfg)
    meaningful = [d for d in diffs if not covered(d[0], inp.ignore)]
    m: dict[str, Any] = {
        "keys_run": len(run_cfg), "keys_control": len(ctl_cfg), "differing_count": len(meaningful),
        "ignored_differing_count": len(diffs) - len(meaningful),
        "differing": [{"key": k, "run": _show(a), "control": _show(b)} for k, a, b in listed(meaningful)],
    }
    if inp.compare == "working_vs_failing":
        return _mirror(inp, meaningful, m)
    return _ablation(inp, meaningful, m)


def _ablation(inp: ControlDiffInputs, diffs: list[tuple[str, Any, Any]], m: dict[str, Any]) -> ProbeFinding:
    undeclared = [k for k, _, _ in diffs if not covered(k, inp.ablated)]
    not_taken = [p for p in inp.ablated if not any(covered(k, [p]) for k, _, _ in diffs)]
    m.update(undeclared_count=len(undeclared), undeclared=listed(undeclared), declared=inp.ablated,
             declared_not_differing=not_taken)
    if undeclared:
        names = ", ".join(undeclared[:5]) + (" ..." if len(undeclared) > 5 else "")
        return ProbeFinding(
            measurements=m, verdict="bug",
            reason=f"{len(undeclared)} key(s) differ that were not declared as the ablation",
            disclosure=f"The run differs from its control in {len(undeclared)} undeclared key(s) "
            f"({names}); the gap mixes the ablation with these, so it is not an ablation result "
            "until the config is fixed and the run repeated.",
            next_probe=next_probe("VP1", "control diff", "fix the config, rerun, and diff again",
                                       "control_diff"))
    if not_taken:
        return ProbeFinding(
            measurements=m, verdict="bug",
            reason=f"declared ablation key(s) {not_taken} have the same value in run and control",
            disclosure=f"The declared change ({', '.join(not_taken)}) is identical in run and control: "
            "the resolved config shows the ablation never took effect, so any gap is not caused by it.",
            next_probe=next_probe("VP1", "control diff", "check the override reached the resolved config",
                                       "control_diff"))
    what = ", ".join(inp.ablated) if inp.ablated else "nothing (identical configs)"
    return ProbeFinding(
        measurements=m, verdict="clean",
        reason="the differing set equals the declared ablation",
        disclosure=f"Run and control differ only in {what}; every other resolved key is held fixed.",
        next_probe=next_probe("VP2", "trajectory", "read the curves, not just the endpoints", "trajectory"))


def _mirror(inp: ControlDiffInputs, diffs: list[tuple[str, Any, Any]], m: dict[str, Any]) -> ProbeFinding:
    axes: dict[str, list[str]] = {}
    for key, _, _ in diffs:
        axes.setdefault(covered(key, inp.ablated) or key, []).append(key)
    m.update(axes_count=len(axes), axes=listed(sorted(axes)))
    if len(axes) >= 2:
        return ProbeFinding(
            measurements=m, verdict="confounded",
            reason=f"the working config differs from the failing one in {len(axes)} axes",
            disclosure=f"The working and failing configs differ in {len(axes)} axes "
            f"({', '.join(sorted(axes)[:5])}); no single axis can be called necessary until "
            "one-axis-at-a-time intermediate runs isolate it.",
            next_probe=next_probe("VP1", "control diff", "run one-axis-at-a-time intermediates and diff each",
                                       "control_diff"))
    if not axes:
        return ProbeFinding(
            measurements=m, verdict="instability",
            reason="identical resolved configs, one working and one failing",
            disclosure="The same resolved config both worked and failed: that is run-to-run "
            "instability, not a config effect; retry the identical config before changing anything.",
            next_probe=next_probe("VP4", "instability vs effect", "retry the identical config, several seeds",
                                       "seed_variance"))
    (axis,) = axes
    return ProbeFinding(
        measurements=m, verdict="clean", reason="the configs differ in exactly one axis",
        disclosure=f"The working and failing configs differ only in {axis}.",
        next_probe=next_probe("VP3", "reproduce with backup", "confirm the flip reproduces on that axis alone",
                                   "seed_variance"))
