"""Statistics for the VERIFY probes, computed with numpy and scipy.

Every function takes plain sequences of numbers and returns a small pydantic model. A
statistic that cannot be computed from the data (one seed, zero variance, no items) comes
back as None together with a `reason`; nothing here invents a number to fill the gap.
Bad data (empty, non-finite, ragged) raises InputError, naming what was wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from mcp_server import lazy
from mcp_server.errors import InputError

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy.module("numpy")  # loaded by the first probe that computes, not at server start


def sps() -> ModuleType:
    """scipy.stats, imported on first use: importing it costs about a second, and a server that
    only lists tools or searches the references never needs it."""
    from scipy import stats

    module: ModuleType = stats
    return module

Direction = Literal["higher", "lower"]

# Items x resamples held in memory at once by the bootstrap (float64 elements).
_BOOTSTRAP_BATCH_ELEMENTS = 2_000_000


def as_array(values: Sequence[float] | np.ndarray, what: str = "values") -> np.ndarray:
    """A 1-D float array of finite values; empty or non-finite input is an InputError."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise InputError(f"{what} must be a flat list of numbers", observed=f"shape {arr.shape}")
    if arr.size == 0:
        raise InputError(f"{what} is empty", expected="at least one number")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise InputError(
            f"{what} contains {bad.size} non-finite value(s) (NaN or inf)",
            observed=f"positions {bad[:10].tolist()}",
            next_step="a NaN seed or item is a finding, not a number: report the failed run, "
            "or rescore the items, then pass finite values",
        )
    return arr


class SampleSummary(BaseModel):
    """Location and spread of one arm."""

    n: int
    mean: float
    std: float | None = Field(default=None, description="sample std (n-1); None when n < 2")
    sem: float | None = None
    ci_low: float | None = Field(default=None, description="t-interval of the mean")
    ci_high: float | None = None
    confidence: float
    median: float
    min: float
    max: float
    iqm: float | None = Field(default=None, description="interquartile mean; only when n >= 5")


def iqm(values: Sequence[float] | np.ndarray) -> float | None:
    """Mean of the middle 50 % (25 % trimmed from each end); None below five values."""
    arr = as_array(values)
    if arr.size < 5:
        return None
    return float(sps().trim_mean(arr, 0.25))


