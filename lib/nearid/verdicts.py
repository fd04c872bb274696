"""Verdicts that survive another machine: a claim holds, fails or is inconclusive by a paired
comparison with a 95% interval, never by a strict ``>`` between two means.

Every claim the book tests is a statement "the mean of a paired difference d is above a
threshold" (ICA error below the permutation error on the same rows, AE + ICA above AE on the
same seed, ...). :func:`paired_difference` estimates the mean of d with an interval; the
verdict is *holds* when the whole interval lies above the threshold, *fails* when it lies
below, and *inconclusive* when it contains it. Floating-point results differ in the third
decimal between CPUs; a verdict decided this way does not flip with them unless the
interval touches the threshold, and then it says "inconclusive" instead of guessing.

Intervals:

* ``method="bootstrap"`` -- percentile bootstrap of the mean over the paired units
  (evaluation rows, guides, folds), seeded, for many units;
* ``method="t"`` -- Student's t interval of the mean, for few units (seeds);
* :func:`bootstrap_statistic` -- any statistic of jointly resampled rows (a Spearman
  correlation), percentile interval;
* :func:`fieller_interval` -- a ratio of two paired means (an efficiency), without the
  noise a near-zero denominator puts into per-unit ratios.

Many claims tested at 95% each will decide a few by chance: :func:`fdr_verdicts` gives each
claim's verdict after Benjamini-Hochberg control of the false discovery rate across all of
them, read off the recorded intervals (:func:`direction_p`), for a headline beside the raw one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats

from nearid.constraints import Options, validate_params

VERDICTS = ("holds", "fails", "inconclusive")
CONFIDENCE = 0.95
N_BOOT = 2000
# intervals built from Student's t over few units (a mean; Fieller's ratio of two means): the
# MDE, p-values and power calculations read them with t quantiles, the others with normal ones
T_METHODS = ("t", "fieller")


@dataclass(frozen=True)
class Verdict:
    """One claim decided: the estimate, its interval, and holds / fails / inconclusive."""

    estimate: float
    low: float
    high: float
    verdict: str
    n: int
    method: str
    threshold: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (f"{self.verdict}: {self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}] "
                f"(95% {self.method} interval, n = {self.n})")


def decide(low: float, high: float, threshold: float = 0.0) -> str:
    """holds if the interval lies above ``threshold``, fails if below, else inconclusive."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    if low > threshold:
        return "holds"
    if high < threshold:
        return "fails"
    return "inconclusive"


@validate_params(method=Options(("bootstrap", "t")))
def mean_interval(values, *, method: str = "bootstrap", confidence: float = CONFIDENCE,
                  n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) of ``values`` with a ``confidence`` interval by ``method``."""
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    est = float(x.mean())
    if x.size == 1 or np.ptp(x) == 0:
        # one value, or values that never vary (two seeds agreeing to the last bit): no spread
        # to build an interval from, and a difference equal on every unit is fixed by how it is
        # computed rather than measured; either way it decides nothing
        return est, float("-inf"), float("inf")
    alpha = 1 - confidence
    if method == "t":
        half = stats.t.ppf(1 - alpha / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
        return est, est - half, est + half
    rng = np.random.default_rng(seed)  # "bootstrap"
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return est, float(low), float(high)


def paired_difference(a, b=None, *, threshold: float = 0.0, method: str = "bootstrap",
                      confidence: float = CONFIDENCE, n_boot: int = N_BOOT, seed: int = 0) -> Verdict:
    """Decide "mean(a - b) > threshold" (or "mean(a) > threshold" when ``b`` is None).

    ``a`` and ``b`` are paired: entry i of both comes from the same unit (row, seed, guide).
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    d = a if b is None else a - np.asarray(b, dtype=np.float64).ravel()
    est, low, high = mean_interval(d, method=method, confidence=confidence, n_boot=n_boot, seed=seed)
    return Verdict(est, low, high, decide(low, high, threshold), int(np.isfinite(d).sum()), method, threshold)


