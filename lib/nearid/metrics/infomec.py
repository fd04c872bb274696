"""InfoMEC: modularity, explicitness and compactness of a code (Hsu et al. 2023, arXiv 2305.18378).

Written from the paper's definitions and the public description of its reference code;
the choices that decide the numbers are:

* NMI[i, j] = I(s_i; z_j) / H(s_i), with I from scikit-learn's kNN estimator
  ``mutual_info_classif(n_neighbors=10)`` on standardised continuous latents (our
  :func:`mutual_info_knn` computes the same numbers faster, see its test; integer
  latents: the plug-in ``mutual_info_score``, since kNN estimates break on exact ties), and
  H(s_i) the plug-in entropy of the label-encoded source;
* a latent is *active* when its range exceeds (max range over latents) / 20;
* InfoM = (mean over active latents j of max_i NMI[i,j] / sum_i NMI[i,j] - 1/K) / (1 - 1/K),
  K sources; InfoC the same over sources with the L active latents in place of K;
* InfoE = mean over sources of (H_null - CE) / H_null, CE the in-sample cross-entropy of an
  unpenalised (``C=np.inf``), class-balanced multinomial logistic regression from the
  latents (one-hot for integer latents), H_null the same model fitted on a constant input.

One departure from the reference code, which standardises the latents and stops L-BFGS at
100 iterations: on an autoencoder's correlated latents that fit is far from converged (an
MPI3D arm angle's cross-entropy 3.48 nats at 100 iterations against 2.96 at convergence),
and it stops further from the optimum for a correlated code than for a whitened one, which
biases every comparison with ICA. We *whiten* the latents instead (onto every direction
of non-negligible variance, :func:`probe_inputs`) and let L-BFGS run to convergence (``max_iter=5000``; a
``ConvergenceWarning`` is no longer silenced). The unpenalised optimum does not change under
an invertible linear map of the inputs, so this is the same quantity the reference code
approximates, computed to convergence: whitening only makes the problem well conditioned.
Directions below float32 resolution (:data:`PROBE_RTOL`) are rounding noise and are left out.
The reference code's probe stays available (``infoe(..., probe="reference")``): it is how the
paper's InfoE was computed, and the only InfoE under which ICA, an invertible linear map, can
change the score at all.

Guards for the degenerate cases the reference code divides by zero in: a latent (or a
source) whose NMI is zero everywhere spreads its share uniformly (contributes 0); with a
single active latent InfoC is 1 for every source that latent informs about and 0 otherwise;
with no active latent InfoM = InfoC = 0.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, mutual_info_score
from sklearn.preprocessing import LabelEncoder, OneHotEncoder, StandardScaler
from scipy.special import digamma
from threadpoolctl import threadpool_limits

INFOE_MAX_ITER = 5000  # L-BFGS iterations allowed; whitened inputs mostly converge in tens to hundreds
# InfoE's probe as the reference code fits it (standardised latents, L-BFGS stopped at 100
# iterations), and ours (whitened latents, run to convergence): the paper's numbers come from
# the first, the quantity both approximate is the second.
INFOE_PROBES = ("converged", "reference")
REFERENCE_PROBE_MAX_ITER = 100
# Directions of a code whose scale is below this fraction of its largest are rounding noise
# of float32 models (a code of rank r stored in more columns), not information.
PROBE_RTOL = 1e-5


def _check(sources, latents) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(sources)
    z = np.asarray(latents)
    if s.ndim != 2 or z.ndim != 2:
        raise ValueError(f"sources and latents must be 2-D (samples x columns), got shapes "
                         f"{s.shape} and {z.shape}")
    if s.shape[0] != z.shape[0]:
        raise ValueError(f"sources and latents need the same number of rows, got {s.shape[0]} "
                         f"and {z.shape[0]}")
    if s.shape[0] < 20:
        raise ValueError(f"need at least 20 samples, got {s.shape[0]}")
    if s.shape[1] < 2:
        raise ValueError(f"InfoM normalises by 1 - 1/K: need at least 2 sources, got {s.shape[1]}")
    if np.issubdtype(z.dtype, np.floating) and not np.isfinite(z).all():
        raise ValueError("latents contain NaN or infinite values")
    return s, z


def encode_sources(sources) -> np.ndarray:
    """Each source column relabelled 0..n_values-1 (values may be floats, e.g. 3dshapes labels)."""
    s = np.asarray(sources)
    return np.stack([LabelEncoder().fit_transform(s[:, i]) for i in range(s.shape[1])], 1)


def _is_discrete(latents: np.ndarray, discrete: bool | None) -> bool:
    return np.issubdtype(latents.dtype, np.integer) if discrete is None else bool(discrete)


def _mi_cd_sorted(c: np.ndarray, d: np.ndarray, n_neighbors: int) -> float:
    """Ross (2014) kNN estimate of I(c; d), c continuous 1-D, d integer labels.

    The same estimator as scikit-learn's ``_compute_mi_cd``, vectorised for one dimension:
    k-th neighbour distances within a class come from the k sorted neighbours on each side,
    and neighbour counts from ``searchsorted``, instead of one tree per class (which costs
    seconds for a 40-valued factor such as MPI3D's arm axes).
    """
    labels, counts = np.unique(d, return_inverse=False, return_counts=True)
    count_of = dict(zip(labels.tolist(), counts.tolist()))
    label_counts = np.array([count_of[v] for v in d.tolist()], dtype=np.float64)
    keep = label_counts > 1
    c, d, label_counts = c[keep], d[keep], label_counts[keep]
    n = len(c)
    if n == 0:
        return 0.0
    order = np.lexsort((c, d))
    cs, ds = c[order], d[order]
    k_all = np.minimum(n_neighbors, label_counts[order] - 1).astype(np.int64)
    kmax = int(k_all.max())
    cand = np.full((n, 2 * kmax), np.inf)
    for o in range(1, kmax + 1):
        same = ds[o:] == ds[:-o]
        gap = np.where(same, cs[o:] - cs[:-o], np.inf)
        cand[o:, o - 1] = gap          # neighbour o places to the left
        cand[:-o, kmax + o - 1] = gap  # neighbour o places to the right
    cand.sort(axis=1)
    r = np.take_along_axis(cand, (k_all - 1)[:, None], axis=1)[:, 0]
    radius = np.nextafter(r, 0)
    allv = np.sort(cs)
    # count |x_j - x_i| <= radius exactly as a tree would: bounds from searchsorted, then
    # fix the rounding of x_i +- radius by comparing distances at the boundaries
    hi = np.searchsorted(allv, cs + radius, side="right")
    lo = np.searchsorted(allv, cs - radius, side="left")
    for _ in range(n):
        shrink = (hi > 0) & (allv[np.maximum(hi - 1, 0)] - cs > radius)
        grow = (hi < n) & (allv[np.minimum(hi, n - 1)] - cs <= radius)
        if not (shrink.any() or grow.any()):
            break
        hi = hi - shrink + (grow & ~shrink)
    for _ in range(n):
        shrink = (lo < n) & (cs - allv[np.minimum(lo, n - 1)] > radius)
        grow = (lo > 0) & (cs - allv[np.maximum(lo - 1, 0)] <= radius)
        if not (shrink.any() or grow.any()):
            break
        lo = lo + shrink - (grow & ~shrink)
    m = hi - lo
    mi = (digamma(n) + np.mean(digamma(k_all)) - np.mean(digamma(label_counts))
          - np.mean(digamma(m)))
    return max(0.0, float(mi))


def mutual_info_knn(X, y, n_neighbors: int = 10, random_state: int | None = 0) -> np.ndarray:
    """I(x_j; y) per column of continuous X for integer labels y, in nats.

    Same pre-processing as ``sklearn.feature_selection.mutual_info_classif`` (scale to unit
    std, add 1e-10-scale jitter from ``RandomState(random_state)``) and the same estimator,
    so the numbers match it (tested) at a fraction of the cost.
    """
    X = np.array(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(f"need X (N, p) and y (N,), got {X.shape} and {y.shape}")
    std = X.std(0)
    X /= np.where(std > 0, std, 1.0)
    rng = np.random.RandomState(random_state) if not isinstance(random_state, np.random.RandomState) else random_state
    X += 1e-10 * np.maximum(1, np.mean(np.abs(X), axis=0)) * rng.standard_normal(size=X.shape)
    return np.array([_mi_cd_sorted(X[:, j], y, n_neighbors) for j in range(X.shape[1])])


def source_entropy(labels: np.ndarray) -> float:
    """Plug-in entropy (nats) of one integer-labelled source."""
    return float(mutual_info_score(labels, labels))


def nmi_matrix(sources, latents, discrete_latents: bool | None = None,
               n_neighbors: int = 10, random_state: int | None = 0) -> np.ndarray:
    """NMI[i, j] = I(s_i; z_j) / H(s_i), shape (K sources, L latents), clipped to [0, 1]."""
    s, z = _check(sources, latents)
    s = encode_sources(s)
    discrete = _is_discrete(z, discrete_latents)
    if discrete:
        zl = np.stack([LabelEncoder().fit_transform(z[:, j]) for j in range(z.shape[1])], 1)
    else:
        zl = StandardScaler().fit_transform(z.astype(np.float64))
    out = np.zeros((s.shape[1], z.shape[1]))
    for i in range(s.shape[1]):
        h = source_entropy(s[:, i])
        if h <= 0:  # a constant source carries no information to share out
            continue
        if discrete:
            mi = np.array([mutual_info_score(s[:, i], zl[:, j]) for j in range(zl.shape[1])])
        else:
            # one call per source over all latent columns: the kNN estimate is per column
            mi = mutual_info_knn(zl, s[:, i], n_neighbors=n_neighbors, random_state=random_state)
        out[i] = mi / h
    return np.clip(out, 0.0, 1.0)


def active_latents(latents, discrete_latents: bool | None = None) -> np.ndarray:
    """Boolean mask: range > max range / 20 (integer latents: any spread at all)."""
    z = np.asarray(latents)
    ranges = (z.max(0) - z.min(0)).astype(np.float64)
    if _is_discrete(z, discrete_latents):
        return ranges > 0
    top = ranges.max() if ranges.size else 0.0
    return (ranges > top / 20) if top > 0 else np.zeros(z.shape[1], dtype=bool)


def informative_latents(nmi, n: int) -> np.ndarray:
    """Boolean mask of the ``n`` latents with the most information about the sources: the
    largest column sums of the NMI matrix (K x L), ties to the lower index.

    The active-latent rule (:func:`active_latents`) counts a different number of latents for
    different codes: every whitened direction of a code post-processed by ICA has a range near
    the largest, while a trained code may leave some latents nearly constant. InfoM and InfoC
    average over the latents counted, so two codes compared on the same ``n`` latents each
    (e.g. ``n`` = the number of sources) are compared on equal terms."""
    nmi = np.asarray(nmi, dtype=np.float64)
    if nmi.ndim != 2:
        raise ValueError(f"nmi must be a (sources x latents) matrix, got shape {nmi.shape}")
    if not 1 <= int(n) <= nmi.shape[1]:
        raise ValueError(f"n must be between 1 and the {nmi.shape[1]} latents, got {n}")
    order = np.argsort(-nmi.sum(0), kind="stable")
    mask = np.zeros(nmi.shape[1], dtype=bool)
    mask[order[:int(n)]] = True
    return mask


def _normalised_concentration(M: np.ndarray, axis: int, n_alternatives: int) -> np.ndarray:
    """Per slice, (max/sum - 1/n) / (1 - 1/n); a slice of zeros scores 0 (uniform)."""
    total = M.sum(axis)
    ratio = np.where(total > 0, M.max(axis) / np.where(total > 0, total, 1.0), 1.0 / n_alternatives)
    return (ratio - 1.0 / n_alternatives) / (1.0 - 1.0 / n_alternatives)


def infom_infoc(nmi: np.ndarray, active: np.ndarray) -> tuple[float, float]:
    """InfoM and InfoC from an NMI matrix (K x L) and the active-latent mask."""
    nmi = np.asarray(nmi, dtype=np.float64)
    active = np.asarray(active, dtype=bool)
    K = nmi.shape[0]
    P = nmi[:, active]
    L = P.shape[1]
    if L == 0:
        return 0.0, 0.0
    infom = float(_normalised_concentration(P, 0, K).mean())
    if L == 1:
        infoc = float((P[:, 0] > 0).mean())
    else:
        infoc = float(_normalised_concentration(P, 1, L).mean())
    return infom, infoc


def _cross_entropy(X: np.ndarray, y: np.ndarray, max_iter: int) -> float:
    """In-sample cross-entropy (nats) of an unpenalised, class-balanced multinomial logistic
    regression; a fit that does not converge raises scikit-learn's ConvergenceWarning."""
    model = LogisticRegression(C=np.inf, class_weight="balanced", solver="lbfgs",
                               max_iter=max_iter, tol=1e-4)
    model.fit(X, y)
    return float(log_loss(y, model.predict_proba(X), labels=model.classes_))


@lru_cache(maxsize=64)
def _null_fit(labels: bytes, dtype: str, max_iter: int) -> tuple[float, tuple]:
    """H_null of the labels ``np.frombuffer(labels, dtype)`` and the warnings its fit raised.
    It depends on the labels and the cap alone, and every code scored against the same sources
    needs the same one (chapter 05: every model, seed and post-processing of a dataset), so it
    is fitted once per process."""
    y = np.frombuffer(labels, dtype=dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = _cross_entropy(np.zeros((len(y), 1)), y, max_iter)
    return value, tuple((w.message, w.category) for w in caught)


def _null_cross_entropy(y: np.ndarray, max_iter: int) -> float:
    """:func:`_cross_entropy` of a constant input: the same number a fresh fit gives, and the
    same warnings (a stored fit raises its ``ConvergenceWarning`` again, so counts of
    unconverged fits do not depend on what was scored before)."""
    y = np.ascontiguousarray(y)
    value, raised = _null_fit(y.tobytes(), y.dtype.str, int(max_iter))
    for message, category in raised:
        warnings.warn(message, category, stacklevel=2)
    return value


def probe_inputs(latents, discrete_latents: bool | None = None, probe: str = "converged") -> np.ndarray:
    """What InfoE's logistic regression reads: one-hot codes for integer latents; else, for the
    ``"converged"`` probe, the latents whitened onto every direction whose scale exceeds
    :data:`PROBE_RTOL` of the largest (a single zero column when no latent varies), and for the
    ``"reference"`` probe each latent standardised on its own, as the reference code does.
    Whitening is an invertible linear map of the informative part, so it leaves the
    unpenalised optimum unchanged and makes L-BFGS converge; standardising does not
    decorrelate, so a correlated code's fit stops further from that optimum."""
    if probe not in INFOE_PROBES:
        raise ValueError(f"probe must be one of {INFOE_PROBES}, got {probe!r}")
    z = np.asarray(latents)
    if _is_discrete(z, discrete_latents):
        return OneHotEncoder(sparse_output=False).fit_transform(z)
    if probe == "reference":
        return StandardScaler().fit_transform(z.astype(np.float64))
    zc = z.astype(np.float64) - z.mean(0)
    _, s, Vt = np.linalg.svd(zc, full_matrices=False)
    keep = s > PROBE_RTOL * s[0] if s.size and s[0] > 0 else np.zeros(s.shape, dtype=bool)
    if not keep.any():
        return np.zeros((len(z), 1))
    return zc @ Vt[keep].T * (np.sqrt(len(z) - 1) / s[keep])


def infoe(sources, latents, discrete_latents: bool | None = None,
          max_iter: int | None = None, probe: str = "converged") -> float:
    """Mean over sources of (H_null - CE) / H_null: how much of each source a linear
    (multinomial logistic) read-out of the whole code recovers, in-sample.

    ``probe="converged"`` (ours, the default) fits whitened latents for up to
    :data:`INFOE_MAX_ITER` L-BFGS iterations: invariant to any invertible linear map of the
    code, ICA included. ``probe="reference"`` fits standardised latents for
    :data:`REFERENCE_PROBE_MAX_ITER` iterations, as Hsu et al.'s code does (and so the paper's
    Table 2): it can tell an ICA-rotated code from the original only because it stops early.
    ``max_iter`` overrides the probe's iteration cap; an unconverged fit warns
    (``ConvergenceWarning``) under either probe."""
    s, z = _check(sources, latents)
    s = encode_sources(s)
    X = probe_inputs(z, discrete_latents, probe)
    if max_iter is None:
        max_iter = REFERENCE_PROBE_MAX_ITER if probe == "reference" else INFOE_MAX_ITER
    scores = []
    # small problems: threaded BLAS inside L-BFGS costs 10x more than it saves (measured)
    with threadpool_limits(1):
        for i in range(s.shape[1]):
            y = s[:, i]
            if len(np.unique(y)) < 2:
                continue
            h_null = _null_cross_entropy(y, max_iter)
            ce = _cross_entropy(X, y, max_iter)
            scores.append((h_null - ce) / h_null)
    return float(np.mean(scores)) if scores else float("nan")


def infomec(sources, latents, discrete_latents: bool | None = None, n_neighbors: int = 10,
            random_state: int | None = 0, max_iter: int | None = None, probe: str = "converged") -> dict:
    """InfoM, InfoE, InfoC of ``latents`` (N, L) against ``sources`` (N, K), plus the NMI
    matrix and the active-latent mask. Higher is better for all three. ``probe`` and
    ``max_iter``: InfoE's logistic fits (:func:`infoe`)."""
    s, z = _check(sources, latents)
    nmi = nmi_matrix(s, z, discrete_latents, n_neighbors, random_state)
    active = active_latents(z, discrete_latents)
    m, c = infom_infoc(nmi, active)
    e = infoe(s, z, discrete_latents, max_iter, probe)
    return {"infom": m, "infoe": e, "infoc": c, "nmi": nmi, "active_latents": active}
