"""Verdicts from paired comparisons with 95% intervals: the three outcomes, both interval
methods, a bootstrap of a statistic, determinism."""

import numpy as np
import pytest
from scipy import stats
from scipy.stats import spearmanr

from nearid.verdicts import (Verdict, bootstrap_statistic, claim, decide, decide_test, direction_p,
                             fdr_verdicts, fieller_interval, mean_interval, paired_difference, under_test)


def test_decide_three_ways():
    assert decide(0.1, 0.3) == "holds"
    assert decide(-0.3, -0.1) == "fails"
    assert decide(-0.1, 0.3) == "inconclusive"
    assert decide(0.1, 0.3, threshold=0.2) == "inconclusive"
    assert decide(float("nan"), 1.0) == "inconclusive"


def test_paired_difference_outcomes():
    rng = np.random.default_rng(0)
    base = rng.normal(size=400)
    assert paired_difference(base + 0.5, base).verdict == "holds"
    assert paired_difference(base - 0.5, base).verdict == "fails"
    tiny = paired_difference(base + 1e-4 * rng.normal(size=400), base)
    assert tiny.verdict == "inconclusive" and tiny.low < 0 < tiny.high


def test_a_difference_in_the_fourth_decimal_does_not_decide_a_claim():
    # the fragile count of the review: 0.40191 vs 0.40207 over two seeds
    v = paired_difference([0.40191, 0.4020], [0.40207, 0.4019], method="t")
    assert v.verdict == "inconclusive"


def test_t_interval_matches_scipy():
    x = np.array([0.1, 0.3, 0.2, 0.25])
    est, low, high = mean_interval(x, method="t")
    from scipy import stats

    ref = stats.t.interval(0.95, 3, loc=x.mean(), scale=stats.sem(x))
    assert est == pytest.approx(x.mean()) and (low, high) == pytest.approx(ref)


def test_bootstrap_is_seeded_and_covers_the_mean():
    x = np.random.default_rng(1).exponential(size=300)
    a, b = mean_interval(x, seed=3), mean_interval(x, seed=3)
    assert a == b and a[1] < x.mean() < a[2]
    with pytest.raises(ValueError, match="method"):
        mean_interval(x, method="jackknife")


def test_single_value_is_inconclusive():
    v = paired_difference([0.7])
    assert v.verdict == "inconclusive" and v.n == 1


def test_bootstrap_of_a_correlation():
    rng = np.random.default_rng(2)
    x = rng.normal(size=60)
    rho = lambda a, b: spearmanr(a, b).statistic  # noqa: E731
    assert bootstrap_statistic(rho, x, x + 0.3 * rng.normal(size=60)).verdict == "holds"
    assert bootstrap_statistic(rho, x, rng.normal(size=60)).verdict == "inconclusive"
    with pytest.raises(ValueError, match="same number of rows"):
        bootstrap_statistic(rho, x, x[:-1])


def test_claim_record_is_json_ready():
    import json

    rec = claim(Verdict(0.2, 0.1, 0.3, "holds", 10, "t"), "AE + ICA beats AE", section="ch05-verdict",
                paper=0.26)
    assert json.loads(json.dumps(rec))["verdict"] == "holds"
    assert set(rec) >= {"claim", "estimate", "low", "high", "verdict", "paper", "section"}


def test_minimum_detectable_effect_from_the_interval():
    from nearid.verdicts import minimum_detectable_effect as mde

    # a normal interval of half-width 1.96 is SE 1: MDE = 1.96 + 0.84
    assert mde(-1.96, 1.96, 1000, "bootstrap") == pytest.approx(2.8016, abs=1e-4)
    # Student's t with 2 df: half-width / t_0.975 = SE, times (t_0.975 + t_0.8)
    assert mde(0.0, 2 * 4.3027, 3, "t") == pytest.approx(4.3027 + 1.0607, abs=1e-3)
    assert mde(0.0, float("inf"), 3, "t") == float("inf")
    assert np.isnan(mde(0.0, 1.0, 1, "t")) and np.isnan(mde(float("nan"), 1.0, 5, "t"))


@pytest.mark.parametrize("low, high, test, word", [
    (-0.05, 0.05, "superiority", "inconclusive"),
    (-0.05, -0.01, "superiority", "fails"), (0.01, 0.05, "superiority", "holds"),
    (-0.05, 0.01, "non_inferiority", "holds"),  # above -0.06: comparable
    (-0.10, 0.01, "non_inferiority", "inconclusive"), (-0.12, -0.07, "non_inferiority", "fails"),
    (-0.05, 0.05, "equivalence", "holds"), (-0.05, 0.08, "equivalence", "inconclusive"),
    (0.07, 0.09, "equivalence", "fails"), (-0.09, -0.07, "equivalence", "fails"),
    (float("-inf"), float("inf"), "equivalence", "inconclusive"),
])
def test_decide_under_each_test(low, high, test, word):
    assert decide_test(low, high, test, 0.0 if test == "superiority" else 0.06) == word