def bootstrap_statistic(statistic: Callable[..., float], *arrays, threshold: float = 0.0,
                        confidence: float = CONFIDENCE, n_boot: int = N_BOOT, seed: int = 0,
                        groups=None) -> Verdict:
    """Decide "statistic(*arrays) > threshold", resampling the rows of all arrays jointly.

    With ``groups`` (one label per row), whole groups are resampled instead (a cluster
    bootstrap): rows that share a group, e.g. pairs of seeds that share trained models or
    settings, are not independent units, and resampling them one by one would make the
    interval too narrow. ``n`` is then the number of groups."""
    arrays = [np.asarray(x) for x in arrays]
    n = len(arrays[0])
    if any(len(x) != n for x in arrays):
        raise ValueError("the arrays must have the same number of rows")
    est = float(statistic(*arrays))
    rng = np.random.default_rng(seed)
    if groups is None:
        draws = (idx for idx in rng.integers(0, n, size=(n_boot, n)))
        units = n
    else:
        labels = np.asarray(groups)
        if len(labels) != n:
            raise ValueError(f"groups needs one label per row: {len(labels)} labels for {n} rows")
        _, code = np.unique(labels, return_inverse=True)
        members = [np.flatnonzero(code == g) for g in range(code.max() + 1)]
        units = len(members)
        draws = (np.concatenate([members[g] for g in pick])
                 for pick in rng.integers(0, units, size=(n_boot, units)))
    boots = np.array([statistic(*[x[idx] for x in arrays]) for idx in draws], dtype=np.float64)
    boots = boots[np.isfinite(boots)]
    alpha = 1 - confidence
    if boots.size < n_boot // 2:
        low = high = float("nan")
    elif units < 3 or np.ptp(boots) == 0:
        # two units (or resamples that never vary) give a statistic the resampling cannot
        # move: a zero-width interval that would "decide" any claim; it decides nothing
        low, high = float("-inf"), float("inf")
    else:
        low, high = (float(v) for v in np.quantile(boots, [alpha / 2, 1 - alpha / 2]))
    return Verdict(est, low, high, decide(low, high, threshold), units, "bootstrap", threshold)


TESTS = ("superiority", "non_inferiority", "equivalence")


@validate_params(test=Options(TESTS))
def decide_test(low: float, high: float, test: str = "superiority", margin: float = 0.0) -> str:
    """The word for a 95% interval [low, high] of a difference under ``test`` (margins in the
    difference's units, declared in the registry of claims before the result):

    * superiority: holds if the interval lies above ``margin``, fails if below;
    * non_inferiority ("comparable or better"): holds if it lies above ``-margin``, fails if
      it lies below ``-margin``;
    * equivalence ("the same"): holds if it lies inside ``[-margin, margin]``, fails if it
      lies wholly outside (two one-sided tests, each at 2.5%); else inconclusive.
    """
    if margin < 0:
        raise ValueError(f"a margin is a non-negative distance, got {margin}")
    if test == "superiority":
        return decide(low, high, margin)
    if test == "non_inferiority":
        return decide(low, high, -margin)
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    if -margin < low and high < margin:
        return "holds"
    if high < -margin or low > margin:
        return "fails"
    return "inconclusive"


def under_test(verdict: Verdict, test: str, margin: float) -> Verdict:
    """``verdict``'s interval decided under ``test`` with ``margin`` (:func:`decide_test`);
    the threshold it records is the bound the interval was compared with (``-margin`` for
    non-inferiority, ``margin`` for superiority and for equivalence's upper bound)."""
    word = decide_test(verdict.low, verdict.high, test, margin)
    threshold = -margin if test == "non_inferiority" else margin
    return replace(verdict, verdict=word, threshold=float(threshold))


def claim(verdict: Verdict, text: str, *, section: str, paper: float | str | None = None,
          ours_label: str | None = None, test: str | None = None, margin: float | None = None,
          about: Mapping[str, str] | None = None) -> dict:
    """The JSON record of one claim, as every chapter stores it under ``verdicts``.

    ``text`` states the claim in words; ``section`` is the MyST label of the chapter section
    that decides it (the summary page links there); ``paper`` is the paper's number for the
    same quantity, when it prints one; ``test`` and ``margin`` (recorded when given) say how
    the interval was decided when that is not superiority over 0. ``about`` names what the
    claim compares, as data ({"against": "ae", "score": "infom", "dataset": "mpi3d"}), so a
    table reads its rows from the record instead of parsing the claim's id.
    """
    rec = {"claim": text, **verdict.to_dict(), "paper": paper, "section": section, "ours_label": ours_label}
    if test is not None:
        rec.update(test=test, margin=float(margin or 0.0))
    if about:
        rec["about"] = dict(about)
    return rec


def verdict_of(v: Verdict | Mapping) -> str:
    """The word of a :class:`Verdict`, a claim record (dict) or a table row alike."""
    return v.verdict if isinstance(v, Verdict) else str(v["verdict"])


def tally(decided: Mapping[str, Verdict | Mapping | str]) -> dict[str, list[str]]:
    """Names grouped by verdict, in :data:`VERDICTS` order and each group in the given order:
    ``{"holds": [...], "fails": [...], "inconclusive": [...]}``. Values are verdicts, claim
    records or bare words."""
    words = {name: v if isinstance(v, str) else verdict_of(v) for name, v in decided.items()}
    unknown = sorted(set(words.values()) - set(VERDICTS))
    if unknown:
        raise ValueError(f"unknown verdicts {unknown}; valid: {', '.join(VERDICTS)}")
    return {word: [n for n, w in words.items() if w == word] for word in VERDICTS}


