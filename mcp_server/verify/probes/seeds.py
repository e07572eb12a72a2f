"""VP4 / VP11 / statistics: seed variance and significance of arm-vs-baseline deltas.

Seed-level (init/optimization) variance decides when both arms have >= 2 seeds (Welch);
a single-seed arm is set against the baseline's mean, best and worst seed; per-item
scores add a paired test and a paired bootstrap (sampling variance of the test set).
Several comparisons are Holm-corrected together."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import InputError
from mcp_server.limits import IdStr
from mcp_server.verify import stats
from mcp_server.verify.probes.directions import Direction, resolve
from mcp_server.verify.probes.refs import InputReader
from mcp_server.verify.probes.result import NextProbe, ProbeFinding, Verdict, fmt, next_probe, num
from mcp_server.verify.probes.seed_comparison import (
    Comparison,
    NoVarianceTest,
    PairedTest,
    SeedTest,
    SingleSeedTest,
    VarianceSource,
    WelchTest,
)
from mcp_server.verify.probes.sources import KeyedSeries, Series, load_series

CATALOG = ["VP4", "VP11"]
QUESTION = "Is each arm's difference from the baseline larger than run-to-run noise?"
_ORDER: list[Verdict] = ["instability", "effect", "underpowered", "noise", "unverified"]
# items x resamples one paired bootstrap may draw (keeps a call well inside the tool time budget)
_BOOTSTRAP_WORK = 200_000_000


class Arm(Series):
    """One arm: its per-seed final metric (inline `values` or a table `column`)."""

    name: str = Field(min_length=1, max_length=64)
    items: KeyedSeries | None = Field(default=None, description="per-item test scores of this arm (keys = "
                                      "item ids); enables the paired test against the baseline")


class SeedVarianceInputs(BaseModel):
    """Per-seed values of a baseline and one or more arms (and, optionally, per-item scores)."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["seed_variance"]
    metric: IdStr | None = None
    direction: Direction | None = Field(default=None, description="higher or lower is better "
                                        "(from the metric name when known)")
    baseline: Arm
    arms: list[Arm] = Field(min_length=1, max_length=20)
    alpha: float = Field(default=0.05, gt=0, lt=0.5)
    min_effect: float | None = Field(default=None, description="the smallest difference you would act "
                                     "on; a non-significant delta below the design's MDE is `underpowered`")
    comparisons_tried: int | None = Field(default=None, ge=1, le=10_000, description="how many "
                                          "configs/comparisons were tried in all (Holm family size)")
    bootstrap_resamples: int = Field(default=10_000, ge=1000, le=100_000)
    bootstrap_seed: int = 0
    confidence: float = Field(default=0.95, gt=0.5, lt=1)


class _Loaded(BaseModel):
    name: str
    seeds: list[float]
    nonfinite: int
    items: list[float] | None = None
    item_keys: list[str] | None = None


async def _load(arm: Arm, reader: InputReader) -> _Loaded:
    vals, _ = await load_series(arm, reader, f"arm {arm.name!r}")
    seeds = [v for v in vals if v is not None and math.isfinite(v)]
    out = _Loaded(name=arm.name, seeds=seeds, nonfinite=sum(1 for v in vals if v is None or not math.isfinite(v)))
    if not vals:
        raise InputError(f"arm {arm.name!r} is empty", expected="at least one seed value")
    if arm.items is not None:
        items, keys = await load_series(arm.items, reader, f"per-item scores of {arm.name!r}")
        out.items = [float("nan") if v is None else v for v in items]
        out.item_keys = None if keys is None else [str(k) for k in keys]
    return out


def _align(a: _Loaded, b: _Loaded) -> tuple[list[float], list[float], list[str]]:
    """Per-item scores paired by id (when both have ids) or by position."""
    assert a.items is not None and b.items is not None
    if a.item_keys is None or b.item_keys is None:
        if len(a.items) != len(b.items):
            raise InputError(f"per-item scores of {a.name!r} and {b.name!r} differ in length",
                             observed=f"{len(a.items)} vs {len(b.items)}",
                             next_step="score the same items, or give item ids (keys) to join on")
        return a.items, b.items, []
    warnings = []
    index_b: dict[str, float] = {}
    for k, v in zip(b.item_keys, b.items, strict=True):
        if k in index_b:
            raise InputError(f"item id {k!r} appears twice in {b.name!r}'s per-item scores")
        index_b[k] = v
    common = [(v, index_b[k]) for k, v in zip(a.item_keys, a.items, strict=True) if k in index_b]
    missing = len(a.items) + len(b.items) - 2 * len(common)
    if missing:
        warnings.append(f"{missing} item(s) are scored on one side only and were left out of the paired test")
    return [c[0] for c in common], [c[1] for c in common], warnings