def test_under_test_keeps_the_interval_and_records_the_bound():
    v = paired_difference([-0.03, -0.02, -0.04, -0.01], method="t")
    assert v.verdict == "fails"
    ni = under_test(v, "non_inferiority", 0.06)
    assert (ni.estimate, ni.low, ni.high, ni.n) == (v.estimate, v.low, v.high, v.n)
    assert ni.verdict == "holds" and ni.threshold == -0.06
    rec = claim(ni, "comparable", section="s", test="non_inferiority", margin=0.06)
    assert rec["test"] == "non_inferiority" and rec["margin"] == 0.06
    assert "test" not in claim(v, "higher", section="s")  # records of other chapters are unchanged
    with pytest.raises(ValueError, match="non-negative"):
        decide_test(0, 1, "equivalence", -0.1)
    with pytest.raises(ValueError, match="test"):
        decide_test(0, 1, "bigger", 0.1)


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_values_that_never_vary_decide_nothing(method):
    """Two (or twenty) equal differences give a zero-width interval, which used to read
    "holds" at n = 2: no spread means no interval, so the claim stays inconclusive."""
    for n in (2, 20):
        v = paired_difference(np.full(n, 0.3), method=method)
        assert v.verdict == "inconclusive" and v.estimate == pytest.approx(0.3)
        assert v.low == float("-inf") and v.high == float("inf") and v.n == n


def _record(low, high, n=5, method="t", test=None, margin=None):
    rec = {"estimate": (low + high) / 2, "low": low, "high": high, "n": n, "method": method}
    if test:
        rec.update(test=test, margin=margin)
    return rec


@pytest.mark.parametrize("low, high, test, margin", [
    (0.01, 0.3, None, None), (-0.3, -0.01, None, None), (-0.1, 0.2, None, None),
    (-0.05, 0.01, "non_inferiority", 0.06), (-0.12, -0.07, "non_inferiority", 0.06),
    (-0.02, 0.03, "equivalence", 0.06), (0.07, 0.2, "equivalence", 0.06), (0.0, 0.1, "equivalence", 0.06),
    (0.2, 0.5, "superiority", 0.1)])
def test_one_claim_alone_keeps_its_own_verdict(low, high, test, margin):
    """With nothing to adjust for, the p-value read off an interval decides as the interval does."""
    rec = _record(low, high, test=test, margin=margin)
    word = decide_test(low, high, test or "superiority", margin or 0.0)
    p, direction = direction_p(rec)
    assert (p < 0.05) == (word != "inconclusive")
    assert fdr_verdicts({"c": rec}) == {"c": word}
    assert fdr_verdicts({"c": _record(low, high, method="bootstrap", test=test, margin=margin)}) == {"c": word}


def test_fdr_keeps_strong_claims_and_drops_marginal_ones_among_many_nulls():
    """Two clear effects, two that just clear their 95% interval, and 30 null claims: the
    marginal pair holds claim by claim but not after controlling the false discovery rate."""
    t = stats.t.ppf(0.975, 4)
    records = {"strong_a": _record(2.0, 3.0), "strong_b": _record(-3.0, -2.0),
               "marginal_a": _record(0.001, 2 * t * 0.3 + 0.001), "marginal_b": _record(0.002, 1.0)}
    records.update({f"null_{i}": _record(-0.5 + 0.01 * i, 0.5 + 0.01 * i) for i in range(30)})
    raw = {k: decide(r["low"], r["high"]) for k, r in records.items()}
    assert raw["marginal_a"] == raw["marginal_b"] == "holds"
    adjusted = fdr_verdicts(records)
    assert adjusted["strong_a"] == "holds" and adjusted["strong_b"] == "fails"
    assert adjusted["marginal_a"] == adjusted["marginal_b"] == "inconclusive"
    assert all(adjusted[f"null_{i}"] == "inconclusive" for i in range(30))
    assert direction_p({"estimate": 1.0, "low": float("-inf"), "high": float("inf"), "n": 1}) == (1.0, "inconclusive")
    assert fdr_verdicts({}) == {}


def test_fieller_interval_covers_a_ratio_and_refuses_a_vanishing_denominator():
    """Coverage near 95% over simulated retrainings; the interval is the set of ratios the t
    test does not reject; a denominator indistinguishable from zero gives no interval."""
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        den = 0.04 + 0.01 * rng.standard_normal(5)
        num = 0.5 * den + 0.005 * rng.standard_normal(5)
        r, lo, hi = fieller_interval(num, den)
        assert lo <= r <= hi
        hits += lo <= 0.5 <= hi
    assert 0.91 <= hits / 400 <= 0.99
    num, den = np.array([0.02, 0.025, 0.018, 0.03]), np.array([0.04, 0.05, 0.045, 0.052])
    r, lo, hi = fieller_interval(num, den)
    for R, inside in ((lo + 1e-6, True), (hi - 1e-6, True), (lo - 1e-3, False), (hi + 1e-3, False)):
        d = num - R * den
        t = d.mean() / (d.std(ddof=1) / 2)
        assert (abs(t) <= stats.t.ppf(0.975, 3)) == inside
    assert fieller_interval([0.01, 0.02, 0.01], [0.03, -0.02, 0.01])[1:] == (float("-inf"), float("inf"))
    with pytest.raises(ValueError, match="pair"):
        fieller_interval([1.0, 2.0], [1.0])


