"""Statistics §5: minimum detectable effect of a seed comparison, before spending GPU-hours.

MDE = t_crit(df) * sd * sqrt(2/n), df = 2n - 2, floored by the noisier arm (more runs of
the quiet arm do not lower it); the 80 %-power form adds t_power(df)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.errors import InputError
from mcp_server.verify import stats
from mcp_server.verify.probes.refs import InputReader
from mcp_server.verify.probes.result import ProbeFinding, next_probe, num

CATALOG = ["VP11"]
QUESTION = "Can this many seeds per arm detect the effect you would act on?"


class MdeInputs(BaseModel):
    """Seed spread (an sd, or the per-seed values themselves) and runs per arm."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["mde"]
    sd: float | None = Field(default=None, ge=0, description="across-seed sd of the baseline")
    sd_other: float | None = Field(default=None, ge=0, description="across-seed sd of the other arm, if known")
    baseline_values: list[float] | None = Field(default=None, max_length=10_000,
                                                description="per-seed baseline values (sd and n from them)")
    other_values: list[float] | None = Field(default=None, max_length=10_000,
                                             description="per-seed values of the other arm")
    n: int | None = Field(default=None, ge=1, le=100_000, description="runs per arm (default: from the values)")
    n_other: int | None = Field(default=None, ge=1, le=100_000, description="runs of the other arm, when unequal")
    claimed_effect: float | None = Field(default=None, description="the effect claimed or that you would act on")
    alpha: float = Field(default=0.05, gt=0, lt=0.5, description="two-sided significance level")
    power: float = Field(default=0.8, gt=0.5, lt=1, description="power for the power form")

    @model_validator(mode="after")
    def _some_spread(self) -> MdeInputs:
        if self.sd is None and self.baseline_values is None:
            raise ValueError("give `sd` or `baseline_values`")
        return self


def _spread(inp: MdeInputs) -> tuple[float | None, int | None, float | None, int | None]:
    sd, n = inp.sd, inp.n
    if inp.baseline_values is not None:
        s = stats.summarize(inp.baseline_values)
        sd = s.std if sd is None else sd
        n = n or s.n
    sd_o, n_o = inp.sd_other, inp.n_other
    if inp.other_values is not None:
        s = stats.summarize(inp.other_values)
        sd_o = s.std if sd_o is None else sd_o
        n_o = n_o or s.n
    return sd, n, sd_o, n_o


async def run(inp: MdeInputs, reader: InputReader) -> ProbeFinding:
    sd, n, sd_o, n_o = _spread(inp)
    if n is None:
        raise InputError("runs per arm unknown", expected="`n`, or per-seed `baseline_values`")
    m: dict[str, Any] = {"sd_baseline": num(sd), "sd_other": num(sd_o), "n": n, "n_other": n_o or n,
                         "alpha": inp.alpha, "power": inp.power, "claimed_effect": inp.claimed_effect}
    if sd is None:
        return ProbeFinding(measurements=m, verdict="unverified", reason="a single baseline seed has no sd",
                            disclosure="With one baseline seed there is no seed spread, so no detectable effect "
                            "can be computed; run at least 2 (better 3-5) seeds per arm.")
    used = max(sd, sd_o or 0.0)
    res = stats.mde(used, n, n_o, inp.alpha, inp.power)
    if res is None:
        return ProbeFinding(measurements=m, verdict="unverified", reason="degrees of freedom < 1",
                            disclosure="One run per arm leaves no degrees of freedom: the design cannot tell "
                            "any effect from noise; run more seeds.")
    m.update(sd_used=num(used), sd_from="noisier arm" if sd_o is not None and sd_o > sd else "baseline",
             df=res.df, t_crit=num(res.t_alpha), t_power=num(res.t_power), mde=num(res.mde),
             mde_power=num(res.mde_power))
    if used == 0:
        return ProbeFinding(measurements=m, verdict="unverified", reason="zero spread across seeds",
                            disclosure="Every seed gave the same value: either the runs are bit-deterministic or "
                            "the seeds never reached the run; check the seeds differ before trusting an MDE of 0.",
                            next_probe=next_probe("VP15", "checkpoint determinism", "confirm the seeds took effect",
                                                  "checkpoint_identity"))
    if inp.claimed_effect is None:
        return ProbeFinding(measurements=m, verdict="not_applicable", reason="no claimed effect to test against",
                            disclosure=f"With n = {n} per arm (sd {num(used)}), differences below {num(res.mde)} "
                            f"({num(res.mde_power)} at {inp.power:.0%} power) cannot be told from seed noise.")
    return _against_claim(inp, m, res, used)


def _against_claim(inp: MdeInputs, m: dict[str, Any], res: stats.Mde, sd: float) -> ProbeFinding:
    effect = abs(inp.claimed_effect or 0.0)
    need = stats.n_for_effect(sd, effect, inp.alpha)
    need_p = stats.n_for_effect(sd, effect, inp.alpha, inp.power)
    m.update(n_needed=need, n_needed_at_power=need_p)
    if effect < res.mde:
        more = f"about {need} seeds per arm would" if need else "no practical seed count would"
        return ProbeFinding(
            measurements=m, verdict="underpowered", reason=f"claimed {effect} < MDE {num(res.mde)}",
            disclosure=f"With n = {res.n} seeds per arm and seed sd {num(sd)}, the minimum detectable effect "
            f"is {num(res.mde)} (t = {num(res.t_alpha)}, df = {res.df}), larger than the claimed {effect}: "
            f"the design cannot resolve it (underpowered, not null); {more} resolve it.",
            next_probe=next_probe("VP11", "metric & statistical integrity", "add seeds or go paired on "
                                       "per-item scores", "seed_variance"))
    warnings = []
    if effect < res.mde_power:
        warnings.append(f"the claim clears the MDE {num(res.mde)} but not the {inp.power:.0%}-power MDE "
                        f"{num(res.mde_power)}: a true effect this size is missed often; "
                        f"{need_p} seeds per arm reach {inp.power:.0%} power")
    return ProbeFinding(
        measurements=m, verdict="clean", reason=f"claimed {effect} >= MDE {num(res.mde)}", warnings=warnings,
        disclosure=f"With n = {res.n} seeds per arm the minimum detectable effect is {num(res.mde)}; an effect "
        f"of {effect} is within what the design can resolve (still to be tested against the seeds).",
        next_probe=next_probe("VP4", "seed variance", "test the observed delta", "seed_variance"))
