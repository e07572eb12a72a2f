"""§6 metric sanity: the direction table, chance floors (ln B, 1/B, 1/k, ln C), false
precision (decimals reported vs items scored) and the sparse-target warning."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.limits import IdStr
from mcp_server.verify.probes.directions import Direction, direction_of, normalise
from mcp_server.verify.probes.refs import InputReader
from mcp_server.verify.probes.result import ProbeFinding, Verdict, next_probe, num
from mcp_server.verify.stats import sps

CATALOG = ["VP11", "VP9"]
QUESTION = "Is the metric read the right way round, above its chance floor, and reported to a precision n supports?"
_ORDER: list[Verdict] = ["bug", "collapsed", "unverified", "clean"]
_PROPORTION = {"accuracy", "acc", "top1", "top5", "recall", "precision", "f1", "miou", "iou", "dice",
               "pa", "pixel_accuracy", "map", "map50", "map50-95", "ap", "ap50", "error", "error_rate", "em",
               "exact_match", "hit_rate"}
_SPARSE_PRONE = {"psnr", "ssim", "miou", "pa", "pixel_accuracy", "pixel_acc"}
ChanceKind = Literal["auto", "infonce", "retrieval", "classification", "cross_entropy", "none"]


class MetricSanityInputs(BaseModel):
    """One reported metric value and what it was computed on."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["metric_sanity"]
    metric: str = Field(min_length=1, max_length=80)
    value: float | None = None
    reported: str | None = Field(default=None, max_length=40, description="the value exactly as printed "
                                 "(e.g. '0.8734' or '87.34%'); decimals are counted from it")
    direction: Direction | None = Field(default=None, description="the direction the claim assumes")
    n: int | None = Field(default=None, ge=0, description="items scored")
    std: float | None = Field(default=None, ge=0, description="per-item std (standard error of non-proportions)")
    split: IdStr | None = Field(default=None, description="split the value was measured on")
    batch_size: int | None = Field(default=None, ge=2, description="B: InfoNCE chance ln B, in-batch retrieval 1/B")
    num_classes: int | None = Field(default=None, ge=2, description="k: accuracy chance 1/k, CE at init ln k")
    chance_kind: ChanceKind = "auto"
    shuffle_value: float | None = Field(default=None, description="the same metric with shuffled conditioning")
    foreground_fraction: float | None = Field(default=None, ge=0, le=1, description="share of target "
                                              "pixels/elements that are foreground")
    sparse_threshold: float = Field(default=0.1, gt=0, lt=1)
    alpha: float = Field(default=0.05, gt=0, lt=0.5)


def chance_floor(inp: MetricSanityInputs) -> tuple[str, float, str] | None:
    """(kind, value, formula) of the metric's chance level, when the inputs define one."""
    key = normalise(inp.metric)
    kind = inp.chance_kind
    if kind == "auto":
        if re.search(r"infonce|\bnce\b|contrastive", key):
            kind = "infonce"
        elif re.search(r"retriev|(recall|r|hit)@1\b", key):
            kind = "retrieval"
        elif re.search(r"acc|top1|top5", key):
            kind = "classification"
        elif re.search(r"cross_entropy|\bce\b|nll|loss", key):
            kind = "cross_entropy"
    k, b = inp.num_classes, inp.batch_size
    if kind == "infonce" and b:
        return kind, math.log(b), f"ln B = ln {b}"
    if kind == "retrieval" and b:
        return kind, 1 / b, f"1/B = 1/{b}"
    if kind == "classification" and k:
        top = 5 if "top5" in key else 1
        return kind, min(1.0, top / k), f"{top}/k = {top}/{k}"
    if kind == "cross_entropy" and k:
        return kind, math.log(k), f"ln C = ln {k}"
    return None


def _scale(value: float, reported: str | None) -> float:
    return 100.0 if (reported and reported.strip().endswith("%")) or value > 1 else 1.0


def _chance_check(inp: MetricSanityInputs, d: Direction, m: dict[str, Any]) -> list[tuple[Verdict, str]]:
    floor = chance_floor(inp)
    if floor is None or inp.value is None:
        return []
    kind, chance, formula = floor
    is_prop = kind in ("classification", "retrieval")
    scale = _scale(inp.value, inp.reported) if is_prop else 1.0
    v = inp.value / scale
    m.update(chance_kind=kind, chance_floor=num(chance * scale), chance_formula=formula)
    if is_prop and inp.n:
        hits = round(v * inp.n)
        p_above = sps().binomtest(hits, inp.n, chance, alternative="greater").pvalue
        p_below = sps().binomtest(hits, inp.n, chance, alternative="less").pvalue
        m.update(p_above_chance=num(p_above), p_below_chance=num(p_below))
        if p_below < inp.alpha:
            return [("bug", f"{inp.metric} {inp.value} is significantly below chance {num(chance * scale)} "
                     "(labels or class mapping are off)")]
        at = p_above >= inp.alpha
    else:
        tol = 0.05 * chance if is_prop else 0.02 * chance
        at = (v <= chance + tol) if d == "higher" else (v >= chance - tol)
    if at:
        return [("bug", f"{inp.metric} {inp.value} is at its chance floor {num(chance * scale)} ({formula}): "
                 "nothing measurable was learned; do not tune against it")]
    return []