def test_cluster_bootstrap_resamples_whole_groups():
    """Rows that repeat one unit (here each value four times) are one unit: resampling groups
    gives n = the number of groups and a wider interval than resampling the rows as if each
    were independent; without groups, the rows are the units as before."""
    from nearid.verdicts import bootstrap_statistic

    rng = np.random.default_rng(1)
    units = rng.normal(0.3, 1.0, size=8)
    rows = np.repeat(units, 4)
    groups = np.repeat(np.arange(8), 4)
    by_row = bootstrap_statistic(np.mean, rows)
    by_group = bootstrap_statistic(np.mean, rows, groups=groups)
    assert by_row.n == 32 and by_group.n == 8
    assert by_group.estimate == by_row.estimate
    assert (by_group.high - by_group.low) > 1.5 * (by_row.high - by_row.low)
    alone = bootstrap_statistic(np.mean, units)
    assert by_group.high - by_group.low == pytest.approx(alone.high - alone.low, rel=0.25)
    with pytest.raises(ValueError, match="one label per row"):
        bootstrap_statistic(np.mean, rows, groups=groups[:-1])


def test_bootstrap_decides_nothing_from_two_units_or_a_statistic_resampling_cannot_move():
    """Two units (or a statistic equal on every resample) give a zero-width interval, which
    would make any claim hold; it is reported unbounded and inconclusive instead."""
    two = bootstrap_statistic(np.mean, np.array([1.0, 2.0]))
    assert two.verdict == "inconclusive" and (two.low, two.high) == (float("-inf"), float("inf")) and two.n == 2
    fixed = bootstrap_statistic(lambda x: 0.5, np.arange(40.0))
    assert fixed.verdict == "inconclusive" and fixed.estimate == 0.5
    three = bootstrap_statistic(np.mean, np.array([1.0, 2.0, 4.0]))
    assert np.isfinite(three.low) and three.verdict == "holds"


def test_units_for_power_is_the_n_whose_minimum_detectable_effect_reaches_the_effect():
    """The power calculation inverts the MDE: at the n it returns, the MDE (same spread per
    unit) is at most the effect, and at one unit fewer it is above it."""
    from nearid.verdicts import minimum_detectable_effect, units_for_power

    for method in ("t", "bootstrap"):
        low, high, n = -0.1, 0.3, 5   # an interval over 5 units
        need = units_for_power(low, high, n, method, effect=0.15)
        dist = stats.t(df=n - 1) if method == "t" else stats.norm()
        sd = (high - low) / (2 * dist.ppf(0.975)) * np.sqrt(n)

        def mde(m):
            d = stats.t(df=m - 1) if method == "t" else stats.norm()
            half = d.ppf(0.975) * sd / np.sqrt(m)
            return minimum_detectable_effect(-half, half, m, method)

        assert need > n and mde(int(need)) <= 0.15 < mde(int(need) - 1)
    assert np.isnan(units_for_power(-np.inf, np.inf, 3, "t", 0.1)), "no interval, no calculation"
    assert np.isnan(units_for_power(-0.1, 0.1, 3, "t", 0.0)), "no effect to detect"
    assert units_for_power(-1.0, 1.0, 3, "t", 1e-6, most=50) == 51, "an effect far inside the noise"


def test_units_for_spread_is_the_calculation_behind_units_for_power():
    """The registry's minimum n (issue 35) is redone from a recorded spread: the same n as
    reading the spread off the interval; an equivalence claim, whose interval must fit inside
    its margin on both sides, needs more units than a one-bound claim of the same size."""
    from nearid.verdicts import unit_spread, units_for_power, units_for_spread

    low, high, n = 0.02, 0.18, 5
    sd = unit_spread(low, high, n, "t")
    assert units_for_spread(sd, 0.06, "t") == units_for_power(low, high, n, "t", 0.06)
    assert units_for_spread(sd, 0.06, "t", equivalence=True) > units_for_spread(sd, 0.06, "t")
    assert units_for_spread(sd, 0.06, "bootstrap") <= units_for_spread(sd, 0.06, "t"), "normal tails are thinner"
    assert np.isnan(unit_spread(-np.inf, 0.1, 5, "t")) and np.isnan(units_for_spread(np.nan, 0.1, "t"))
