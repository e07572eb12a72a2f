"""VP2 trajectory: read the curve, not the endpoint. Direction-aware shape classes:
non_finite, flat, best_at_first, diverged, peak_then_decline, plateau, still_improving."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server import lazy
from mcp_server.errors import InputError
from mcp_server.limits import IdStr
from mcp_server.verify.probes.directions import Direction, resolve
from mcp_server.verify.probes.refs import InputReader
from mcp_server.verify.probes.result import NextProbe, ProbeFinding, next_probe, num
from mcp_server.verify.probes.sources import KeyedSeries, load_series

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy.module("numpy")  # loaded by the first probe that computes, not at server start

CATALOG = ["VP2"]
QUESTION = "Is the gap a real effect, or instability / under-convergence read off an endpoint?"
HEALTHY = ("plateau", "still_improving")
_SAMPLE_POINTS = 20


class Curve(KeyedSeries):
    """A metric history: inline values (+ optional steps in `keys`), or a CSV/JSONL column
    (+ `key_column` for the step). Empty cells are 'not logged'; 'nan' cells are NaN."""


class TrajectoryInputs(BaseModel):
    """Per-step or per-epoch histories of a metric for a run and, optionally, its control."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["trajectory"]
    run: Curve
    control: Curve | None = None
    grad_norm: Curve | None = Field(default=None, description="the run's gradient-norm history, if logged")
    metric: IdStr | None = Field(default=None, description="metric name; sets the direction when known")
    direction: Direction | None = Field(default=None, description="higher or lower is better (required "
                                        "when the metric name is not in the direction table)")
    chance: float | None = Field(default=None, description="the metric's chance floor (ln B, 1/k, ln C)")
    decline_fraction: float = Field(default=0.2, gt=0, lt=1, description="a fall from the best by more "
                                    "than this share of the curve's range counts as a decline")
    plateau_fraction: float = Field(default=0.02, gt=0, lt=1, description="last-third gain below this "
                                    "share of the range counts as a plateau")
    gap_fraction: float = Field(default=0.02, gt=0, lt=1, description="run-vs-control gap below this "
                                "share of the control's range counts as tracking the control")
    spike_factor: float = Field(default=10.0, gt=1, description="grad-norm above this multiple of its "
                                "median is a spike")


class Shape(BaseModel):
    points: int
    shape: str
    first: float | None = None
    last: float | None = None
    last_step: float | None = None
    best: float | None = None
    best_step: float | None = None
    range: float | None = None
    first_nonfinite_step: float | None = None


def classify(values: list[float | None], steps: list[float], direction: Direction,
             decline: float, plateau: float) -> Shape:
    """Shape of one curve (None entries were not logged and are skipped)."""
    pts = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None]
    bad = next((i for i, (_, v) in enumerate(pts) if not math.isfinite(v)), None)
    first_bad = pts[bad][0] if bad is not None else None
    finite = pts[:bad] if bad is not None else pts
    if not finite:
        return Shape(points=len(pts), shape="non_finite" if bad is not None else "empty",
                     first_nonfinite_step=first_bad)
    v = np.array([p[1] for p in finite])
    u = v if direction == "higher" else -v
    ib = int(np.argmax(u))
    span = float(v.max() - v.min())
    out = Shape(points=len(pts), shape="", first=float(v[0]), last=float(v[-1]), last_step=finite[-1][0],
                best=float(v[ib]), best_step=finite[ib][0], range=span, first_nonfinite_step=first_bad)
    out.shape = _shape_class(u, ib, span, bad is not None, decline, plateau, float(np.abs(v).mean()))
    return out