def _precision(inp: MetricSanityInputs, m: dict[str, Any]) -> list[str]:
    if not inp.reported or not inp.n or inp.value is None:
        return []
    digits = re.search(r"\.(\d+)", inp.reported)
    decimals = len(digits.group(1)) if digits else 0
    key = normalise(inp.metric)
    base = re.split(r"[@(\[]", key)[0]
    scale = _scale(inp.value, inp.reported)
    if base in _PROPORTION and 0 <= inp.value / scale <= 1:
        p = min(max(inp.value / scale, 0.5 / inp.n), 1 - 0.5 / inp.n)
        se = math.sqrt(p * (1 - p) / inp.n) * scale
    elif inp.std is not None:
        se = inp.std / math.sqrt(inp.n)
    else:
        return []
    justified = max(0, -math.floor(math.log10(se))) if se > 0 else decimals
    m.update(decimals_reported=decimals, standard_error=num(se), decimals_justified=justified)
    if decimals > justified:
        return [f"reported to {decimals} decimals on n = {inp.n} items; the standard error is about {num(se, 2)}, "
                f"so digits past decimal {justified} are noise (false precision)"]
    return []


async def run(inp: MetricSanityInputs, reader: InputReader) -> ProbeFinding:
    table = direction_of(inp.metric)
    d = inp.direction or table
    m: dict[str, Any] = {"metric": inp.metric, "value": inp.value, "direction_table": table,
                         "direction_claimed": inp.direction, "n": inp.n, "split": inp.split}
    found: list[tuple[Verdict, str]] = []
    if inp.direction and table and inp.direction != table:
        found.append(("bug", f"the claim reads {inp.metric} as {inp.direction}-is-better; it is {table}-is-better"))
    if d is None:
        found.append(("unverified", f"{inp.metric!r} is not in the direction table and no direction was given"))
    if inp.n == 0:
        found.append(("bug", "0 items were scored: the scorer did not apply (empty is not 'not significant')"))
    if inp.value is not None and not math.isfinite(inp.value):
        found.append(("unverified", f"the value is {inp.value}: the scorer failed or the model diverged"))
    elif d is not None:
        found += _chance_check(inp, d, m)
        found += _shuffle(inp, d, m)
    found += _sparse(inp)
    warnings = _precision(inp, m)
    if inp.split and inp.split.strip().lower() in ("val", "valid", "validation", "dev"):
        warnings.append("measured on validation: the reported number belongs on the disjoint test split")
    return _finish(inp, found, warnings, m)


def _shuffle(inp: MetricSanityInputs, d: Direction, m: dict[str, Any]) -> list[tuple[Verdict, str]]:
    if inp.shuffle_value is None or inp.value is None:
        return []
    out: list[tuple[Verdict, str]] = []
    gap = inp.value - inp.shuffle_value
    m["real_minus_shuffle"] = num(gap)
    if (gap <= 0) if d == "higher" else (gap >= 0):
        out.append(("collapsed", f"real {inp.value} is no better than shuffled conditioning {inp.shuffle_value}"))
    floor = chance_floor(inp)
    if floor and d == "higher" and inp.shuffle_value < floor[1] * _scale(inp.value, inp.reported) * 0.9:
        out.append(("unverified", f"the shuffle baseline {inp.shuffle_value} sits below chance: an optimistic "
                    "validation artifact; re-run on the test split"))
    return out


def _sparse(inp: MetricSanityInputs) -> list[tuple[Verdict, str]]:
    base = normalise(inp.metric)
    if base in _SPARSE_PRONE and inp.foreground_fraction is not None and inp.foreground_fraction < inp.sparse_threshold:
        return [("unverified", f"{inp.metric} on a target that is {inp.foreground_fraction:.1%} foreground rewards "
                 "matching the background; score a foreground-scoped metric and render samples")]
    return []


def _finish(inp: MetricSanityInputs, found: list[tuple[Verdict, str]], warnings: list[str],
            m: dict[str, Any]) -> ProbeFinding:
    m["findings"] = [f"{v}: {r}" for v, r in found]
    if not found:
        d = inp.direction or direction_of(inp.metric)
        return ProbeFinding(measurements=m, verdict="clean", reason="direction known, no chance or sparsity finding",
                            warnings=warnings, disclosure=f"{inp.metric} ({d} is better)"
                            + (f", n = {inp.n}" if inp.n is not None else "")
                            + (f"; {warnings[0]}" if warnings else "") + ".",
                            next_probe=next_probe("VP4", "seed variance", "put a variance band on it", "seed_variance"))
    verdict = min((v for v, _ in found), key=_ORDER.index)
    text = "; ".join(r for v, r in found if v == verdict)
    extra = f" Also: {'; '.join(warnings)}." if warnings else ""
    return ProbeFinding(measurements=m, verdict=verdict, reason=text, warnings=warnings,
                        disclosure=f"{inp.metric} = {inp.reported or inp.value}: {text}.{extra}",
                        next_probe=next_probe("VP9", "localize where the signal dies", "measure content directly "
                                              "(input ceiling, per-stage probe)") if verdict in ("bug", "collapsed")
                        else next_probe("VP11", "metric & statistical integrity", "fix the metric before reporting it"))
