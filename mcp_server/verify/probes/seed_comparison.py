"""The typed record of one seed_variance comparison: which test the seed counts allowed
(Welch over seeds, a single seed against the baseline's draws, or none), the paired per-item
test when there are item scores, and the p-value that enters the Holm family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_server.verify.probes.result import Verdict


class PairedTest(BaseModel):
    """Paired t-test and paired bootstrap over per-item scores (sampling variance of the test items)."""

    n_items: int
    mean_diff: float | None
    t: float | None
    df: int | None
    p: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str | None
    bootstrap_ci_low: float | None
    bootstrap_ci_high: float | None
    bootstrap_frac_le_zero: float | None
    bootstrap_resamples: int
    bootstrap_seed: int
    raw_p: float | None = Field(default=None, exclude=True)


class WelchTest(BaseModel):
    """Both arms have >= 2 seeds: Welch over seeds, with the design's MDE."""

    delta: float | None
    welch_t: float | None
    welch_df: float | None
    p: float | None
    ci_low: float | None
    ci_high: float | None
    cohens_d: float | None
    reason: str | None
    mde: float | None
    mde_sd_noisier_arm: float | None


class SingleSeedTest(BaseModel):
    """A single-seed arm against the baseline's mean, best and worst seed (prediction t)."""

    value: float | None
    baseline_mean: float | None
    baseline_best: float | None
    baseline_worst: float | None
    vs_mean: float | None
    vs_best: float | None
    vs_worst: float | None
    inside_range: bool
    delta: float | None
    prediction_t: float | None
    p: float | None
    reason: str | None
    mde: float | None


class NoVarianceTest(BaseModel):
    """The baseline has a single seed: only the raw delta."""

    delta: float | None
    reason: str

    @property
    def p(self) -> float | None:
        return None

    @property
    def mde(self) -> float | None:
        return None


SeedTest = WelchTest | SingleSeedTest | NoVarianceTest
# Whose variance the verdict rests on; "item" when only the paired per-item test has a p-value.
VarianceSource = Literal["seed", "single_seed_vs_baseline_seeds", "none", "item"]


@dataclass
class Comparison:
    """One arm against the baseline; `raw_p` is the p-value that enters the Holm family."""

    arm: str
    baseline: str
    n_arm: int
    n_baseline: int
    variance: VarianceSource
    test: SeedTest
    raw_p: float | None
    warnings: list[str]
    paired: PairedTest | None = None
    p_holm: float | None = None
    verdict: Verdict = "unverified"

    def measurements(self) -> dict[str, Any]:
        """The comparison as reported: test numbers, then the paired test, Holm p and verdict."""
        out: dict[str, Any] = {"arm": self.arm, "baseline": self.baseline, "n_arm": self.n_arm,
                               "n_baseline": self.n_baseline, "variance": self.variance, **self.test.model_dump()}
        if self.paired is not None:
            out["paired"] = self.paired.model_dump()
        if self.raw_p is not None:
            out["p_holm"] = self.p_holm
        out["verdict"] = self.verdict
        return out
