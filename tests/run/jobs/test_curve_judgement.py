"""Curve verdicts read a running median, never single points (issue 31 item 5): a noisy but
healthy loss is never called diverged at any point of its run (false alarms counted over seeds
and over every prefix, as the patrol reads it), while true divergences (a climb that stays, NaN
after finite values) are caught; plateau and trend on captured real curves and planted ones."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from mcp_server.run.jobs.metrics import Points, parse_text, summarize
from tests.conftest import structured
from tests.run.jobs.conftest import Box

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "trainlogs"
SEEDS = range(20)


def captured(name: str, key: str = "loss") -> Points:
    return parse_text((LOGS / name).read_text())[key]


def decay(seed: int, *, n: int = 300, floor: float = 0.1, tau: float = 30, noise: str = "gauss",
          sigma: float = 0.05) -> Points:
    """A healthy loss: 2.4 decaying to `floor` with time constant `tau`, plus noise of size sigma
    (Gaussian, or uniform on +-sigma)."""
    rnd = random.Random(seed)
    draw = (lambda: rnd.gauss(0, sigma)) if noise == "gauss" else (lambda: rnd.uniform(-sigma, sigma))
    return [(float(t), floor + 2.3 * math.exp(-t / tau) + draw()) for t in range(1, n + 1)]


def false_divergences(pts: Points, start: int = 3) -> list[float]:
    """The steps at which a patrol reading the run so far would have been told `diverged`."""
    return [pts[n - 1][0] for n in range(start, len(pts) + 1) if summarize("loss", pts[:n]).diverged]


@pytest.mark.parametrize("noise", ["gauss", "uniform"])
def test_a_noisy_healthy_loss_is_never_called_diverged_at_any_step_over_seeds(noise: str) -> None:
    alarms = {seed: false_divergences(decay(seed, noise=noise)) for seed in SEEDS}
    assert sum(len(a) for a in alarms.values()) == 0, {s: a[:3] for s, a in alarms.items() if a}
    ends = [summarize("loss", decay(seed, noise=noise)) for seed in SEEDS]
    assert not any("diverged" in f for s in ends for f in s.flags)
    assert all(s.trend != "worsening" for s in ends), [s.trend for s in ends]
    assert sum(s.plateau for s in ends) >= 18, "the floor is reached: a plateau, read on the median"


def test_the_issue_case_keeps_its_raw_best_as_a_fact_but_judges_the_median() -> None:
    pts = decay(3)
    s = summarize("loss", pts)
    raw_best = min(v for _, v in pts)
    assert s.best == raw_best < 0.03 and s.last is not None and s.last > 3 * max(raw_best, 0.01)
    assert not s.diverged and s.flags == ["loss: plateau over the last 25 points"]


def test_one_lucky_dip_is_never_the_best_later_values_are_judged_against() -> None:
    pts = [(float(t), 1.0 + 0.01 * (t % 3)) for t in range(100)]
    pts[50] = (50.0, 0.1)
    s = summarize("loss", pts)
    assert s.best == 0.1 and s.best_step == 50 and not s.diverged


def test_a_still_improving_noisy_loss_is_never_called_a_plateau_over_seeds() -> None:
    ends = [summarize("loss", decay(seed, floor=0.1, tau=400, noise=noise)) for seed in SEEDS
            for noise in ("gauss", "uniform")]
    assert sum(s.plateau for s in ends) == 0
    assert all(s.trend != "worsening" for s in ends)
    assert sum(s.trend == "improving" for s in ends) >= 30, [s.trend for s in ends]


def climbs(seed: int, factor: float, stay: int) -> Points:
    """Healthy for 200 steps, then a climb to `factor`x the floor over 20 steps, held `stay` steps."""
    pts = decay(seed, n=200)
    rnd = random.Random(seed + 1000)
    for i in range(1, 21 + stay):
        level = 0.1 * (1 + (factor - 1) * min(i, 20) / 20)
        pts.append((200.0 + i, level * (1 + rnd.uniform(-0.2, 0.2))))
    return pts


def test_a_climb_to_5x_that_stays_is_flagged_within_half_a_window_and_never_before_it_starts() -> None:
    for seed in SEEDS:
        pts = climbs(seed, factor=5, stay=40)
        s = summarize("loss", pts)
        assert s.diverged and "diverged (running median" in s.flags[0], (seed, s.flags)
        first = false_divergences(pts)[0]
        assert 205 <= first <= 200 + 20 + 13, (seed, first)  # a 25-point median moves after 13 high points


def test_a_short_spike_is_not_a_divergence_but_the_same_jump_held_is() -> None:
    for seed in SEEDS:
        pts = decay(seed)
        spiked = pts[:-3] + [(x, 10 * v) for x, v in pts[-3:]]
        assert not summarize("loss", spiked).diverged, seed
        held = pts[:-20] + [(x, 0.1 * 5 + 0.01 * (i % 2)) for i, (x, _) in enumerate(pts[-20:])]
        assert summarize("loss", held).diverged, seed


def test_nan_after_finite_values_is_a_divergence_at_the_first_nan() -> None:
    pts = decay(1, n=100) + [(101.0, math.nan)]
    s = summarize("loss", pts)
    assert s.diverged and s.nan_count == 1 and s.first_nonfinite_step == 101
    assert s.flags[1].startswith("loss: diverged (went non-finite after finite values")


def test_a_captured_nan_run_is_flagged_from_its_first_nan() -> None:
    pts = captured("nanogpt-nan-after-finite.txt")
    assert [p[0] for p in pts if math.isnan(p[1])][0] == 3010
    assert false_divergences(pts)[0] == 3010
    assert summarize("loss", pts).first_nonfinite_step == 3010


@pytest.mark.parametrize("name", [
    "noprop-cifar100-epochs.txt", "gpt2-step-comma-pairs.txt", "nanogpt-iter-lines.txt",
    "hf-trainer-dicts-slurm-ranks.txt", "lightning-progress-bar.txt", "mmengine-epoch-train.txt",
    "detectron2-events.txt", "fairseq-legacy-running-average.txt"])
def test_captured_healthy_runs_are_never_called_diverged_at_any_point(name: str) -> None:
    assert false_divergences(captured(name, "total_loss" if "detectron2" in name else "loss")) == []


def test_a_captured_long_run_reads_improving_then_a_true_plateau_at_its_end() -> None:
    pts = captured("noprop-cifar100-epochs.txt")
    assert len(pts) == 652
    early = summarize("loss", pts[:120])  # epochs 1-120: still falling
    assert early.trend == "improving" and not early.plateau
    end = summarize("loss", pts)  # epochs 1300-1470: the loss sits at 0.4915-0.4930
    assert end.plateau and end.trend == "flat" and not end.diverged
    assert end.flags == ["loss: plateau over the last 25 points"]
    falling = summarize("loss", captured("nanogpt-iter-lines.txt"))
    assert falling.trend == "improving" and not falling.plateau


async def test_plot_run_calls_the_noisy_healthy_run_healthy(durable_box: Box, client) -> None:
    d = durable_box.durable / ".rgt" / "runs" / "noisy"
    d.mkdir(parents=True)
    (d / "log").write_text("".join(f"step {x:g} loss {v:.4f}\n" for x, v in decay(3)))
    (d / "workdir").write_text(str(durable_box.work))
    (d / "exit_code").write_text("0\n")
    (d / "ended_at").write_text("1\n")
    res = structured(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "noisy", "save": False}))
    (loss,) = res["runs"][0]["series"]
    assert loss["points"] == 300 and not loss["diverged"] and loss["trend"] != "worsening"
    assert not any("diverged" in f for f in res["flags"])