def _shape_class(u: np.ndarray, ib: int, span: float, nonfinite: bool, decline: float,
                 plateau: float, scale: float) -> str:
    if nonfinite:
        return "non_finite"
    if u.size < 3:
        return "too_short"
    if span <= 1e-12 * max(1.0, scale):
        return "flat"
    if ib == 0:
        return "best_at_first"
    if u[ib] - u[-1] > decline * span:
        return "diverged" if u[-1] < u[0] else "peak_then_decline"
    k = max(1, u.size // 3)
    gain = float(u[-k:].max() - u[:-k].max())
    return "still_improving" if gain > plateau * span else "plateau"


async def _curve(src: Curve, reader: InputReader, what: str) -> tuple[list[float | None], list[float]]:
    vals, keys = await load_series(src, reader, what)
    if keys is None:
        return vals, [float(i) for i in range(len(vals))]
    try:
        steps = [float(k) if k is not None and k != "" else float(i) for i, k in enumerate(keys)]
    except (TypeError, ValueError):
        raise InputError(f"{what}: steps must be numbers", observed=str(keys[:5])) from None
    return vals, steps


def _sample(values: list[float | None], steps: list[float]) -> list[list[float | None]]:
    """About 20 evenly spaced [step, value] points (null where non-finite or not logged)."""
    if not values:
        return []
    idx = np.unique(np.linspace(0, len(values) - 1, min(len(values), _SAMPLE_POINTS)).astype(int))
    out: list[list[float | None]] = []
    for i in idx:
        v = values[i]
        out.append([steps[i], num(v) if v is not None and math.isfinite(v) else None])
    return out


class GradNormSpikes(BaseModel):
    """Spikes in the gradient-norm history (only the point count when none was finite)."""

    grad_norm_points: int
    grad_norm_median: float | None = None
    grad_norm_max_over_median: float | None = None
    grad_norm_spikes: int = 0
    grad_norm_nonfinite: int | None = None


def _spikes(grad: list[float | None], factor: float) -> GradNormSpikes:
    g = np.array([x for x in grad if x is not None and math.isfinite(x)])
    if g.size == 0:
        return GradNormSpikes(grad_norm_points=0)
    med = float(np.median(g))
    ratio = float(g.max() / med) if med > 0 else None
    count = int(np.sum(g > factor * med)) if med > 0 else 0
    return GradNormSpikes(grad_norm_points=int(g.size), grad_norm_median=num(med),
                          grad_norm_max_over_median=num(ratio), grad_norm_spikes=count,
                          grad_norm_nonfinite=sum(1 for x in grad if x is not None and not math.isfinite(x)))


async def run(inp: TrajectoryInputs, reader: InputReader) -> ProbeFinding:
    direction, notes = resolve(inp.metric, inp.direction)
    if direction is None:
        raise InputError("the metric's direction is unknown; it is never assumed",
                         observed=inp.metric, expected="direction: 'higher' or 'lower'")
    vals, steps = await _curve(inp.run, reader, "run curve")
    shape = classify(vals, steps, direction, inp.decline_fraction, inp.plateau_fraction)
    m: dict[str, Any] = {"metric": inp.metric, "direction": direction,
                         "run": _dump(shape), "run_sample": _sample(vals, steps)}
    spikes = 0
    if inp.grad_norm is not None:
        g, _ = await load_series(inp.grad_norm, reader, "grad-norm curve")
        grad = _spikes(g, inp.spike_factor)
        m.update(grad.model_dump(exclude_unset=True))
        spikes = grad.grad_norm_spikes
    name = inp.metric or "metric"
    found = _unhealthy(shape, name, m, inp, direction, spikes)
    if found is None and inp.control is None:
        found = _alone(shape, name, m)
    if found is None:
        assert inp.control is not None
        cvals, csteps = await _curve(inp.control, reader, "control curve")
        cshape = classify(cvals, csteps, direction, inp.decline_fraction, inp.plateau_fraction)
        m.update(control=_dump(cshape), control_sample=_sample(cvals, csteps))
        found = _versus(shape, cshape, (vals, steps), (cvals, csteps), name, m, inp, direction)
    return found.model_copy(update={"warnings": notes + found.warnings})


def _dump(s: Shape) -> dict[str, Any]:
    return {k: (num(v) if isinstance(v, float) else v) for k, v in s.model_dump().items()}


def _chance_hit(s: Shape, chance: float | None, direction: Direction) -> bool:
    if chance is None or s.best is None:
        return False
    tol = 0.05 * max(abs(chance), 1e-12)
    return s.best <= chance + tol if direction == "higher" else s.best >= chance - tol


def _unhealthy(s: Shape, name: str, m: dict[str, Any], inp: TrajectoryInputs, d: Direction,
               spikes: int) -> ProbeFinding | None:
    if s.shape == "non_finite":
        return ProbeFinding(measurements=m, verdict="instability",
                            reason=f"non-finite value at step {s.first_nonfinite_step}",
                            disclosure=f"The {name} curve becomes NaN/inf at step {num(s.first_nonfinite_step)}: the "
                            "run diverged, so its endpoint is not a result; retry the identical config and check "
                            "the loss math.", next_probe=_np_sh2(name))
    if s.shape in ("empty", "too_short"):
        return ProbeFinding(measurements=m, verdict="unverified", reason=f"{s.points} logged point(s)",
                            disclosure=f"The {name} history has {s.points} point(s): too few to read a trajectory.")
    if s.shape == "flat":
        return ProbeFinding(measurements=m, verdict="bug", reason="the metric never changed",
                            disclosure=f"The {name} curve is constant at {num(s.last)} over {s.points} points: the "
                            "metric is not following the model (scorer, logging or a dead model), not a result.",
                            next_probe=next_probe("SH1", "smoke-hidden failure", "find why the metric never moves"))
    if _chance_hit(s, inp.chance, d):
        return ProbeFinding(measurements=m, verdict="bug",
                                 reason=f"best value {num(s.best)} sits at chance {inp.chance}",
                            disclosure=f"The {name} curve never leaves its chance floor ({inp.chance}): nothing was "
                            "learned that the metric can see; do not tune against it.",
                            next_probe=next_probe("VP9", "localize where the signal dies",
                                                  "probe the input and each stage for content"))
    if s.shape == "best_at_first":
        extra = f"; grad-norm spikes above {inp.spike_factor}x its median: {spikes}" if spikes else ""
        return ProbeFinding(measurements=m, verdict="instability", reason="best value at the first point" + extra,
                            disclosure=f"The {name} curve never improves on its first point{extra}: the run is "
                            "unstable or broken, not a measured effect; retry the identical config before "
                            "reading any gap.", next_probe=next_probe(
                                "VP4", "instability vs effect", "retry the identical config, more seeds",
                                "seed_variance"))
    if s.shape in ("diverged", "peak_then_decline"):
        return ProbeFinding(measurements=m, verdict="instability",
                            reason=f"{s.shape}: best {num(s.best)} at step {num(s.best_step)}, last {num(s.last)}",
                            disclosure=f"The {name} curve peaks at step {num(s.best_step)} and then falls away "
                            f"({num(s.best)} to {num(s.last)}): under-converged or unstable, so the endpoint "
                            "is not the run's result; reproduce before comparing.",
                            next_probe=next_probe("VP3", "reproduce with backup", "rerun the identical config "
                                                  "into a new location", "seed_variance"))
    return None


def _np_sh2(name: str) -> NextProbe:
    if "loss" in name.lower():
        return next_probe("SH2", "loss unbounded below / non-finite", "inspect the loss math")
    return next_probe("VP4", "instability vs effect", "retry the identical config", "seed_variance")


def _alone(s: Shape, name: str, m: dict[str, Any]) -> ProbeFinding:
    warnings = []
    if s.shape == "still_improving":
        warnings.append(f"{name} is still improving at the last point: the endpoint understates the "
                        "converged value (undertraining, not a bug)")
    return ProbeFinding(measurements=m, verdict="clean", reason=f"healthy shape ({s.shape}), no control to compare",
                        disclosure=f"The {name} curve is healthy ({s.shape.replace('_', ' ')}); best {num(s.best)} "
                        f"at step {num(s.best_step)}, last {num(s.last)}.", warnings=warnings,
                        next_probe=next_probe("VP4", "seed variance", "measure run-to-run noise before "
                                              "claiming a gap", "seed_variance"))


def _at(values: list[float | None], steps: list[float], end: float) -> float | None:
    found = [v for s, v in zip(steps, values, strict=True) if v is not None and s <= end]
    return found[-1] if found else None


def _versus(s: Shape, c: Shape, run: tuple[list[float | None], list[float]],
            ctl: tuple[list[float | None], list[float]], name: str, m: dict[str, Any],
            inp: TrajectoryInputs, d: Direction) -> ProbeFinding:
    if c.shape not in HEALTHY:
        return ProbeFinding(measurements=m, verdict="unverified", reason=f"the control curve is {c.shape}",
                            disclosure=f"The control's {name} curve is itself {c.shape.replace('_', ' ')}: a gap "
                            "against an unhealthy control says nothing about the change.",
                            next_probe=next_probe("VP3", "reproduce with backup", "rerun the control", "seed_variance"))
    end = min(s.last_step or 0.0, c.last_step or 0.0)
    rv, cv = _at(*run, end), _at(*ctl, end)
    warnings = []
    if s.last_step != c.last_step:
        warnings.append(f"curves end at different steps ({num(s.last_step)} vs {num(c.last_step)}); "
                        f"compared at step {num(end)}, the common budget")
    if rv is None or cv is None:
        return ProbeFinding(measurements=m, verdict="unverified", reason="no common step to compare at",
                            disclosure="Run and control share no logged step: their endpoints are at different "
                            "budgets.")
    gap = rv - cv
    signed = gap if d == "higher" else -gap
    tol = inp.gap_fraction * (c.range or 0.0)
    m.update(compared_at_step=num(end), run_value=num(rv), control_value=num(cv), gap=num(gap),
             gap_tolerance=num(tol))
    if abs(gap) <= tol:
        return ProbeFinding(measurements=m, verdict="clean", reason="the run tracks its control", warnings=warnings,
                            disclosure=f"Run and control {name} curves agree to within {num(tol)} at step {num(end)}.",
                            next_probe=next_probe("VP4", "seed variance", "check the agreement is not noise",
                                                  "seed_variance"))
    kind = "higher ceiling" if signed > 0 else ("lower ceiling" if s.shape == "plateau" else "gentler slope")
    return ProbeFinding(measurements=m | {"effect_shape": kind}, verdict="effect", warnings=warnings,
                        reason=f"healthy run and control; {kind}, gap {num(gap)} beyond {num(tol)}",
                        disclosure=f"Both {name} curves are healthy and the run shows a {kind} (gap {num(gap)} at "
                        f"step {num(end)}); this is one run per arm, so whether the gap exceeds seed noise is not yet "
                        "shown.",
                        next_probe=next_probe("VP4", "seed variance", "test the gap against run-to-run noise",
                                              "seed_variance"))