def minimum_detectable_effect(low: float, high: float, n: int | None, method: str | None,
                              confidence: float = CONFIDENCE, power: float = 0.80) -> float:
    """The smallest true effect this design detects with probability ``power``, read off the
    observed interval, so that "inconclusive" can tell "too few units to tell" (a large MDE)
    from "close to the threshold" (a small one).

    The interval's half-width over its critical value estimates the standard error SE; the
    MDE of a two-sided test at level 1 - ``confidence`` is then (c_(1-alpha/2) + c_power) * SE,
    c from Student's t with n - 1 degrees of freedom for a t interval and from the normal for
    a bootstrap one (an approximation: a percentile interval need not be symmetric). Infinite
    for an unbounded interval; NaN where there is no interval (n < 2 or a missing end).
    """
    if n is None or n < 2 or low is None or high is None or np.isnan(low) or np.isnan(high):
        return float("nan")
    if not (np.isfinite(low) and np.isfinite(high)):
        return float("inf")
    alpha = 1 - confidence
    dist = stats.t(df=n - 1) if method in T_METHODS else stats.norm()
    crit = float(dist.ppf(1 - alpha / 2))
    se = (high - low) / (2 * crit)
    return float((crit + dist.ppf(power)) * se)


def units_for_power(low: float, high: float, n: int | None, method: str | None, effect: float,
                    confidence: float = CONFIDENCE, power: float = 0.80, most: int = 10_000) -> float:
    """How many units (seeds, replicates, rows: what the interval resamples) a design needs to
    detect a true difference of ``effect`` beyond the claim's bound with probability ``power``,
    at the spread the observed interval shows: the power calculation behind a minimum n.

    The interval's half-width gives the standard error at the observed n, hence the spread of
    one unit, sd = SE * sqrt(n) (:func:`unit_spread`); the rest is :func:`units_for_spread`.
    NaN where there is no finite interval or no effect to detect; ``most`` + 1 when even
    ``most`` units would not do (an effect far inside the noise)."""
    return units_for_spread(unit_spread(low, high, n, method, confidence), effect, method,
                            confidence=confidence, power=power, most=most)


def unit_spread(low: float, high: float, n: int | None, method: str | None,
                confidence: float = CONFIDENCE) -> float:
    """The standard deviation of one unit that a recorded interval implies: its standard error
    (half-width over the critical value, as :func:`minimum_detectable_effect` reads it) times
    sqrt(n). NaN where there is no finite interval."""
    se, _ = _standard_error(low, high, n, method, confidence)
    return float("nan") if se is None else float(se * np.sqrt(n))


def units_for_spread(sd: float, effect: float, method: str | None, equivalence: bool = False,
                     confidence: float = CONFIDENCE, power: float = 0.80, most: int = 10_000) -> float:
    """The smallest n >= 2 whose interval detects a true difference ``effect`` beyond the bound
    with probability ``power`` when one unit has spread ``sd``:
    (c_(1-alpha/2) + c_power) * sd / sqrt(n) <= |effect|, c from Student's t with n - 1 degrees
    of freedom for a t interval, from the normal for a bootstrap one. A Fieller interval (a
    ratio of means) is read the same way, as if symmetric and shrinking as 1/sqrt(n): a rough
    approximation, since such an interval is skewed and widens fast when the denominator is
    noisy, so the n it gives for a ratio overstates what a delta-method calculation would. With
    ``equivalence`` the truth is taken to sit on the claimed value and ``effect`` is the
    margin: both ends of the interval must stay inside it, so c_power becomes
    c_((1+power)/2). NaN without a finite spread or an effect; ``most`` + 1 when even ``most``
    units would not do."""
    if not (np.isfinite(sd) and np.isfinite(effect)) or effect == 0:
        return float("nan")
    alpha = 1 - confidence
    beta_q = (1 + power) / 2 if equivalence else power
    for m in range(2, most + 1):
        dist = stats.t(df=m - 1) if method in T_METHODS else stats.norm()
        if (dist.ppf(1 - alpha / 2) + dist.ppf(beta_q)) * sd / np.sqrt(m) <= abs(effect):
            return float(m)
    return float(most + 1)


