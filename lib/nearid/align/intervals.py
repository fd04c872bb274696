"""Each measure on the rows :func:`nearid.align.compare` gives it, with a 95% interval and a
permutation baseline: what resampling rows says about a similarity.

Which rows. A measure that fits nothing is computed on the fit rows (the rows linear CKA
has always used, so that the measures of one table see the same rows); an n x n measure
on a seeded subsample of at most ``max_rows`` of them; a fitted measure (CCA, SVCCA,
PWCCA) fits its directions on the fit rows and is scored on the held-out rows.

The interval: half-samples. The measure is recomputed on ``n_resamples`` random halves of
its rows, drawn without replacement, and the interval is the estimate plus the 2.5% and
97.5% quantiles of the halves' deviations from their mean. For a smooth statistic of n
rows, the deviations of half-samples have the variance of the estimate itself: this is
the delete-d jackknife with d = n/2, whose variance factor (n - d)/d is 1 (Shao & Wu 1989,
Ann. Statist. 17(3)). Unlike a bootstrap with replacement it never repeats a row, which
would fake nearest neighbours and zero distances for kNN and RSA, and each resample costs
half a measure (a quarter for an n x n one); linear CKA's halves are sums of per-group
cross-products, one pass in all. For a fitted measure the fitted directions
stay fixed and the halves are of the held-out rows: the interval is over evaluation rows,
given the fit. The families' errors get the same interval over their per-row errors.

The baseline: the measure with B's rows shuffled against A's (a fitted measure is refitted
on the shuffled fit rows), ``n_permutations`` times: what "unrelated" looks like at these n
and widths, where biased measures (linear CKA, RBF CKA, RSA by cosine) sit well above 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nearid.align import measures as M

N_RESAMPLES = 100
N_PERMUTATIONS = 20
LEVEL = 0.95
GROUPS = 20
GROUP_BYTES = 1 << 30  # the per-group cross-products of linear CKA's interval may take this much
MEASURE_PARAMS = {"bandwidth": "RBF CKA, times the median distance, default 1",
                  "rdm": "RSA: euclidean or correlation", "comparison": "RSA: spearman, kendall or cosine",
                  "k": "mutual kNN, default 10", "knn_metric": "mutual kNN: cosine or euclidean",
                  "batch_size": "minibatch CKA, default 256", "svcca_variance": "SVCCA, default 0.99"}
"""The measures' own options (``compare(measure_params=...)``, ``--measure-param``)."""


def check_measure_params(params: dict | None) -> None:
    """Unknown keys fail before any work, naming the valid ones (values are checked by the
    measures themselves)."""
    bad = sorted(set(params or {}) - set(MEASURE_PARAMS))
    if bad:
        raise ValueError(f"unknown measure parameter {', '.join(map(repr, bad))}; valid: {', '.join(MEASURE_PARAMS)}")


@dataclass(frozen=True)
class MeasureReport:
    """One measure's estimate, its interval (None when not asked), the baseline with rows
    shuffled (mean, low, high; None when not asked), and the rows it saw, in words ("on the
    10,000 fit rows", "fitted on ..., scored on ... held-out rows")."""

    value: float
    interval: tuple[float, float] | None
    baseline: tuple[float, float, float] | None
    rows: str