def _paired(a: _Loaded, b: _Loaded, inp: SeedVarianceInputs) -> tuple[PairedTest | None, list[str]]:
    if a.items is None or b.items is None:
        return None, []
    x, y, warnings = _align(a, b)
    bad = sum(1 for v in x + y if not math.isfinite(v))
    if bad or len(x) < 2:
        why = (f"{bad} non-finite per-item score(s): the scorer failed on some items; rescore them"
               if bad else f"{len(x)} common item(s): too few for a paired test")
        return None, [*warnings, f"paired test not run: {why}"]
    t = stats.paired_t(x, y, inp.confidence)
    resamples = min(inp.bootstrap_resamples, max(1000, _BOOTSTRAP_WORK // len(x)))
    if resamples < inp.bootstrap_resamples:
        warnings.append(f"bootstrap cut to {resamples} resamples for {len(x)} items to stay within the call's time")
    boot = stats.paired_bootstrap(x, y, resamples, inp.bootstrap_seed, inp.confidence)
    return PairedTest(
        n_items=t.n, mean_diff=num(t.mean_diff), t=num(t.t), df=t.df, p=num(t.p), ci_low=num(t.ci_low),
        ci_high=num(t.ci_high), reason=t.reason, bootstrap_ci_low=num(boot.ci_low),
        bootstrap_ci_high=num(boot.ci_high), bootstrap_frac_le_zero=num(boot.frac_le_zero),
        bootstrap_resamples=boot.resamples, bootstrap_seed=boot.seed, raw_p=t.p), warnings


def _seed_test(arm: _Loaded, base: _Loaded, inp: SeedVarianceInputs,
               d: Direction) -> tuple[VarianceSource, SeedTest, float | None]:
    """The seed-level test the seed counts allow, and its p-value."""
    if len(arm.seeds) >= 2 and len(base.seeds) >= 2:
        w = stats.welch(arm.seeds, base.seeds, inp.confidence)
        sd = max(stats.summarize(arm.seeds).std or 0.0, stats.summarize(base.seeds).std or 0.0)
        m = stats.mde(sd, len(arm.seeds), len(base.seeds), inp.alpha)
        return "seed", WelchTest(
            delta=num(w.delta), welch_t=num(w.t), welch_df=num(w.df), p=num(w.p), ci_low=num(w.ci_low),
            ci_high=num(w.ci_high), cohens_d=num(w.cohens_d), reason=w.reason, mde=num(m.mde) if m else None,
            mde_sd_noisier_arm=num(sd)), w.p
    if len(arm.seeds) == 1 and len(base.seeds) >= 1:
        s = stats.single_vs_arm(arm.seeds[0], base.seeds, d)
        detectable = None
        if s.df is not None:
            sd = stats.summarize(base.seeds).std or 0.0
            detectable = stats.t_critical(s.df, inp.alpha) * sd * math.sqrt(1 + 1 / s.n)
        return "single_seed_vs_baseline_seeds", SingleSeedTest(
            value=num(s.value), baseline_mean=num(s.mean), baseline_best=num(s.best),
            baseline_worst=num(s.worst), vs_mean=num(s.vs_mean), vs_best=num(s.vs_best),
            vs_worst=num(s.vs_worst), inside_range=s.inside_range, delta=num(s.vs_mean), prediction_t=num(s.t),
            p=num(s.p), reason=s.reason, mde=num(detectable)), s.p
    both = arm.seeds and base.seeds
    return "none", NoVarianceTest(
        delta=num(_mean(arm.seeds) - _mean(base.seeds)) if both else None,
        reason="the baseline has a single seed: no seed variance to test against"), None


def _compare(arm: _Loaded, base: _Loaded, inp: SeedVarianceInputs, d: Direction) -> Comparison:
    paired, warnings = _paired(arm, base, inp)
    variance, test, p = _seed_test(arm, base, inp, d)
    c = Comparison(arm=arm.name, baseline=base.name, n_arm=len(arm.seeds), n_baseline=len(base.seeds),
                   variance=variance, test=test, raw_p=p, warnings=warnings, paired=paired)
    if paired is not None and c.raw_p is None:
        c.variance, c.raw_p = "item", paired.raw_p
    return c


def _mean(v: list[float]) -> float:
    return sum(v) / len(v) if v else float("nan")


def _verdict(c: Comparison, inp: SeedVarianceInputs, unstable: set[str]) -> Verdict:
    if c.arm in unstable or c.baseline in unstable:
        return "instability"
    if c.raw_p is None or c.p_holm is None:
        return "unverified"
    if isinstance(c.test, SingleSeedTest) and c.test.inside_range:
        return "noise"
    if c.p_holm < inp.alpha:
        return "effect"
    mde = c.test.mde
    if inp.min_effect is not None and mde is not None and mde > abs(inp.min_effect):
        return "underpowered"
    return "noise"


def _instability(arms: list[_Loaded]) -> tuple[set[str], dict[str, Any]]:
    flagged, info = set(), {}
    for a in arms:
        out = stats.robust_outliers(a.seeds) if a.seeds else []
        if a.nonfinite or out:
            flagged.add(a.name)
            info[a.name] = {"nonfinite_seeds": a.nonfinite, "outlier_seed_values": [num(a.seeds[i]) for i in out]}
    return flagged, info


async def run(inp: SeedVarianceInputs, reader: InputReader) -> ProbeFinding:
    direction, warnings = resolve(inp.metric, inp.direction)
    names = [inp.baseline.name] + [a.name for a in inp.arms]
    if len(set(names)) != len(names):
        raise InputError("arm names must be distinct", observed=names)
    base = await _load(inp.baseline, reader)
    arms = [await _load(a, reader) for a in inp.arms]
    if direction is None:
        warnings.append("direction unknown: best/worst seed read as highest/lowest; pass `direction`")
    d: Direction = direction or "higher"
    unstable, unstable_info = _instability([base, *arms])
    comps = [_compare(a, base, inp, d) for a in arms]
    testable = [(c, c.raw_p) for c in comps if c.raw_p is not None]
    family = max(inp.comparisons_tried or 0, len(comps))
    for (c, _), adj in zip(testable, stats.holm([p for _, p in testable], family), strict=True):
        c.p_holm = num(adj)
    for c in comps:
        c.verdict = _verdict(c, inp, unstable)
        warnings += [f"{c.arm}: {w}" for w in c.warnings]
    verdict = min((c.verdict for c in comps), key=_ORDER.index)
    m: dict[str, Any] = {"metric": inp.metric, "direction": direction, "alpha": inp.alpha,
                         "holm_family_size": family, "arms": {a.name: _summary(a, inp) for a in [base, *arms]},
                         "comparisons": [c.measurements() for c in comps]}
    if unstable_info:
        m["instability"] = unstable_info
    return ProbeFinding(measurements=m, verdict=verdict, reason=_reason(comps, verdict),
                             disclosure=" ".join(_sentence(c, inp, d) for c in comps), warnings=warnings,
                             next_probe=_next(verdict))


def _summary(a: _Loaded, inp: SeedVarianceInputs) -> dict[str, Any]:
    if not a.seeds:
        return {"n": 0, "nonfinite": a.nonfinite}
    s = stats.summarize(a.seeds, inp.confidence)
    return {k: (num(v) if isinstance(v, float) else v) for k, v in s.model_dump().items()} | {"nonfinite": a.nonfinite}


def _reason(comps: list[Comparison], verdict: Verdict) -> str:
    parts = [f"{c.arm}: {c.verdict}" for c in comps]
    return f"overall {verdict}: " + "; ".join(parts)


def _sentence(c: Comparison, inp: SeedVarianceInputs, d: Direction) -> str:
    metric = inp.metric or "the metric"
    who = f"{c.arm} vs {c.baseline}"
    v, t = c.verdict, c.test
    if v == "instability":
        return (f"{who}: a seed failed or fell far outside the others (non-finite or outlier); that is "
                "instability of the config, so retry the identical config rather than report a mean.")
    if c.variance == "single_seed_vs_baseline_seeds" and isinstance(t, SingleSeedTest):
        head = (f"{who}: {c.arm} is a single seed ({fmt(t.value)}) against baseline mean "
                f"{fmt(t.baseline_mean)} ({fmt(t.vs_mean, True)}), best seed {fmt(t.baseline_best)} "
                f"({fmt(t.vs_best, True)}) and worst seed {fmt(t.baseline_worst)} ({fmt(t.vs_worst, True)}) "
                f"on {metric} ({d} is better); single seed, no variance band: a delta inside run-to-run noise "
                "cannot be told from signal.")
        return head + (" It lies inside the baseline's seed range." if t.inside_range else "")
    if v == "unverified":
        delta = fmt(t.delta, True) if t.delta is not None else "n/a"
        return f"{who}: {t.reason}; no variance band, so the delta {delta} is not yet a result."
    p_txt = f"p = {fmt(t.p)} (Holm-adjusted {fmt(c.p_holm)})"
    base = (f"{who}: delta {fmt(t.delta, True)} on {metric} ({d} is better), {p_txt}, "
            f"n = {c.n_arm}/{c.n_baseline} seeds, {_variance_words(c)}")
    if v == "effect":
        return base + "; larger than that noise."
    if v == "underpowered":
        return (base + f"; the smallest detectable difference here is {fmt(t.mde)}, above the "
                f"{fmt(inp.min_effect)} you would act on: underpowered, not a null result.")
    return base + f"; inside the noise (smallest detectable difference {fmt(t.mde)}), so not an improvement."


def _variance_words(c: Comparison) -> str:
    if c.variance == "item" and c.paired is not None:
        p = c.paired
        return (f"paired over {p.n_items} items, bootstrap CI [{fmt(p.bootstrap_ci_low)}, "
                f"{fmt(p.bootstrap_ci_high)}] (sampling variance of the test items, not seed variance)")
    return "variance over seeds (init/optimization)"


def _next(verdict: Verdict) -> NextProbe:
    if verdict == "instability":
        return next_probe("VP4", "instability vs effect", "retry the identical config; never rescue one arm "
                          "with special settings", "seed_variance")
    if verdict in ("underpowered", "unverified", "noise"):
        return next_probe("STATS", "minimum detectable effect", "size the seeds before spending GPU-hours", "mde")
    return next_probe("VP7", "fair comparison", "check budgets and tuning were equal across arms")