def _standard_error(low: float, high: float, n: int | None, method: str | None,
                    confidence: float = CONFIDENCE):
    """(SE, sampling distribution) read off a recorded interval, as in
    :func:`minimum_detectable_effect`; (None, None) where there is no finite interval."""
    if (n is None or n < 2 or low is None or high is None
            or not (np.isfinite(low) and np.isfinite(high)) or high <= low):
        return None, None
    dist = stats.t(df=n - 1) if method in T_METHODS else stats.norm()
    return (high - low) / (2 * float(dist.ppf(1 - (1 - confidence) / 2))), dist


def direction_p(record: Mapping, confidence: float = CONFIDENCE) -> tuple[float, str]:
    """(two-sided p-value, the verdict a small one supports) for one claim record, from its
    interval and its test (superiority over ``margin``, non-inferiority at ``-margin``, or
    equivalence within +-``margin`` by two one-sided tests): twice the one-sided level at
    which the record's interval would just touch its bound, so p < 1 - ``confidence`` exactly
    when the record's own verdict is decided. 1.0 ("inconclusive") where no interval was
    estimated. The same approximation as :func:`minimum_detectable_effect` for bootstrap
    intervals (read as normal)."""
    se, dist = _standard_error(record.get("low"), record.get("high"), record.get("n"),
                               record.get("method"), confidence)
    if se is None:
        return 1.0, "inconclusive"
    # the interval's centre, so that a single claim (nothing to adjust for) gets its own verdict
    # back whether or not a bootstrap interval is symmetric about the estimate
    est, test = (float(record["low"]) + float(record["high"])) / 2, record.get("test") or "superiority"
    margin = float(record.get("margin") or 0.0)
    if test == "equivalence":
        p_inside = max(dist.sf((est + margin) / se), dist.cdf((est - margin) / se))
        p_outside = min(dist.cdf((est + margin) / se), dist.sf((est - margin) / se))
        p_hold, p_fail = p_inside, p_outside
    else:
        bound = -margin if test == "non_inferiority" else margin
        p_hold, p_fail = dist.sf((est - bound) / se), dist.cdf((est - bound) / se)
    if p_hold <= p_fail:
        return float(min(1.0, 2 * p_hold)), "holds"
    return float(min(1.0, 2 * p_fail)), "fails"


def fdr_verdicts(records: Mapping[str, Mapping], confidence: float = CONFIDENCE) -> dict[str, str]:
    """Each claim's verdict after controlling the false discovery rate across all of them at
    1 - ``confidence`` (Benjamini-Hochberg, scipy's ``false_discovery_control``, on two-sided
    p-values with the direction of the estimate, which also bounds the rate of wrong
    directions): many claims tested at 95% each will hold or fail by chance a few times,
    and the headline should not count those."""
    names = list(records)
    if not names:
        return {}
    ps, words = zip(*(direction_p(records[n], confidence) for n in names))
    adjusted = stats.false_discovery_control(np.asarray(ps, dtype=np.float64), method="bh")
    alpha = 1 - confidence
    return {n: (w if q <= alpha and w != "inconclusive" else "inconclusive")
            for n, q, w in zip(names, adjusted, words)}


def fieller_interval(numerator, denominator, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(ratio of means, low, high): Fieller's interval for mean(numerator) / mean(denominator)
    over paired units (e.g. ICA's share of the permutation-to-rigid gap over retrained pairs:
    (perm - ica) and (perm - rigid) per pair).

    Unlike a t interval over per-unit ratios, which a denominator near zero in one unit blows
    up, it inverts the t test of mean(num) - R * mean(den) = 0, so the uncertainty of the
    denominator enters once. Unbounded (-inf, inf) when the denominator's mean is not
    itself distinguishable from zero at this level (or the set of R is not an interval): then
    no ratio is estimated and a claim about it is inconclusive."""
    a = np.asarray(numerator, dtype=np.float64).ravel()
    b = np.asarray(denominator, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"numerator and denominator must pair up, got {a.size} and {b.size} values")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    n = a.size
    if n == 0 or b.mean() == 0:
        return float("nan"), float("-inf"), float("inf")
    ratio = float(a.mean() / b.mean())
    if n < 2:
        return ratio, float("-inf"), float("inf")
    cov = np.cov(a, b, ddof=1) / n  # (co)variances of the two means
    t2 = stats.t.ppf(1 - (1 - confidence) / 2, n - 1) ** 2
    ma, mb = a.mean(), b.mean()
    qa = mb ** 2 - t2 * cov[1, 1]              # R^2 coefficient
    qb = -2 * (ma * mb - t2 * cov[0, 1])       # R coefficient
    qc = ma ** 2 - t2 * cov[0, 0]
    disc = qb ** 2 - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return ratio, float("-inf"), float("inf")
    root = np.sqrt(disc)
    return ratio, float((-qb - root) / (2 * qa)), float((-qb + root) / (2 * qa))
