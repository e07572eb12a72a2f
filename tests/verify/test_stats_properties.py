"""Property tests for verify/stats.py: results do not depend on which arm is named first,
on the unit the metric is in, or on the order seeds and items are listed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcp_server.verify import stats

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
value = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False).map(lambda v: round(v, 3))
arm = st.lists(value, min_size=2, max_size=25)
scale = st.floats(min_value=0.01, max_value=100.0)


def spread(xs: list[float]) -> bool:
    return float(np.std(xs)) > 1e-3


@SETTINGS
@given(arm, arm)
def test_welch_p_does_not_depend_on_which_arm_comes_first(a: list[float], b: list[float]) -> None:
    assume(spread(a) and spread(b))
    ab, ba = stats.welch(a, b), stats.welch(b, a)
    assert ab.p == pytest.approx(ba.p, rel=1e-9, abs=1e-12)
    assert ab.t == pytest.approx(-ba.t, rel=1e-9)  # type: ignore[operator]
    assert ab.delta == pytest.approx(-ba.delta, rel=1e-9, abs=1e-9)


@SETTINGS
@given(arm, arm, scale, value)
def test_welch_p_is_unchanged_by_the_metric_unit_and_offset(a: list[float], b: list[float], c: float,
                                                              shift: float) -> None:
    assume(spread(a) and spread(b))
    base = stats.welch(a, b)
    moved = stats.welch([c * x + shift for x in a], [c * x + shift for x in b])
    assert moved.p == pytest.approx(base.p, rel=1e-6, abs=1e-9)
    assert moved.delta == pytest.approx(c * base.delta, rel=1e-6, abs=1e-6)
    assert moved.cohens_d == pytest.approx(base.cohens_d, rel=1e-6, abs=1e-9)


@SETTINGS
@given(arm, arm, st.randoms(use_true_random=False))
def test_welch_and_summaries_ignore_the_order_seeds_are_listed(a: list[float], b: list[float], rnd) -> None:  # type: ignore[no-untyped-def]
    assume(spread(a) and spread(b))
    sa, sb = a[:], b[:]
    rnd.shuffle(sa)
    rnd.shuffle(sb)
    assert stats.welch(sa, sb).p == pytest.approx(stats.welch(a, b).p, rel=1e-9, abs=1e-12)
    assert stats.summarize(sa).std == pytest.approx(stats.summarize(a).std, rel=1e-9, abs=1e-12)
    iqm_a, iqm_sa = stats.summarize(a).iqm, stats.summarize(sa).iqm
    assert (iqm_a is None) == (iqm_sa is None) == (len(a) < 5)
    if iqm_a is not None:
        assert iqm_sa == pytest.approx(iqm_a, rel=1e-9, abs=1e-9)


@SETTINGS
@given(st.lists(st.tuples(value, value), min_size=3, max_size=40), st.randoms(use_true_random=False))
def test_paired_t_ignores_item_order_and_flips_sign_with_the_sides(pairs, rnd) -> None:  # type: ignore[no-untyped-def]
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    assume(spread([a - b for a, b in pairs]))
    base = stats.paired_t(x, y)
    shuffled = pairs[:]
    rnd.shuffle(shuffled)
    again = stats.paired_t([p[0] for p in shuffled], [p[1] for p in shuffled])
    assert again.p == pytest.approx(base.p, rel=1e-9, abs=1e-12)
    swapped = stats.paired_t(y, x)
    assert swapped.p == pytest.approx(base.p, rel=1e-9, abs=1e-12)
    assert swapped.t == pytest.approx(-base.t, rel=1e-9)  # type: ignore[operator]


@SETTINGS
@given(st.lists(st.tuples(value, value), min_size=3, max_size=30), scale)
def test_paired_bootstrap_ci_scales_with_the_unit_for_a_fixed_seed(pairs, c: float) -> None:  # type: ignore[no-untyped-def]
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    assume(spread([a - b for a, b in pairs]))
    base = stats.paired_bootstrap(x, y, resamples=1000, seed=3)
    scaled = stats.paired_bootstrap([c * v for v in x], [c * v for v in y], resamples=1000, seed=3)
    assert scaled.ci_low == pytest.approx(c * base.ci_low, rel=1e-6, abs=1e-6)
    assert scaled.ci_high == pytest.approx(c * base.ci_high, rel=1e-6, abs=1e-6)


@SETTINGS
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_holm_follows_its_p_values_whatever_order_they_are_passed_in(ps: list[float], rnd) -> None:  # type: ignore[no-untyped-def]
    adjusted = stats.holm(ps)
    order = list(range(len(ps)))
    rnd.shuffle(order)
    again = stats.holm([ps[i] for i in order])
    assert again == pytest.approx([adjusted[i] for i in order])
    assert all(a >= p - 1e-12 and a <= 1.0 for a, p in zip(adjusted, ps, strict=True))
    ranked = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(adjusted[i] <= adjusted[j] + 1e-12 for i, j in itertools.pairwise(ranked))


@SETTINGS
@given(st.floats(min_value=0.01, max_value=100), st.integers(min_value=2, max_value=50), scale)
def test_mde_scales_linearly_with_the_seed_sd_and_shrinks_with_n(sd: float, n: int, c: float) -> None:
    base, scaled, more = stats.mde(sd, n), stats.mde(c * sd, n), stats.mde(sd, n + 1)
    assert base is not None and scaled is not None and more is not None
    assert scaled.mde == pytest.approx(c * base.mde, rel=1e-9)
    assert more.mde < base.mde


@SETTINGS
@given(value, arm, st.randoms(use_true_random=False))
def test_single_seed_comparison_does_not_depend_on_the_order_of_baseline_seeds(v: float, a: list[float], rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = a[:]
    rnd.shuffle(shuffled)
    one, two = stats.single_vs_arm(v, a, "higher"), stats.single_vs_arm(v, shuffled, "higher")
    assert (one.best, one.worst, one.inside_range) == (two.best, two.worst, two.inside_range)
    assert one.vs_mean == pytest.approx(two.vs_mean, rel=1e-9, abs=1e-9)