def half_sample_interval(stat: Callable[[np.ndarray], float], n: int, n_resamples: int,
                         rng: np.random.Generator, value: float) -> tuple[float, float]:
    """``value`` plus the 2.5% and 97.5% quantiles of ``stat`` on random halves of range(n)
    (without replacement) around their mean; (NaN, NaN) when a half is too small."""
    draws = []
    for _ in range(n_resamples):
        idx = np.sort(rng.choice(n, n // 2, replace=False))
        try:
            draws.append(stat(idx))
        except ValueError:  # a half too small for the measure (e.g. fewer rows than a batch)
            return (float("nan"), float("nan"))
    dev = np.asarray(draws, dtype=np.float64)
    dev = dev[np.isfinite(dev)]
    if dev.size == 0:
        return (float("nan"), float("nan"))
    dev -= dev.mean()
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(dev, [tail, 1 - tail])
    return (float(value + low), float(value + high))


def mean_interval(values: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The half-sample interval of a mean (a family's per-row errors)."""
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    return half_sample_interval(lambda idx: float(values[idx].mean()), values.size, n_resamples, rng,
                                float(values.mean()))


def _cka_interval(X: np.ndarray, Y: np.ndarray, n_resamples: int, rng: np.random.Generator,
                  value: float) -> tuple[float, float] | None:
    """Linear CKA's half-sample interval from per-group cross-products: the rows are dealt
    into ``GROUPS`` random groups, and a half is a random half of the groups, whose centred
    cross-products are sums of the groups' (one pass over the rows instead of one per half;
    the delete-half jackknife over groups, as valid as over rows). None when the groups'
    d x d matrices would not fit in ``GROUP_BYTES`` (the caller resamples rows instead)."""
    p, q = X.shape[1], Y.shape[1]
    if GROUPS * (p * p + q * q + p * q) * 8 > GROUP_BYTES or X.shape[0] < 2 * GROUPS:
        return None
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    label = rng.permutation(X.shape[0]) % GROUPS
    parts = []
    for g in range(GROUPS):
        x, y = Xc[label == g], Yc[label == g]
        parts.append((x.shape[0], x.sum(0), y.sum(0), x.T @ x, y.T @ y, x.T @ y))
    draws = []
    for _ in range(n_resamples):
        chosen = [parts[g] for g in rng.choice(GROUPS, GROUPS // 2, replace=False)]
        m = sum(c[0] for c in chosen)
        sx, sy = sum(c[1] for c in chosen), sum(c[2] for c in chosen)
        gxx = sum(c[3] for c in chosen) - np.outer(sx, sx) / m
        gyy = sum(c[4] for c in chosen) - np.outer(sy, sy) / m
        gxy = sum(c[5] for c in chosen) - np.outer(sx, sy) / m
        draws.append(M._cka_from_moments(gxx, gyy, gxy))
    dev = np.asarray(draws) - np.mean(draws)
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(dev, [tail, 1 - tail])
    return (float(value + low), float(value + high))


def _cka_shuffled(X: np.ndarray, Y: np.ndarray, perms: list[np.ndarray]) -> list[float]:
    """Linear CKA with B's rows shuffled: A'A and B'B do not move, only A'B is recomputed."""
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    gxx, gyy = Xc.T @ Xc, Yc.T @ Yc
    return [M._cka_from_moments(gxx, gyy, Xc.T @ Yc[pm]) for pm in perms]


def _debiased_shuffled(X: np.ndarray, Y: np.ndarray, perms: list[np.ndarray]) -> list[float]:
    """Debiased CKA with B's rows shuffled: the two self terms do not move (a shuffle keeps
    B's column means, so B stays centred); only the cross term is recomputed."""
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    hxx, hyy = M._hsic_unbiased_linear(Xc, Xc, Xc.T @ Xc), M._hsic_unbiased_linear(Yc, Yc, Yc.T @ Yc)
    out = []
    for pm in perms:
        Ys = Yc[pm]
        out.append(M._ratio(M._hsic_unbiased_linear(Xc, Ys, Xc.T @ Ys), hxx, hyy))
    return out


SHUFFLED = {"cka": _cka_shuffled, "debiased_cka": _debiased_shuffled}  # cheaper than the measure per shuffle


def _plain(name: str, params: dict) -> Callable[[np.ndarray, np.ndarray], float]:
    """The measure as f(X, Y) on the rows it is given (no subsampling of its own)."""
    return {
        "cka": M.linear_cka,
        "debiased_cka": M.debiased_cka,
        "minibatch_cka": lambda X, Y: M.minibatch_cka(X, Y, batch_size=params.get("batch_size", 256),
                                                      random_state=params.get("seed", 0)),
        "rbf_cka": lambda X, Y: M.rbf_cka(X, Y, bandwidth=params.get("bandwidth", 1.0), max_rows=None),
        "rsa": lambda X, Y: M.rsa(X, Y, rdm_metric=params.get("rdm", "euclidean"),
                                  comparison=params.get("comparison", "spearman"), max_rows=None),
        "mutual_knn": lambda X, Y: M.mutual_knn(X, Y, k=params.get("k", 10), metric=params.get("knn_metric", "cosine"),
                                                max_rows=None),
        "procrustes": M.procrustes_angle,
        "bures": M.bures_distance,
    }[name]


def _fitted(name: str, params: dict):
    """(fit(X, Y) -> state, score(state, X, Y) -> float, key) of a fitted measure; measures
    with the same ``key`` share one fit (CCA and PWCCA)."""
    if name == "svcca":
        variance = params.get("svcca_variance", 0.99)
        return (lambda X, Y: M.fit_cca(X, Y, variance=variance),
                lambda f, X, Y: float(f.correlations(X, Y).mean()), ("cca", variance))
    score = M.pwcca_score if name == "pwcca" else (lambda f, X, Y: float(f.correlations(X, Y).mean()))
    return M.fit_cca, score, ("cca", None)


def _fmt(n: int) -> str:
    return f"{n:,}"


@dataclass(frozen=True)
class MeasureSettings:
    """How :func:`evaluate_measures` computes the measures: the n x n ones on a subsample of
    at most ``max_rows`` fit rows (None: all); with ``intervals``, a 95% interval from
    ``n_resamples`` half-samples and a baseline from ``n_permutations`` shuffles; ``params``,
    the measures' own options (:data:`MEASURE_PARAMS`); ``seed`` draws the subsample, the
    halves and the shuffles."""

    seed: int = 0
    max_rows: int | None = M.MAX_ROWS
    intervals: bool = False
    n_resamples: int = N_RESAMPLES
    n_permutations: int = N_PERMUTATIONS
    params: dict | None = None


def evaluate_measures(names, A, B, fit_idx: np.ndarray, eval_idx: np.ndarray,
                      settings: MeasureSettings = MeasureSettings(), *, values: dict | None = None,
                      progress: bool = False) -> dict[str, MeasureReport]:
    """Every measure in ``names`` on its rows of A and B (see the module docstring), as
    ``settings`` says. ``progress``: a bar on stderr (after 2 s) naming the measure being
    computed.

    ``values`` holds estimates already computed elsewhere (the engine's streamed linear
    CKA), which are reported as they are; the intervals and baselines are computed here."""
    seed, max_rows, intervals = settings.seed, settings.max_rows, settings.intervals
    n_resamples, n_permutations = settings.n_resamples, settings.n_permutations
    params = dict(settings.params or {}, seed=seed)
    values = values or {}
    fit_rows, eval_rows = np.sort(fit_idx), np.sort(eval_idx)
    gathered: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    fits: dict = {}

    def rows(which: str) -> tuple[np.ndarray, np.ndarray]:
        if which not in gathered:
            idx = {"fit": fit_rows, "eval": eval_rows}.get(which)
            if idx is None:  # the subsample of the n x n measures
                idx = fit_rows
                if max_rows is not None and idx.size > max_rows:
                    idx = np.sort(np.random.default_rng(seed).choice(idx, max_rows, replace=False))
            gathered[which] = (np.asarray(A[idx], dtype=np.float64), np.asarray(B[idx], dtype=np.float64))
        return gathered[which]

    def shuffles(n: int, stream: int) -> list[np.ndarray]:
        """The baseline's row shuffles of n rows: the same for every measure (so CCA and PWCCA
        share their refits), seeded by the comparison's seed."""
        rng = np.random.default_rng([seed, stream, n])
        return [rng.permutation(n) for _ in range(n_permutations if intervals else 0)]

    bar = None
    if progress and (intervals or set(names) - set(values)):  # something left to compute
        import sys

        from tqdm.auto import tqdm

        bar = tqdm(total=len(names), desc="measures", delay=2.0, file=sys.stderr, leave=False, dynamic_ncols=True)
    out = {}
    for k, name in enumerate(names):
        if bar is not None:
            bar.set_description_str(f"measures: {name}" + (" with interval and baseline" if intervals else ""))
            if k:
                bar.update(1)  # the previous measure is done
        spec = M.MEASURES[name]
        rng = np.random.default_rng([seed, k])
        if spec.fitted:
            fit, score, key = _fitted(name, params)
            (Xf, Yf), (Xe, Ye) = rows("fit"), rows("eval")
            if key not in fits:
                fits[key] = fit(Xf, Yf)
            state = fits[key]
            value = score(state, Xe, Ye)
            interval = (half_sample_interval(lambda i: score(state, Xe[i], Ye[i]), Xe.shape[0], n_resamples,
                                             rng, value) if intervals else None)
            draws = []
            for p, (pf, pe) in enumerate(zip(shuffles(Xf.shape[0], 1), shuffles(Xe.shape[0], 2))):
                if (key, p) not in fits:
                    fits[key, p] = fit(Xf, Yf[pf])
                draws.append(score(fits[key, p], Xe, Ye[pe]))
            where = f"fitted on {_fmt(Xf.shape[0])} fit rows, scored on {_fmt(Xe.shape[0])} held-out rows"
        else:
            f = _plain(name, params)
            value = values.get(name)
            if value is not None and not intervals:  # computed already (streamed): nothing to gather
                out[name] = MeasureReport(value=float(value), interval=None, baseline=None,
                                          rows=f"on the {_fmt(fit_rows.size)} fit rows")
                continue
            X, Y = rows("pairs" if spec.pairwise else "fit")
            value = f(X, Y) if value is None else value
            interval = _cka_interval(X, Y, n_resamples, rng, value) if intervals and name == "cka" else None
            if intervals and interval is None:
                interval = half_sample_interval(lambda i: f(X[i], Y[i]), X.shape[0], n_resamples, rng, value)
            perms = shuffles(X.shape[0], 0)
            draws = SHUFFLED[name](X, Y, perms) if name in SHUFFLED else [f(X, Y[pm]) for pm in perms]
            where = (f"on {_fmt(X.shape[0])} of the {_fmt(fit_rows.size)} fit rows"
                     if X.shape[0] < fit_rows.size else f"on the {_fmt(X.shape[0])} fit rows")
        baseline = None
        if draws:
            d = np.asarray(draws, dtype=np.float64)
            tail = (1 - LEVEL) / 2
            baseline = (float(np.mean(d)), float(np.quantile(d, tail)), float(np.quantile(d, 1 - tail)))
        out[name] = MeasureReport(value=float(value), interval=interval, baseline=baseline, rows=where)
    if bar is not None:
        bar.update(1)
        bar.close()
    return out