def summarize(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> SampleSummary:
    """n, mean, std, SEM, t-CI of the mean, median, range and (n >= 5) IQM."""
    arr = as_array(values)
    n = int(arr.size)
    out = SampleSummary(n=n, mean=float(arr.mean()), confidence=confidence, median=float(np.median(arr)),
                  min=float(arr.min()), max=float(arr.max()), iqm=iqm(arr))
    if n >= 2:
        std = float(arr.std(ddof=1))
        sem = std / math.sqrt(n)
        half = float(sps().t.ppf(0.5 + confidence / 2, n - 1)) * sem
        out = out.model_copy(update={"std": std, "sem": sem, "ci_low": out.mean - half,
                                     "ci_high": out.mean + half})
    return out


class TwoSample(BaseModel):
    """Welch comparison of two independent arms; delta = mean(a) - mean(b)."""

    n_a: int
    n_b: int
    delta: float
    t: float | None = None
    df: float | None = None
    p: float | None = Field(default=None, description="two-sided Welch p-value")
    ci_low: float | None = Field(default=None, description="Welch CI of the difference of means")
    ci_high: float | None = None
    cohens_d: float | None = None
    reason: str | None = Field(default=None, description="why a statistic is missing")


def cohens_d(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float | None:
    """(mean a - mean b) / pooled sd; None when the pooled sd is zero or undefined."""
    x, y = as_array(a, "arm a"), as_array(b, "arm b")
    dof = x.size + y.size - 2
    if x.size < 2 or y.size < 2:
        return None
    pooled = math.sqrt(((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / dof)
    if pooled == 0:
        return None
    return float((x.mean() - y.mean()) / pooled)


def welch(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
          confidence: float = 0.95) -> TwoSample:
    """Welch t-test (unequal variances), its CI of the difference and Cohen's d."""
    x, y = as_array(a, "arm a"), as_array(b, "arm b")
    base = TwoSample(n_a=int(x.size), n_b=int(y.size), delta=float(x.mean() - y.mean()))
    if x.size < 2 or y.size < 2:
        return base.model_copy(update={"reason": "an arm has a single value: no variance, no test"})
    if x.var(ddof=1) == 0 and y.var(ddof=1) == 0:
        return base.model_copy(update={
            "reason": "both arms have zero variance: the seeds may not differ (check VP15)"})
    res = sps().ttest_ind(x, y, equal_var=False)
    ci = res.confidence_interval(confidence)
    return base.model_copy(update={
        "t": float(res.statistic), "df": float(res.df), "p": float(res.pvalue),
        "ci_low": float(ci.low), "ci_high": float(ci.high), "cohens_d": cohens_d(x, y)})


class Paired(BaseModel):
    """Paired t-test on per-item differences d = a - b."""

    n: int
    mean_diff: float
    sd_diff: float | None = None
    t: float | None = None
    df: int | None = None
    p: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str | None = None


def _pairs(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    x, y = as_array(a, "per-item scores a"), as_array(b, "per-item scores b")
    if x.size != y.size:
        raise InputError("per-item score lists have different lengths; a paired test needs one "
                         "score per item on both sides", observed=f"{x.size} vs {y.size}",
                         next_step="score the same items on both sides, or pass item ids to join on")
    diff: np.ndarray = x - y
    return diff


def paired_t(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
             confidence: float = 0.95) -> Paired:
    """Paired t on per-item scores (same items, same order)."""
    d = _pairs(a, b)
    base = Paired(n=int(d.size), mean_diff=float(d.mean()))
    if d.size < 2:
        return base.model_copy(update={"reason": "one item: no paired test"})
    sd = float(d.std(ddof=1))
    if sd == 0:
        return base.model_copy(update={"sd_diff": 0.0,
                                       "reason": "every item differs by the same amount: no variance"})
    res = sps().ttest_1samp(d, 0.0)
    ci = res.confidence_interval(confidence)
    return base.model_copy(update={"sd_diff": sd, "t": float(res.statistic), "df": int(d.size - 1),
                                   "p": float(res.pvalue), "ci_low": float(ci.low),
                                   "ci_high": float(ci.high)})


class Bootstrap(BaseModel):
    """Paired bootstrap over items of the mean difference a - b."""

    n: int
    resamples: int
    seed: int
    mean_diff: float
    ci_low: float
    ci_high: float
    frac_le_zero: float = Field(description="share of resamples whose mean diff is <= 0")
    frac_ge_zero: float = Field(description="share of resamples whose mean diff is >= 0")


def paired_bootstrap(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                     resamples: int = 10_000, seed: int = 0, confidence: float = 0.95) -> Bootstrap:
    """Resample item indices with replacement; percentile CI of the mean difference."""
    d = _pairs(a, b)
    mean = float(d.mean())
    if d.size < 2 or np.all(d == d[0]):
        le, ge = float(mean <= 0), float(mean >= 0)
        return Bootstrap(n=int(d.size), resamples=0, seed=seed, mean_diff=mean, ci_low=mean,
                         ci_high=mean, frac_le_zero=le, frac_ge_zero=ge)
    batch = max(1, _BOOTSTRAP_BATCH_ELEMENTS // d.size)
    res = sps().bootstrap((d,), np.mean, n_resamples=resamples, batch=batch, vectorized=True,
                        confidence_level=confidence, method="percentile",
                        rng=np.random.default_rng(seed))
    dist = res.bootstrap_distribution
    return Bootstrap(n=int(d.size), resamples=resamples, seed=seed, mean_diff=mean,
                     ci_low=float(res.confidence_interval.low),
                     ci_high=float(res.confidence_interval.high),
                     frac_le_zero=float(np.mean(dist <= 0)), frac_ge_zero=float(np.mean(dist >= 0)))


def holm(pvalues: Sequence[float], family_size: int | None = None) -> list[float]:
    """Holm step-down adjusted p-values, in the order given.

    `family_size` counts every comparison that was tried, including ones whose p-values
    are not passed (they are taken as the least significant, the conservative reading).
    """
    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return []
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise InputError("p-values must lie in [0, 1]", observed=p.tolist())
    m = max(int(family_size or 0), int(p.size))
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(p.size))
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    out = np.empty_like(p)
    out[order] = adjusted_sorted
    return [float(v) for v in out]


def t_critical(df: float, alpha: float = 0.05) -> float:
    """Two-sided critical t value, t_{1-alpha/2, df}."""
    return float(sps().t.ppf(1 - alpha / 2, df))


class Mde(BaseModel):
    """Minimum detectable effect of a two-arm seed comparison."""

    sd: float
    n: int
    n_other: int
    df: int
    alpha: float
    power: float
    t_alpha: float
    t_power: float
    mde: float = Field(description="t_crit(df) * sd * sqrt(1/n + 1/n_other): about 50 % power")
    mde_power: float = Field(description="(t_crit + t_power) * sd * sqrt(...): the conventional power form")


def mde(sd: float, n: int, n_other: int | None = None, alpha: float = 0.05,
        power: float = 0.8) -> Mde | None:
    """MDE for n runs per arm (n_other for the second arm); None when df < 1."""
    if not math.isfinite(sd) or sd < 0:
        raise InputError("sd must be a finite number >= 0", observed=sd)
    other = n if n_other is None else n_other
    df = n + other - 2
    if n < 1 or other < 1 or df < 1:
        return None
    factor = math.sqrt(1 / n + 1 / other)
    t_a, t_b = t_critical(df, alpha), float(sps().t.ppf(power, df))
    return Mde(sd=sd, n=n, n_other=other, df=df, alpha=alpha, power=power, t_alpha=t_a,
               t_power=t_b, mde=t_a * sd * factor, mde_power=(t_a + t_b) * sd * factor)


def n_for_effect(sd: float, effect: float, alpha: float = 0.05, power: float | None = None,
                 n_max: int = 1000) -> int | None:
    """Smallest equal n per arm whose MDE (power form when `power`) is <= |effect|."""
    effect = abs(effect)
    if effect == 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, n_max + 1):
        m = mde(sd, n, alpha=alpha, power=power or 0.5)
        if m is not None and (m.mde_power if power else m.mde) <= effect:
            return n
    return None


class SingleVsArm(BaseModel):
    """One value (a single-seed probe) against every draw of a multi-seed arm."""

    value: float
    n: int
    mean: float
    best: float
    worst: float
    vs_mean: float = Field(description="value - arm mean")
    vs_best: float = Field(description="value - the arm's best seed")
    vs_worst: float = Field(description="value - the arm's worst seed")
    inside_range: bool = Field(description="the value lies between the arm's worst and best seed")
    t: float | None = Field(default=None, description="prediction t: (value-mean)/(s*sqrt(1+1/n))")
    df: int | None = None
    p: float | None = None
    reason: str | None = None


def single_vs_arm(value: float, arm: Sequence[float] | np.ndarray, direction: Direction) -> SingleVsArm:
    """Deltas against the arm's mean, best and worst seed, plus a prediction-interval test."""
    x = as_array(arm, "baseline arm")
    if not math.isfinite(value):
        raise InputError("the single value is not finite", observed=value)
    best, worst = (x.max(), x.min()) if direction == "higher" else (x.min(), x.max())
    mean = float(x.mean())
    out = SingleVsArm(value=value, n=int(x.size), mean=mean, best=float(best), worst=float(worst),
                      vs_mean=value - mean, vs_best=value - float(best), vs_worst=value - float(worst),
                      inside_range=bool(x.min() <= value <= x.max()))
    if x.size < 2 or x.std(ddof=1) == 0:
        return out.model_copy(update={"reason": "the arm has no seed spread: no prediction test"})
    t = (value - mean) / (float(x.std(ddof=1)) * math.sqrt(1 + 1 / x.size))
    p = float(2 * sps().t.sf(abs(t), x.size - 1))
    return out.model_copy(update={"t": float(t), "df": int(x.size - 1), "p": p})


def robust_outliers(values: Sequence[float] | np.ndarray, threshold: float = 3.5) -> list[int]:
    """Indices whose modified z-score (median/MAD) exceeds `threshold`; needs n >= 4."""
    x = as_array(values)
    if x.size < 4:
        return []
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if mad > 0:
        z = 0.6745 * (x - med) / mad
    else:
        mean_ad = float(np.mean(np.abs(x - med)))
        if mean_ad == 0:
            return []
        z = (x - med) / (1.253314 * mean_ad)
    return [int(i) for i in np.flatnonzero(np.abs(z) > threshold)]
