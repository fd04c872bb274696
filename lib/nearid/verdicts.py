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
  correlation), percentile interval.
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
        return est, (est if x.size > 1 else float("-inf")), (est if x.size > 1 else float("inf"))
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
                        confidence: float = CONFIDENCE, n_boot: int = N_BOOT, seed: int = 0) -> Verdict:
    """Decide "statistic(*arrays) > threshold", resampling the rows of all arrays jointly."""
    arrays = [np.asarray(x) for x in arrays]
    n = len(arrays[0])
    if any(len(x) != n for x in arrays):
        raise ValueError("the arrays must have the same number of rows")
    est = float(statistic(*arrays))
    rng = np.random.default_rng(seed)
    boots = np.array([statistic(*[x[idx] for x in arrays])
                      for idx in rng.integers(0, n, size=(n_boot, n))], dtype=np.float64)
    boots = boots[np.isfinite(boots)]
    alpha = 1 - confidence
    if boots.size < n_boot // 2:
        low = high = float("nan")
    else:
        low, high = (float(v) for v in np.quantile(boots, [alpha / 2, 1 - alpha / 2]))
    return Verdict(est, low, high, decide(low, high, threshold), n, "bootstrap", threshold)


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
          ours_label: str | None = None, test: str | None = None, margin: float | None = None) -> dict:
    """The JSON record of one claim, as every chapter stores it under ``verdicts``.

    ``text`` states the claim in words; ``section`` is the MyST label of the chapter section
    that decides it (the summary page links there); ``paper`` is the paper's number for the
    same quantity, when it prints one; ``test`` and ``margin`` (recorded when given) say how
    the interval was decided when that is not superiority over 0.
    """
    rec = {"claim": text, **verdict.to_dict(), "paper": paper, "section": section, "ours_label": ours_label}
    if test is not None:
        rec.update(test=test, margin=float(margin or 0.0))
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
    dist = stats.t(df=n - 1) if method == "t" else stats.norm()
    crit = float(dist.ppf(1 - alpha / 2))
    se = (high - low) / (2 * crit)
    return float((crit + dist.ppf(power)) * se)
