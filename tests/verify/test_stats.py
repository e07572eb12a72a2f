"""Known-answer tables for verify/stats.py: the worked examples of the methodology,
scipy reference values for Welch and paired tests, and the formulas written out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mcp_server.errors import InputError
from mcp_server.verify import stats

# Welch's textbook example (two samples of 15): t = -2.46, df = 25.0, p = 0.021.
WELCH_A = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
WELCH_B = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
PAIRED_X = [0.81, 0.62, 0.93, 0.55, 0.77, 0.68, 0.90, 0.71]
PAIRED_Y = [0.78, 0.60, 0.91, 0.50, 0.70, 0.69, 0.85, 0.66]


def test_mde_reproduces_the_worked_example_sd_3_42_three_seeds() -> None:
    m = stats.mde(3.42, 3)
    assert m is not None
    assert m.df == 4
    assert m.t_alpha == pytest.approx(2.776, abs=5e-4)
    assert round(m.mde, 2) == 7.75
    assert m.mde == pytest.approx(2.7764451 * 3.42 * math.sqrt(2 / 3), rel=1e-6)


def test_mde_power_form_adds_the_power_quantile() -> None:
    m = stats.mde(3.42, 3, power=0.8)
    assert m is not None
    assert m.t_power == pytest.approx(0.9409646, rel=1e-5)
    assert m.mde_power == pytest.approx((2.7764451 + 0.9409646) * 3.42 * math.sqrt(2 / 3), rel=1e-6)


@pytest.mark.parametrize(("n", "n_other"), [(1, 1)])
def test_mde_with_no_degrees_of_freedom_is_none_not_a_number(n: int, n_other: int) -> None:
    assert stats.mde(3.42, n, n_other) is None


def test_single_seed_probe_against_each_baseline_draw_matches_the_worked_example() -> None:
    s = stats.single_vs_arm(49.12, [42.63, 49.30, 47.26], "higher")
    assert round(s.vs_worst, 2) == 6.49
    assert round(s.vs_mean, 2) == 2.72
    assert round(s.vs_best, 2) == -0.18
    assert round(s.mean, 2) == 46.40
    assert s.inside_range


def test_single_seed_best_and_worst_follow_the_direction() -> None:
    s = stats.single_vs_arm(0.30, [0.25, 0.40, 0.35], "lower")
    assert (s.best, s.worst) == (0.25, 0.40)
    assert s.vs_best == pytest.approx(0.05) and s.vs_worst == pytest.approx(-0.10)


def test_welch_matches_scipy_reference_values_and_the_satterthwaite_formula() -> None:
    w = stats.welch(WELCH_A, WELCH_B)
    assert w.t == pytest.approx(-2.455356398286006, rel=1e-12)
    assert w.p == pytest.approx(0.021378001462866992, rel=1e-10)
    assert w.df == pytest.approx(24.988529290231416, rel=1e-12)
    assert (w.ci_low, w.ci_high) == pytest.approx((-3.984096267140929, -0.3492370661924069), rel=1e-10)
    a, b = np.array(WELCH_A), np.array(WELCH_B)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    assert w.t == pytest.approx((a.mean() - b.mean()) / math.sqrt(va + vb), rel=1e-12)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    assert w.df == pytest.approx(df, rel=1e-12)


def test_cohens_d_uses_the_pooled_sd() -> None:
    a, b = np.array(WELCH_A), np.array(WELCH_B)
    pooled = math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))
    assert stats.cohens_d(a, b) == pytest.approx((a.mean() - b.mean()) / pooled, rel=1e-12)


def test_paired_t_matches_scipy_reference_values_and_the_formula() -> None:
    p = stats.paired_t(PAIRED_X, PAIRED_Y)
    assert p.t == pytest.approx(3.9485325237243702, rel=1e-12)
    assert p.p == pytest.approx(0.005542416737207535, rel=1e-10)
    assert (p.ci_low, p.ci_high) == pytest.approx((0.014039846244527317, 0.055960153755472745), rel=1e-10)
    d = np.array(PAIRED_X) - np.array(PAIRED_Y)
    assert p.t == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(d.size)), rel=1e-12)
    assert p.df == 7


def test_paired_bootstrap_ci_brackets_the_mean_difference_and_is_reproducible() -> None:
    one = stats.paired_bootstrap(PAIRED_X, PAIRED_Y, resamples=5000, seed=7)
    two = stats.paired_bootstrap(PAIRED_X, PAIRED_Y, resamples=5000, seed=7)
    assert one == two
    assert one.ci_low < one.mean_diff < one.ci_high
    assert one.frac_le_zero < 0.05 and one.frac_ge_zero > 0.95


def test_paired_bootstrap_of_constant_differences_is_a_point_not_a_resample() -> None:
    b = stats.paired_bootstrap([1.0, 2.0, 3.0], [0.5, 1.5, 2.5])
    assert (b.ci_low, b.ci_high, b.resamples) == (0.5, 0.5, 0)


def test_holm_adjusts_step_down_and_keeps_the_order_given() -> None:
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.2, 0.001]) == pytest.approx([0.2, 0.002])


def test_holm_family_size_counts_comparisons_whose_p_values_were_not_passed() -> None:
    assert stats.holm([0.01], family_size=10) == pytest.approx([0.1])
    assert stats.holm([0.2], family_size=10) == [1.0]


def test_summary_t_interval_and_iqm_only_from_five_values() -> None:
    s = stats.summarize([42.63, 49.30, 47.26])
    assert s.std == pytest.approx(3.4178, abs=1e-4)
    half = 4.302652729911275 * s.std / math.sqrt(3)
    assert (s.ci_low, s.ci_high) == pytest.approx((s.mean - half, s.mean + half), rel=1e-9)
    assert s.iqm is None
    assert stats.summarize([1, 2, 3, 4, 5, 6, 7, 8, 100]).iqm == 5.0


def test_a_single_value_has_no_std_no_interval_and_no_test() -> None:
    s = stats.summarize([0.7])
    assert (s.std, s.sem, s.ci_low, s.ci_high) == (None, None, None, None)
    w = stats.welch([0.7], [0.6, 0.65])
    assert w.p is None and w.reason and "single value" in w.reason


def test_zero_variance_in_both_arms_gives_no_p_value_and_says_why() -> None:
    w = stats.welch([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert w.p is None and w.t is None and "zero variance" in (w.reason or "")
    assert w.delta == -1.0


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf"), 2.0]])
def test_empty_or_non_finite_values_are_a_clear_input_error(bad: list[float]) -> None:
    with pytest.raises(InputError) as info:
        stats.summarize(bad)
    assert "empty" in str(info.value) or "non-finite" in str(info.value)


def test_per_item_lists_of_different_lengths_are_refused_for_pairing() -> None:
    with pytest.raises(InputError, match="different lengths"):
        stats.paired_t([1.0, 2.0, 3.0], [1.0, 2.0])


def test_n_for_effect_finds_the_seed_count_the_worked_example_needs() -> None:
    assert stats.n_for_effect(3.42, 9.9) == 3
    assert stats.n_for_effect(3.42, 7.0) == 4
    m = stats.mde(3.42, stats.n_for_effect(3.42, 5.0, power=0.8) or 0, power=0.8)
    assert m is not None and m.mde_power <= 5.0


def test_robust_outliers_flag_a_collapsed_seed_among_healthy_ones() -> None:
    assert stats.robust_outliers([47.0, 48.0, 46.0, 47.5, 12.0]) == [4]
    assert stats.robust_outliers([47.0, 48.0, 46.0]) == []
    assert stats.robust_outliers([47.0, 48.0, 46.0, 47.5, 46.5]) == []
