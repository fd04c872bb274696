"""Transform families and the errors that measure near-identifiability.

Each family is a scikit-learn-style estimator: ``fit(A, B)`` learns a map h from A's space
into B's space, ``transform(A)`` applies it, and ``score(A, B)`` is the normalised error
``mean_i ||h(a_i) - b_i||_2 / diameter(B)`` (lower is better), the quantity of Table 1.

Families, from most to least constrained:

* :class:`SignedPermutationAlignment` -- match each B axis to one A axis (Hungarian on
  |correlation|), then a per-axis sign and scale and an offset;
* :class:`RigidAlignment` -- rotation/reflection + translation (orthogonal Procrustes), by
  default with one global scale, since a model's code scale is arbitrary;
* :class:`LinearAlignment` -- any affine map (least squares with bias);
* :class:`ICAAlignment` -- unsupervised: whitening + ICA on each side separately, then a
  signed permutation between the components.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from nearid import linalg
from nearid.ica import DEFAULT_COMPONENTS, LOW_VARIANCE, WhitenedICA

FAMILIES = ("permutation", "rigid", "linear", "ica")
# The ICA family's protocol, used by chapter 04 and `nearid align`: whiten each side onto the
# leading components holding this share of the fit rows' variance (at most one per ten rows;
# see nearid.ica.choose_components), fit FastICA on at most ICA_MAX_ROWS rows, and stop it
# after ICA_MAX_ITER iterations. `nearid align` and compare_layers also cap the number of
# components at ICA_MAX_COMPONENTS; compare() caps nothing unless asked (ica_max_components).
ICA_COMPONENTS = DEFAULT_COMPONENTS
ICA_MAX_ROWS = 20_000
ICA_MAX_ITER = 200
ICA_MAX_COMPONENTS = 256
"""At most this many whitened components per side in ``nearid align`` (and
:func:`compare_layers`), whatever the variance rule asks: it bounds the ICA stage's cost and
keeps FastICA in the regime where its estimates are good.

* Cost. One iteration of parallel FastICA on n white rows and k components is two
  (k x n) by (n x k) products, 4 n k^2 flops, plus a k x k eigen-decomposition (O(k^3))
  (Hyvarinen 1999, IEEE TNN 10(3)). With n <= ICA_MAX_ROWS = 20,000 and at most
  ICA_MAX_ITER = 200 iterations, k = 256 bounds a side at about 1 TFLOP (5 GFLOP per
  iteration: under a minute per side on one core). The 95% rule on 20,000 x 4,096
  embeddings (256 planted sources plus noise) asked for 881 components: 12x the
  per-iteration cost at equal rows, and FastICA needs more iterations as k grows.
* Accuracy. Even at the optimum, the mean squared interference of each of the k - 1 other
  sources in an estimated component is of order 1/n per source (the Cramer-Rao bound for
  ICA, Tichavsky, Koldovsky & Oja 2006, IEEE TSP 54(4)), so it grows as (k - 1)/n. The
  rows rule (nearid.ica.ROWS_PER_COMPONENT) allows n/k = 10; 256 keeps n/k >= 39 for the
  10,000 fit rows of a 20,000-row file and >= 78 at ICA_MAX_ROWS.
* Nothing a chapter computes changes: chapters call compare() and WhitenedICA without a
  cap (their largest setting is 64 components, ch04's ica_grid).

When the cap binds, ICA sees the 256 leading principal components of each side, and the
output says so (``ica_components_by_rule``, ``ica_max_components``, and the share of the
variance those components hold). ``--ica-max-components 0`` lifts it."""

EFFICIENCY_MIN_GAP = float(np.sqrt(np.finfo(np.float32).eps))
"""The smallest perm - rigid gap (in units of B's diameter, 3.45e-4) for which
:func:`ica_efficiency` is a number; below it the efficiency is NaN ("n/a", JSON null).

The errors are mean row distances divided by B's diameter, so the data's scale is 1. The
fast path fits every map from float32 cross-products, which carry relative errors of about
1e-7 to 1e-6 of their size, and the d x d solves behind the maps amplify that by their
conditioning. Measured on float32 embeddings (2,000 to 4,000 rows, 16 to 64 columns, with
and without a large offset) compared with themselves or with a signed permutation of
themselves, where perm and rigid are both exactly 0, the computed errors were 1e-7 to
7e-7 and their gap 1e-7 to 6e-7 (1e-15 in float64): the efficiency came out as -2e5 to
-9e5. A gap below sqrt(eps32) = 3.45e-4 of the diameter -- the usual threshold below which
a difference of two float32 results has lost half its digits, and 500 times the largest
round-off gap measured -- is taken as no gap. The paper's gaps are 0.069 to 0.176; the
smallest in this book's reference results is 0.0046 (smoke) and 0.031 (quick)."""


# --------------------------------------------------------------------------- validation
def check_pair(A, B, min_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate two paired embedding matrices: 2-D, same row count, finite, enough rows."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    for name, X in (("A", A), ("B", B)):
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array (rows = inputs), got shape {X.shape}")
        if not np.isfinite(X).all():
            bad = int((~np.isfinite(X)).sum())
            raise ValueError(f"{name} contains {bad} NaN or infinite values")
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must have the same number of rows (the same inputs in the "
                         f"same order), got {A.shape[0]} and {B.shape[0]}")
    if A.shape[0] < min_rows:
        raise ValueError(f"need at least {min_rows} rows, got {A.shape[0]}")
    return A, B


# --------------------------------------------------------------------------- errors
def latent_diameter(Z, quantile: float = 0.99, max_points: int = 2000) -> float:
    """Robust diameter of a point cloud: a high quantile of its pairwise distances.

    The plain maximum is dominated by a single outlier; the 0.99 quantile of pairwise
    distances over at most ``max_points`` evenly spaced rows (deterministic) is stable.
    """
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[0] < 2:
        raise ValueError("latent_diameter needs a 2-D array with at least 2 rows")
    if Z.shape[0] > max_points:
        Z = Z[np.linspace(0, Z.shape[0] - 1, max_points).astype(int)]
    # pairwise distances from matrix products (|x|^2 + |y|^2 - 2 x.y on centred rows), 256
    # rows at a time, into one array of the n(n-1)/2 distances: several times faster than
    # scipy's pdist for 2000 x 768 and equal to it within 1e-12 relative
    Z = Z - Z.mean(0)
    sq = np.einsum("ij,ij->i", Z, Z)
    n = Z.shape[0]
    dist = np.empty(n * (n - 1) // 2)
    at, step = 0, 256
    for start in range(0, n - 1, step):
        stop = min(start + step, n - 1)
        G = Z[start:stop] @ Z[start:].T
        for i in range(stop - start):  # row start + i against every later row
            row = G[i, i + 1:]
            row *= -2
            row += sq[start + i]
            row += sq[start + i + 1:]
            dist[at:at + row.size] = row
            at += row.size
    np.sqrt(np.maximum(dist, 0.0, out=dist), out=dist)
    d = float(np.quantile(dist, quantile, overwrite_input=True))
    if d == 0:
        raise ValueError("the point cloud has zero diameter (all rows equal)")
    return d


def normalised_error(pred, target, diameter: float | None = None) -> float:
    """Mean l2 distance between paired rows, divided by the target's diameter."""
    pred, target = check_pair(pred, target, min_rows=1)
    if pred.shape != target.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {target.shape}")
    diameter = latent_diameter(target) if diameter is None else diameter
    return float(np.linalg.norm(pred - target, axis=1).mean() / diameter)


# --------------------------------------------------------------------------- families
class _Alignment(BaseEstimator):
    """Shared score(): the normalised l2 error of the fitted map."""

    def score(self, A, B, diameter: float | None = None) -> float:
        return normalised_error(self.transform(A), B, diameter)

    def fit_transform(self, A, B) -> np.ndarray:
        return self.fit(A, B).transform(A)

    def _check_dims(self, A):
        check_is_fitted(self, "n_features_in_")
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2 or A.shape[1] != self.n_features_in_:
            raise ValueError(f"expected a 2-D array with {self.n_features_in_} columns, "
                             f"got shape {A.shape}")
        return A


def _abs_correlation(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """|Pearson correlation| between every column of A and every column of B."""
    Az = A - A.mean(0)
    Bz = B - B.mean(0)
    sa = np.linalg.norm(Az, axis=0)
    sb = np.linalg.norm(Bz, axis=0)
    sa[sa == 0] = 1.0
    sb[sb == 0] = 1.0
    return np.abs((Az / sa).T @ (Bz / sb))


def match_columns(A, B) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian matching of A's columns to B's by |correlation|; returns (rows_A, cols_B)."""
    C = _abs_correlation(np.asarray(A, float), np.asarray(B, float))
    return linear_sum_assignment(-C)


class SignedPermutationAlignment(_Alignment):
    """b_j ~ s_j * a_pi(j) + c_j: a matching, a sign and (optionally) a scale per axis.

    B axes left unmatched (when A has fewer columns) are predicted by their mean.
    """

    def __init__(self, scale: bool = True):
        self.scale = scale

    def fit(self, A, B) -> "SignedPermutationAlignment":
        A, B = check_pair(A, B)
        rows, cols = match_columns(A, B)
        Ac = A - A.mean(0)
        Bc = B - B.mean(0)
        coef = np.zeros(B.shape[1])
        src = np.full(B.shape[1], -1)
        for r, c in zip(rows, cols):
            a, b = Ac[:, r], Bc[:, c]
            ab, aa = float(a @ b), float(a @ a)
            if self.scale:
                coef[c] = ab / aa if aa > 0 else 0.0
            else:
                coef[c] = 1.0 if ab >= 0 else -1.0
            src[c] = r
        self.source_ = src
        self.coef_ = coef
        self.mean_A_ = A.mean(0)
        self.mean_B_ = B.mean(0)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        A = self._check_dims(A) - self.mean_A_
        out = np.tile(self.mean_B_, (A.shape[0], 1))
        m = self.source_ >= 0
        out[:, m] += A[:, self.source_[m]] * self.coef_[m]
        return out


class RigidAlignment(_Alignment):
    """Orthogonal Procrustes with translation: b ~ s * R a + t, R with orthonormal columns.

    ``scale=True`` (default) allows one global scale s, because a model's code scale is not
    fixed by its loss; normalising the error by B's diameter then makes the family
    scale-free. ``scale=False`` is the strict rigid family (s = 1).
    """

    def __init__(self, scale: bool = True):
        self.scale = scale

    def fit(self, A, B) -> "RigidAlignment":
        A, B = check_pair(A, B)
        self.mean_A_, self.mean_B_ = A.mean(0), B.mean(0)
        Ac, Bc = A - self.mean_A_, B - self.mean_B_
        self.fallbacks_: list[str] = []
        U, S, Vt = linalg.svd(Ac.T @ Bc, self.fallbacks_, what="rigid SVD")
        self.rotation_ = U @ Vt  # (d_A, d_B), orthonormal columns or rows
        norm = float((Ac ** 2).sum())
        self.scale_ = float(S.sum() / norm) if (self.scale and norm > 0) else 1.0
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        A = self._check_dims(A)
        return self.scale_ * (A - self.mean_A_) @ self.rotation_ + self.mean_B_


class LinearAlignment(_Alignment):
    """Any affine map b ~ M a + t, fitted by least squares."""

    def fit(self, A, B) -> "LinearAlignment":
        from sklearn.linear_model import LinearRegression

        A, B = check_pair(A, B)
        self.regression_ = LinearRegression().fit(A, B)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        return self.regression_.predict(self._check_dims(A))


class ICAAlignment(_Alignment):
    """Unsupervised route: whiten + ICA each side, then a signed permutation of components.

    Each side is whitened and rotated to independent components *separately*
    (:class:`nearid.ica.WhitenedICA`: constant and duplicate columns dropped, whitened onto
    the leading components chosen by ``n_components``, see
    :func:`nearid.ica.choose_components`). The pairing of rows is then used for what the
    permutation family uses it for, and nothing more: matching components (Hungarian on
    |correlation|), their signs and, with ``scale=True``, one least-squares scale per matched
    component. No mixing map is regressed. The matched A components are sent into B's space
    through B's ICA mixing; B's directions outside its kept components are predicted by
    their mean. ``max_rows`` fits the two FastICA rotations on a seeded random subset of at
    most that many rows, which bounds FastICA's cost for very many rows (None = all rows);
    the whitening and the matching always use every row. ``max_components`` caps the
    number of whitened components per side (None = no cap; see :data:`ICA_MAX_COMPONENTS`).
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 random_state: int | None = 0, max_iter: int = 1000, max_rows: int | None = None,
                 scale: bool = True, max_components: int | None = None):
        self.n_components = n_components
        self.random_state = random_state
        self.max_iter = max_iter
        self.max_rows = max_rows
        self.scale = scale
        self.max_components = max_components

    def fit(self, A, B) -> "ICAAlignment":
        A, B = check_pair(A, B, min_rows=3)
        self.ica_A_, self.ica_B_ = (
            WhitenedICA(n_components=self.n_components, random_state=self.random_state,
                        max_iter=self.max_iter, max_rows=self.max_rows,
                        max_components=self.max_components).fit(X) for X in (A, B))
        SA, SB = self.ica_A_.transform(A), self.ica_B_.transform(B)
        # per-component least-squares scale, exactly as in the permutation family, so that the
        # ICA efficiency compares like with like (only the ICA rotations differ)
        self.matching_ = SignedPermutationAlignment(scale=self.scale).fit(SA, SB)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        SA = self.ica_A_.transform(self._check_dims(A))
        return self.ica_B_.inverse_transform(self.matching_.transform(SA))


def make_alignment(family: str, random_state: int | None = 0, **ica_params) -> _Alignment:
    """A fresh estimator for one of :data:`FAMILIES` (``ica_params`` go to ICAAlignment)."""
    if family == "permutation":
        return SignedPermutationAlignment()
    if family == "rigid":
        return RigidAlignment()
    if family == "linear":
        return LinearAlignment()
    if family == "ica":
        return ICAAlignment(random_state=random_state, **ica_params)
    raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")


# --------------------------------------------------------------------------- summaries
def ica_efficiency(permutation: float, rigid: float, ica: float,
                   min_gap: float = EFFICIENCY_MIN_GAP) -> float:
    """(perm - ica) / (perm - rigid): the share of the perm-to-rigid gap that ICA closes.

    NaN (not defined) when ``|perm - rigid| < min_gap``: the errors are in units of B's
    diameter, and a gap below :data:`EFFICIENCY_MIN_GAP` (sqrt of float32's eps, 3.45e-4)
    is within the round-off of the float32 computation behind them, so the ratio would be
    round-off magnified (A against itself printed -260696952% with a 1e-9 guard), not a
    share. NaN is "n/a" in ``nearid align``'s table and null in its JSON. A bootstrap over
    rows passes its own ``min_gap`` (chapter 04 keeps 1e-9: a resample's gap is a statistical
    draw, not a new computation with new round-off).
    """
    gap = permutation - rigid
    if not abs(gap) >= min_gap:  # no gap to close (or a NaN error): the ratio means nothing
        return float("nan")
    return float((permutation - ica) / gap)


def linear_cka(X, Y) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019), 1 = same up to rotation+scale."""
    X, Y = check_pair(X, Y)
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    return _cka_from_moments(X.T @ X, Y.T @ Y, X.T @ Y)


def _cka_from_moments(gram_a, gram_b, cross) -> float:
    """Linear CKA from centred cross-products: ||A'B||_F^2 / (||A'A||_F ||B'B||_F)."""
    num = float(np.linalg.norm(cross, "fro")) ** 2
    den = float(np.linalg.norm(gram_a, "fro")) * float(np.linalg.norm(gram_b, "fro"))
    return num / den if den > 0 else float("nan")


@dataclass
class AlignmentResult:
    """Table 1 for one pair of embeddings: what :func:`compare` measured.

    ``errors[family]`` is the mean held-out l2 error of the family's map from A to B divided
    by B's diameter; ``row_errors[family]`` the same per evaluation row (for intervals);
    ``cka`` linear CKA on the fit rows; ``ica_components`` and ``ica_variance`` the number
    of whitened components each side kept and the share of its fit rows' variance they
    hold; ``ica_converged`` whether each side's FastICA converged; ``dtype`` the precision
    the cross-products were computed in; ``seconds`` the wall time of the comparison and
    ``timings`` its split by stage (for a layer grid: the whole grid's).
    ``ica_max_components`` is the cap on components that was applied (None = none) and
    ``ica_components_by_rule`` what the variance rule asked for before it (the cap bound
    on a side where the two differ); ``fallbacks`` lists the numerical fallbacks used
    (a decomposition retried with another LAPACK driver, FastICA refitted; empty = none).
    """

    errors: dict[str, float]
    row_errors: dict[str, np.ndarray] = field(repr=False)
    ica_efficiency: float
    cka: float
    n_fit: int
    n_eval: int
    dim_a: int
    dim_b: int
    ica_components: tuple[int, int] | None = None
    ica_variance: tuple[float, float] | None = None
    ica_converged: tuple[bool, bool] | None = None
    dtype: str = "float64"
    seconds: float | None = None
    timings: dict[str, float] = field(default_factory=dict, repr=False)
    ica_max_components: int | None = None
    ica_components_by_rule: tuple[int, int] | None = None
    fallbacks: list[str] = field(default_factory=list)

    @property
    def ica_cap_bound(self) -> tuple[bool, bool] | None:
        """Whether ``ica_max_components`` lowered each side's number of components."""
        if self.ica_components is None or self.ica_components_by_rule is None or self.ica_max_components is None:
            return None
        return tuple(bool(k < r) for k, r in zip(self.ica_components, self.ica_components_by_rule))

    def to_dict(self) -> dict:
        """Flat numbers (no per-row arrays): one entry per family, then the rest. The cap's
        keys (``ica_max_components``, ``ica_components_by_rule``, ``ica_cap_bound``) appear
        when a cap was applied, ``fallbacks`` when one was used."""
        out: dict = dict(self.errors)
        out.update(ica_efficiency=self.ica_efficiency, cka=self.cka, n_fit=self.n_fit,
                   n_eval=self.n_eval, dim_a=self.dim_a, dim_b=self.dim_b)
        if self.ica_components is not None:
            out.update(ica_components=list(self.ica_components), ica_variance=list(self.ica_variance))
            if self.ica_max_components is not None:
                out.update(ica_max_components=self.ica_max_components,
                           ica_components_by_rule=list(self.ica_components_by_rule),
                           ica_cap_bound=list(self.ica_cap_bound))
        if self.fallbacks:
            out.update(fallbacks=list(self.fallbacks))
        return out

    def __str__(self) -> str:
        return format_alignment_table(self.to_dict())

    def __repr__(self) -> str:
        def num(v):
            return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

        errs = ", ".join(f"{k}={num(v)}" for k, v in self.errors.items())
        lines = [f"AlignmentResult(A {self.dim_a}-d -> B {self.dim_b}-d; {self.n_fit} fit rows, "
                 f"{self.n_eval} held-out rows; {self.dtype})",
                 f"  errors (lower = more alike): {errs}" if errs else "  errors: none computed",
                 f"  ica_efficiency={num(self.ica_efficiency)}, cka={num(self.cka)}"]
        if self.ica_components is not None:
            lines.append(f"  ica_components={self.ica_components}, ica_variance=("
                         f"{self.ica_variance[0]:.2f}, {self.ica_variance[1]:.2f})")
            if self.ica_max_components is not None:
                lines.append(f"  ica_max_components={self.ica_max_components}, ica_components_by_rule="
                             f"{self.ica_components_by_rule}")
        lines += [f"  fallback: {note}" for note in self.fallbacks]
        return "\n".join(lines)


def compare(A, B, *, fit_fraction: float = 0.5, seed: int = 0, families=FAMILIES,
            ica_components: float | int | str | None = ICA_COMPONENTS, ica_max_rows: int | None = None,
            ica_max_iter: int = 1000, cka: bool = True, dtype: str | None = None,
            progress: bool = False, reference: bool = False, fit_rows: int | None = None,
            ica_max_components: int | None = None) -> AlignmentResult:
    """Fit every family on a random ``fit_fraction`` of the rows, score it on the rest.

    ``A`` and ``B`` hold embeddings of the same inputs, row for row: numpy arrays (memory-
    mapped ones are read block by block, never copied whole) or torch tensors of any dtype
    on any device. ``families`` is any subset of :data:`FAMILIES` (it may be empty when only
    ``cka`` is wanted). The ``ica_*`` arguments set the ICA family's protocol (see
    :class:`ICAAlignment`; ``ica_max_rows`` = None fits FastICA on every fit row);
    ``nearid align`` and :func:`compare_layers` pass the declared protocol,
    ``ica_max_rows=ICA_MAX_ROWS, ica_max_iter=ICA_MAX_ITER``, which bounds FastICA's cost
    for many rows, and ``ica_max_components=ICA_MAX_COMPONENTS``, which bounds it for wide
    embeddings (the default None caps nothing: the chapters' protocol; ``result.ica_cap_bound``
    says whether the cap lowered a side's components). CKA is linear CKA on the fit rows (it
    fits nothing, so it needs no held-out rows).

    A decomposition that does not converge (LAPACK's "SVD did not converge") is retried
    with a more robust driver (:mod:`nearid.linalg`), and FastICA failing numerically is
    refitted (see :class:`nearid.ica.WhitenedICA`); ``result.fallbacks`` says which ran.

    Everything but FastICA is computed from d x d cross-products accumulated over blocks
    of rows; see the README section on ``nearid align`` for what runs in float32.
    ``dtype``: None = float32 arithmetic when both inputs are float32 (or narrower) and the
    data are well enough conditioned for it, else float64; "float64" forces float64.
    ``result.dtype`` says which was used.
    ``progress`` shows a progress bar on stderr when the work takes more than a few seconds.
    ``reference=True`` runs the slow, obviously-correct path instead (float64 copies, one
    scikit-learn-style estimator per family fitted on the fit rows); tests check that both
    agree.
    ``fit_rows`` fits on only the first that many rows of the (seeded) fit split and scores
    on the same held-out rows: nested fit sets for a trend over the number of fit rows, by
    the very computation that gives the full table (``fit_rows`` = all fit rows is the table).
    """
    import time

    start = time.perf_counter()
    families = tuple(families)
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise ValueError(f"unknown family {bad[0]!r}; valid: {', '.join(FAMILIES)}")
    ica_params = dict(ica_components=ica_components, ica_max_rows=ica_max_rows, ica_max_iter=ica_max_iter,
                      ica_max_components=ica_max_components)
    A, B = _matrix(A, "A"), _matrix(B, "B")
    _check_rows(A, B)
    if reference:
        res = _compare_reference(A, B, fit_fraction=fit_fraction, seed=seed, families=families,
                                 want_cka=cka, fit_rows=fit_rows, **ica_params)
    else:
        grid, _ = _engine([A], [B], fit_fraction=fit_fraction, seed=seed, families=families,
                          want_cka=cka, dtype=dtype, progress=progress, fit_rows=fit_rows, **ica_params)
        res = grid[0][0]
    res.seconds = time.perf_counter() - start
    return res


def alignment_table(A, B, fit_fraction: float = 0.5, seed: int = 0, families=FAMILIES,
                    ica_components: float | int | str | None = ICA_COMPONENTS,
                    ica_max_rows: int | None = None, ica_max_iter: int = 1000,
                    ica_max_components: int | None = None) -> dict:
    """:func:`compare` as a flat dict (one error per family, efficiency, CKA, split sizes)."""
    return compare(A, B, fit_fraction=fit_fraction, seed=seed, families=families,
                   ica_components=ica_components, ica_max_rows=ica_max_rows,
                   ica_max_iter=ica_max_iter, ica_max_components=ica_max_components).to_dict()


METRICS = FAMILIES + ("cka",)


def compare_layers(layers_a: Mapping[str, object], layers_b: Mapping[str, object], *,
                   metric: str = "rigid", fit_fraction: float = 0.5, seed: int = 0,
                   ica_components: float | int | str | None = ICA_COMPONENTS,
                   ica_max_rows: int | None = ICA_MAX_ROWS, ica_max_iter: int = ICA_MAX_ITER,
                   dtype: str | None = None, progress: bool = False,
                   ica_max_components: int | None = ICA_MAX_COMPONENTS):
    """Compare every layer of model A with every layer of model B: a pandas DataFrame.

    ``layers_a`` and ``layers_b`` map layer names to (rows, features) embeddings of the same
    inputs in the same order (every array in both must have the same number of rows; widths
    may differ). Row ``i``, column ``j`` of the result is :func:`compare` of A's layer ``i``
    with B's layer ``j`` under ``metric``:

    * "permutation", "rigid", "linear", "ica": the held-out error of that family's map from
      A's layer to B's, divided by the B layer's diameter (0 = identical; lower = more alike);
    * "cka": linear CKA on the fit rows (1 = same up to rotation and scale; higher = more
      alike).

    Every pair uses the same fit/held-out split (``fit_fraction``, ``seed``), so the numbers
    in a row or column are comparable; each layer's ICA is fitted once and reused, with the
    protocol of ``nearid align`` (FastICA on at most ``ica_max_rows`` fit rows, at most
    ``ica_max_iter`` iterations, at most ``ica_max_components`` components per side). The
    frame's ``attrs`` record the metric, whether lower is better, the split sizes, and any
    numerical fallbacks used (``fallbacks``).
    """
    import pandas as pd

    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    names = []
    mats = []
    for side, layers in (("A", layers_a), ("B", layers_b)):
        if not isinstance(layers, Mapping) or not layers:
            raise ValueError(f"layers_{side.lower()} must be a non-empty mapping of layer name -> array")
        names.append([str(k) for k in layers])
        mats.append([_matrix(v, f"{side} layer {k!r}") for k, v in layers.items()])
    rows = {f"A layer {k!r}": X.shape[0] for k, X in zip(names[0], mats[0])}
    rows.update({f"B layer {k!r}": X.shape[0] for k, X in zip(names[1], mats[1])})
    if len(set(rows.values())) > 1:
        listing = ", ".join(f"{k}: {v}" for k, v in rows.items())
        raise ValueError(f"every layer must have the same rows (the same inputs in the same order); "
                         f"row counts differ: {listing}")
    families = () if metric == "cka" else (metric,)
    grid, split = _engine(mats[0], mats[1], fit_fraction=fit_fraction, seed=seed, families=families,
                          want_cka=metric == "cka", dtype=dtype, progress=progress,
                          ica_components=ica_components, ica_max_rows=ica_max_rows,
                          ica_max_iter=ica_max_iter, ica_max_components=ica_max_components,
                          names=(names[0], names[1]))
    values = [[(r.cka if metric == "cka" else r.errors[metric]) for r in row] for row in grid]
    df = pd.DataFrame(values, index=pd.Index(names[0], name="A layer"),
                      columns=pd.Index(names[1], name="B layer"))
    df.attrs.update(metric=metric, lower_is_better=metric != "cka", n_fit=split[0], n_eval=split[1],
                    fit_fraction=fit_fraction, seed=seed, dtype=grid[0][0].dtype)
    notes = list(dict.fromkeys(note for row in grid for r in row for note in r.fallbacks))
    if notes:
        df.attrs["fallbacks"] = notes
    return df


def format_alignment_table(res: dict) -> str:
    """The text table ``nearid align`` prints: one line of explanation per family.

    A warning line follows when a side's whitened components hold less than half of its
    variance (the ICA row then sees little of that side)."""
    def num(v):
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    eff = res.get("ica_efficiency")
    eff_s = "n/a" if eff is None or math.isnan(eff) else f"{100 * eff:.0f}%"
    eff_note = "(perm - ica) / (perm - rigid)"
    if eff_s == "n/a" and all(isinstance(res.get(f), float) for f in ("permutation", "rigid")):
        if abs(res["permutation"] - res["rigid"]) < EFFICIENCY_MIN_GAP:
            eff_note += (f"; not defined: perm and rigid differ by less than {EFFICIENCY_MIN_GAP:.1e} "
                         "(numerical noise), there is no gap to close")
    notes = {"permutation": "signed permutation + per-axis scale",
             "rigid": "rotation/reflection + global scale + shift",
             "linear": "any affine map",
             "ica": "whiten + ICA each side, match components"}
    rows = [(fam, num(res[fam]), note) for fam, note in notes.items() if fam in res]
    if all(f in res for f in ("permutation", "rigid", "ica")):
        rows.append(("ica efficiency", eff_s, eff_note))
    rows.append(("linear CKA", num(res.get("cka")), "similarity, 1 = same up to rotation + scale"))
    head = (f"A: {res['dim_a']}-d, B: {res['dim_b']}-d; fitted on {res['n_fit']} rows, "
            f"evaluated on {res['n_eval']} held-out rows\n"
            "error = mean ||h(a) - b|| / diameter(B)   (0 = identical, lower is better)\n")
    width = max(len(r[0]) for r in rows)
    body = "\n".join(f"{name:<{width}}  {val:>6}   {note}" for name, val, note in rows)
    comps, var = res.get("ica_components"), res.get("ica_variance")
    if comps is not None and var is not None:
        body += (f"\nICA whitened components: A {comps[0]} ({100 * var[0]:.0f}% of its variance), "
                 f"B {comps[1]} ({100 * var[1]:.0f}%)")
        cap, by_rule = res.get("ica_max_components"), res.get("ica_components_by_rule")
        if cap is not None and by_rule is not None:
            bound = [side for side, k, r in zip("AB", comps, by_rule) if k < r]
            if bound:
                body += (f"; capped at {cap} per side (the rule asked for A {by_rule[0]}, B {by_rule[1]}; "
                         "--ica-max-components)")
            else:
                body += f"; cap {cap} per side, not reached"
        for side, k, v in (("A", comps[0], var[0]), ("B", comps[1], var[1])):
            if v is not None and v < LOW_VARIANCE:
                body += (f"\nwarning: {side}'s {k} whitened components hold only {100 * v:.0f}% of its "
                         "variance; the ICA row sees little of it (raise --ica-components)")
    converged = res.get("ica_converged")
    if converged is not None:
        for side, ok in zip("AB", converged):
            if not ok:
                body += (f"\nnote: FastICA stopped at its iteration cap on {side}; its components may be "
                         "rotated away from the independent axes")
    for note in res.get("fallbacks") or ():
        body += f"\nnumerical fallback: {note}"
    return head + body


# --------------------------------------------------------------------------- the fast path
# Everything except FastICA is computed from d x d cross-products of the fit rows, streamed
# over blocks of rows, so an input is never copied whole (a memory-mapped .npy is read block
# by block) and the arithmetic is a few large matrix products. Precision:
# * float32 inputs are multiplied in float32 (BLAS sgemm/ssyrk, twice as fast as float64),
#   one block of rows at a time, and the block products are summed in float64. Each block
#   is first shifted by one of its own rows, so a large common offset (the mean of
#   transformer embeddings is often far from 0) cancels exactly instead of eating digits.
#   The relative error of a cross-product is then about 1e-7 to 1e-6 of its size.
# * where that is not enough, float64 is used: when the fit rows' covariance of A (for the
#   linear family) or the whitened directions of either side (for ICA) reach below what
#   float32 sums resolve (about 10 * eps32 * trace), the fit pass is redone in float64
#   (``dtype="float64"`` forces it); eigen-decompositions, SVD, solves and the Hungarian
#   matching always run in float64 on the d x d matrices.
# * per-row errors are computed in the input precision, divided by the diameter in float64.
BLOCK_ELEMENTS = 1 << 22  # numbers per input gathered per block of rows (16 MB in float32)
MIN_BLOCK_ROWS = 256
PROGRESS_DELAY = 2.0  # seconds before a progress bar appears
# d x d decompositions of matrices narrower than this run on one BLAS thread (see _run_grid);
# wider ones (a 4,096-wide SVD takes minutes) use the threads the caller allows. No chapter
# reaches it, so their numbers never depend on the thread count.
SERIAL_DECOMPOSITION_WIDTH = 2048
# Relative cost of each piece of work, for a progress bar whose remaining time is honest:
# in multiply-adds of a float64 matrix product. Measured in CPU seconds with OpenBLAS on one
# core of an AMD EPYC (Zen 3), d = 2,048 and 4,096: a float32 product costs half as much per
# multiply-add, an SVD of a d x d matrix (LAPACK gesdd) 11 to 13 d^3, a symmetric
# eigen-decomposition (syevd) 3.7 to 4.9 d^3, and one FastICA iteration on n rows and k
# components about 2 n k^2 (two products) + 270 n k (the logcosh contrast, elementwise)
# + a k x k eigh (its symmetric decorrelation).
_UNITS = dict(float32=0.5, svd=12.0, eigh=4.3, logcosh=270.0, gather=4.0)
_RTOL_CONSTANT = 1e-9  # as nearid.ica.Whitener: a column this flat is constant (a dead unit)


class _NeedFloat64(Exception):
    """float32 cross-products cannot resolve these data: redo the fit pass in float64."""


def _as_numpy(X):
    """numpy arrays (and memory maps) pass through; torch tensors (any device and dtype)
    become numpy arrays, half precision widened to float32; anything else via np.asarray."""
    if hasattr(X, "detach") and hasattr(X, "cpu"):
        t = X.detach().cpu()
        if t.is_floating_point() and t.element_size() < 4:  # float16, bfloat16
            t = t.float()
        return t.numpy()
    return X if isinstance(X, np.ndarray) else np.asarray(X)


def _matrix(X, name: str) -> np.ndarray:
    """A 2-D numeric array (not copied), or a ValueError that names the side."""
    X = _as_numpy(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows = inputs), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {X.dtype}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {X.shape}")
    return X


def _check_rows(A, B) -> None:
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must have the same number of rows (the same inputs in the "
                         f"same order), got {A.shape[0]} and {B.shape[0]}")


def _narrow(X) -> bool:
    """True when float32 holds X's values exactly (float32 and narrower, bool, small ints)."""
    k, size = X.dtype.kind, X.dtype.itemsize
    return k == "b" or (k == "f" and size <= 4) or (k in "iu" and size <= 2)


def _check_finite(X, name: str, rows_per_block: int) -> None:
    """Scan X block by block (no full-size temporary); raise naming the side and the rows."""
    if X.dtype.kind != "f":
        return
    bad_count, bad_rows, first = 0, 0, None
    for start in range(0, X.shape[0], rows_per_block):
        blk = X[start:start + rows_per_block]
        with np.errstate(over="ignore", invalid="ignore"):
            total = blk.sum()
        if np.isfinite(total):
            continue
        bad = ~np.isfinite(blk)
        if bad.any():
            rows = np.flatnonzero(bad.any(1))
            bad_count += int(bad.sum())
            bad_rows += rows.size
            first = start + int(rows[0]) if first is None else first
    if bad_count:
        raise ValueError(f"{name} contains {bad_count} NaN or infinite values in {bad_rows} rows "
                         f"(first row {first})")


def _split(n: int, width: int, fit_fraction: float, seed: int,
           fit_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, evaluation rows): a seeded permutation of the rows, cut at ``fit_fraction``.
    ``fit_rows`` keeps only the first that many of the fit rows (nested subsets for one seed:
    the evaluation rows never change)."""
    if not 0 < fit_fraction < 1:
        raise ValueError(f"fit_fraction must lie in (0, 1), got {fit_fraction}")
    n_fit = int(round(fit_fraction * n))
    need = width + 2
    if n_fit < need or n - n_fit < 3:
        raise ValueError(f"too few rows: {n} rows with fit_fraction={fit_fraction} give "
                         f"{n_fit} fit and {n - n_fit} evaluation rows; need at least "
                         f"{need} fit rows (embedding width + 2) and 3 evaluation rows")
    order = np.random.default_rng(seed).permutation(n)
    if fit_rows is not None:
        # fewer rows than the width are allowed here (a trend's smallest subsets): the linear
        # map is then the minimum-norm least-squares one, in float64
        if not 3 <= fit_rows <= n_fit:
            raise ValueError(f"fit_rows must lie in [3, {n_fit}] (up to the {n_fit} rows of the fit "
                             f"split), got {fit_rows}")
        return order[:fit_rows], order[n_fit:]
    return order[:n_fit], order[n_fit:]


def _diameter_rows(eval_idx: np.ndarray, max_points: int = 2000) -> np.ndarray:
    """The rows latent_diameter(B[eval_idx]) uses, as indices into B."""
    if eval_idx.size <= max_points:
        return eval_idx
    return eval_idx[np.linspace(0, eval_idx.size - 1, max_points).astype(int)]


class _Moments:
    """Running sums over blocks of one matrix's rows, each block shifted by ``shift``."""

    def __init__(self, shift: np.ndarray, full: bool):
        d = shift.shape[0]
        self.shift, self.full = shift, full
        self.total = np.zeros(d)
        self.gram = np.zeros((d, d)) if full else None
        self.sq = np.zeros(d)
        self.low = np.full(d, np.inf)
        self.high = np.full(d, -np.inf)

    def add(self, X: np.ndarray) -> None:
        self.total += X.sum(0, dtype=np.float64)
        np.minimum(self.low, X.min(0), out=self.low)
        np.maximum(self.high, X.max(0), out=self.high)
        if self.full:
            self.gram += X.T @ X  # one syrk in the block's precision, summed in float64
        # the squared norms are summed the same way whether or not the gram is wanted, so a
        # family's error does not depend on which other families (or CKA) were asked for
        self.sq += np.einsum("ij,ij->j", X, X)

    def finish(self, n: int) -> "_Stats":
        dmean = self.total / n
        gram = self.gram - n * np.outer(dmean, dmean) if self.full else None
        sq = self.sq - n * dmean ** 2
        shift = self.shift.astype(np.float64)
        absmax = float(np.max(np.maximum(np.abs(self.low + shift), np.abs(self.high + shift))))
        return _Stats(n=n, shift=self.shift, dmean=dmean, gram=gram, sq=np.maximum(sq, 0.0),
                      spread=self.high - self.low, absmax=absmax)


@dataclass
class _Stats:
    """One matrix on the fit rows: centred sums of products (``gram``, or only the diagonal
    ``sq``), the mean as ``shift + dmean``, and each column's range (to find dead units)."""

    n: int
    shift: np.ndarray
    dmean: np.ndarray
    gram: np.ndarray | None
    sq: np.ndarray
    spread: np.ndarray
    absmax: float
    cache: dict = field(default_factory=dict)

    @property
    def mean(self) -> np.ndarray:
        return self.shift.astype(np.float64) + self.dmean

    @property
    def nonconstant(self) -> np.ndarray:
        return self.spread > _RTOL_CONSTANT * max(self.absmax, 1e-300)


def _gather(X, idx: np.ndarray, dtype) -> np.ndarray:
    blk = X[idx]
    return blk if blk.dtype == dtype else blk.astype(dtype)


def _fit_pass(A, Bs, rows, dtype, stats_a, stats_bs, full_a, full_b, rows_per_block, tick):
    """One pass over the fit rows: A's and each B's moments (unless given) and every A'B."""
    shift_a = stats_a.shift if stats_a else np.array(A[rows[0]], dtype=dtype)
    acc_a = None if stats_a else _Moments(shift_a, full_a)
    shifts_b = [s.shift if s else np.array(B[rows[0]], dtype=dtype) for B, s in zip(Bs, stats_bs)]
    acc_b = [None if s else _Moments(sh, full_b) for s, sh in zip(stats_bs, shifts_b)]
    cross = [np.zeros((A.shape[1], B.shape[1])) for B in Bs]
    for start in range(0, len(rows), rows_per_block):
        idx = rows[start:start + rows_per_block]
        Xa = _gather(A, idx, dtype)
        Xa -= shift_a
        if acc_a:
            acc_a.add(Xa)
        for j, B in enumerate(Bs):
            Xb = _gather(B, idx, dtype)
            Xb -= shifts_b[j]
            if acc_b[j]:
                acc_b[j].add(Xb)
            cross[j] += Xa.T @ Xb  # sgemm/dgemm of one block, summed in float64
        tick(idx.size)
    n = len(rows)
    stats_a = stats_a or acc_a.finish(n)
    stats_bs = [s or acc.finish(n) for s, acc in zip(stats_bs, acc_b)]
    for j, sb in enumerate(stats_bs):
        cross[j] -= n * np.outer(stats_a.dmean, sb.dmean)
    return stats_a, stats_bs, cross


def _signed_matching(cross, sq_a, sq_b, scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """SignedPermutationAlignment.fit from centred sums: (source A column or -1, coefficient)
    for every B column; Hungarian matching on |correlation|."""
    na, nb = np.sqrt(sq_a), np.sqrt(sq_b)
    na[na == 0] = 1.0
    nb[nb == 0] = 1.0
    corr = np.abs(cross) / np.outer(na, nb)
    rows, cols = linear_sum_assignment(-corr)
    src = np.full(cross.shape[1], -1)
    coef = np.zeros(cross.shape[1])
    for r, c in zip(rows, cols):
        ab, aa = cross[r, c], sq_a[r]
        coef[c] = (ab / aa if aa > 0 else 0.0) if scale else (1.0 if ab >= 0 else -1.0)
        src[c] = r
    return src, coef


def _float32_floor(gram: np.ndarray) -> float:
    """Smallest variance (on the scale of ``gram``) that float32 block sums resolve."""
    return 10 * float(np.finfo(np.float32).eps) * float(np.trace(gram))


def _pca(stats: _Stats, columns: np.ndarray, dtype, side: str = "", tick=None):
    """Principal (variances, axes) of the fit rows' covariance on ``columns`` (cached), and
    whether float32 sums left directions unresolved. A fallback LAPACK driver, if one was
    needed, is recorded in ``stats.cache["notes"]``; ``tick(d)`` is called after a new one."""
    cache_key = ("pca", columns.tobytes())
    if cache_key not in stats.cache:
        from nearid.ica import pca_from_covariance

        cov = stats.gram[np.ix_(columns, columns)] / (stats.n - 1)
        rel = max(stats.n, int(columns.sum())) * float(np.finfo(np.float64).eps)
        floor = _float32_floor(cov) if dtype == np.float32 else 0.0
        notes = stats.cache.setdefault("notes", [])
        var, axes = pca_from_covariance(cov, rel, abs_tol=floor, notes=notes)
        notes[:] = [n if n.startswith(f"{side}: ") else f"{side}: {n}" for n in notes] if side else notes
        stats.cache[cache_key] = (var, axes, dtype == np.float32 and var.size < int(columns.sum()))
        if tick is not None:
            tick(int(columns.sum()))
    return stats.cache[cache_key]


def _surely_unresolved(stats: _Stats, columns: np.ndarray) -> bool:
    """True when a float32 covariance certainly has a direction below what its sums resolve,
    so that :func:`_pca` would report it unresolved: a Cholesky factorisation (d^3 / 3
    flops, a twentieth of the eigen-decomposition) of the covariance minus half the float32
    floor fails only if an eigenvalue lies below half the floor, up to round-off of about
    d eps64 ||cov|| -- orders of magnitude below the floor. Used before wide
    decompositions, so that data needing float64 switch before minutes of float32 work;
    False (no shortcut) decides nothing: _pca still decides."""
    cov = stats.gram[np.ix_(columns, columns)] / (stats.n - 1)
    shifted = cov - 0.5 * _float32_floor(cov) * np.eye(cov.shape[0])
    try:
        np.linalg.cholesky(shifted)
    except np.linalg.LinAlgError:
        return True
    return False


def _duplicates(X, stats: _Stats, keep: np.ndarray, rows, rows_per_block) -> dict[int, int]:
    """Columns equal (on the fit rows) to an earlier kept column, as nearid.ica finds them:
    candidates from the moments (same mean, variance of the difference ~ 0), checked exactly."""
    cols = np.flatnonzero(keep)
    if cols.size < 2:
        return {}
    g = stats.gram[np.ix_(cols, cols)]
    dg = np.diag(g)
    diff_var = dg[:, None] + dg[None, :] - 2 * g
    mean = stats.mean[cols]
    scale = np.abs(mean)[:, None] + np.abs(mean)[None, :] + np.sqrt(dg / stats.n)[:, None]
    cand = np.triu((diff_var <= 1e-5 * (dg[:, None] + dg[None, :]))
                   & (np.abs(mean[:, None] - mean[None, :]) <= 1e-5 * scale), 1)
    pairs = np.argwhere(cand)
    if pairs.size == 0:
        return {}
    equal = np.ones(len(pairs), dtype=bool)
    involved = np.unique(pairs)
    pos = {c: i for i, c in enumerate(involved)}
    left = np.array([pos[i] for i in pairs[:, 0]])
    right = np.array([pos[j] for j in pairs[:, 1]])
    for start in range(0, len(rows), rows_per_block):
        blk = np.asarray(X[rows[start:start + rows_per_block]][:, cols[involved]])
        equal &= (blk[:, left] == blk[:, right]).all(0)
    dups: dict[int, int] = {}
    for (i, j), same in zip(pairs, equal):
        ci, cj = int(cols[i]), int(cols[j])
        if same and ci not in dups and cj not in dups:
            dups[cj] = ci
    return dups


def _kept_columns(X, stats: _Stats, fit_idx, rows_per_block) -> tuple[np.ndarray, dict[int, int]]:
    """The columns nearid.ica.Whitener would keep (not constant, not a copy of an earlier
    one) and the duplicates it would drop, from the moments and a check of the candidates."""
    if "kept" not in stats.cache:
        keep = stats.nonconstant.copy()
        if not keep.any():
            raise ValueError("every column is constant on the fit rows: nothing to whiten")
        dups = _duplicates(X, stats, keep, np.sort(fit_idx), rows_per_block)
        for j in dups:
            keep[j] = False
        stats.cache["kept"] = (keep, dups)
    return stats.cache["kept"]


def _side_ica(X, stats: _Stats, fit_idx, dtype, rows_per_block, bar, work, side, *, seed, ica_components,
              ica_max_rows, ica_max_iter, ica_max_components):
    """WhitenedICA of one side: whitening from the fit rows' moments, FastICA on the subsample."""
    if "ica" in stats.cache:
        return stats.cache["ica"]
    from nearid.ica import Whitener, WhitenedICA, choose_components, ica_rows

    keep, dups = _kept_columns(X, stats, fit_idx, rows_per_block)
    if ("pca", keep.tobytes()) not in stats.cache:
        bar.describe(f"ica {side}: principal axes ({int(keep.sum())}-wide eigh)",
                     now=int(keep.sum()) >= SERIAL_DECOMPOSITION_WIDTH)
    var, axes, unresolved = _pca(stats, keep, dtype, side, lambda d: bar.tick(work.eigh(d)))
    if unresolved:
        cap = stats.n if ica_max_rows is None else min(stats.n, ica_max_rows)
        if choose_components(var, cap, ica_components, max_components=ica_max_components) >= var.size:
            raise _NeedFloat64  # the rule reaches into directions float32 sums cannot resolve
    whitener = Whitener.from_moments(stats.mean, stats.gram / (stats.n - 1), stats.n, kept_columns=keep,
                                     duplicates=dups, pca=(var, axes), n_components=ica_components,
                                     max_rows=ica_max_rows, max_components=ica_max_components)
    pos = ica_rows(stats.n, ica_max_rows, seed)
    rows = fit_idx if pos is None else fit_idx[pos]
    # whiten the subsample block by block in the data's precision (Whitener.transform would
    # copy it to float64 first): centre as in the fit pass, drop the dead/duplicate columns
    W = whitener.whitening_.astype(dtype)
    Z = np.empty((rows.size, whitener.n_components_))
    all_kept = bool(keep.all())
    for start in range(0, rows.size, rows_per_block):
        Xc = _gather(X, rows[start:start + rows_per_block], dtype)
        Xc -= stats.shift
        Xc -= stats.dmean.astype(dtype)
        Z[start:start + Xc.shape[0]] = (Xc if all_kept else Xc[:, keep]) @ W  # k columns, then float64
    k, n = whitener.n_components_, rows.size
    # the plan counted this side at the most components it could get: correct it to k
    bar.grow(work.ica(n, k, X.shape[1], ica_max_iter)
             - work.ica(n, _ica_components_guess(X.shape[1], n, ica_max_components), X.shape[1], ica_max_iter))
    bar.tick(work.f * n * X.shape[1] * k)  # the whitened subsample
    per_iteration, done = work.ica_iteration(n, k), [0]

    def on_iteration():
        done[0] += 1
        bar.describe(f"ica {side}: FastICA, {k} components on {n} rows, iteration {done[0]} (at most "
                     f"{ica_max_iter})")
        bar.tick(per_iteration)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported as ica_converged
        ica = WhitenedICA(n_components=ica_components, random_state=seed, max_iter=ica_max_iter,
                          max_rows=ica_max_rows, max_components=ica_max_components).fit_whitened(
                              whitener, Z, on_iteration=on_iteration if bar.bar is not None else None)
    bar.tick(max(0, ica_max_iter - done[0]) * per_iteration)  # converged early: the rest is not needed
    stats.cache.setdefault("notes", []).extend(f"{side}: {note}" for note in ica.fallbacks_)
    stats.cache["ica"] = ica
    return ica


def _fit_maps(A, B, sa: _Stats, sb: _Stats, cross, families, fit_idx, dtype, rows_per_block, bar,
              ica_params, work) -> tuple[dict, dict]:
    """Every requested family's map from A to B, from the moments (and FastICA)."""
    maps, info = {}, {}
    notes: list[str] = []
    if "permutation" in families:
        maps["permutation"] = _signed_matching(cross, sa.sq, sb.sq)
    # the linear family first (the maps do not depend on the order): when float32 sums cannot
    # resolve A, the switch to float64 then comes before the rigid family's SVD, not after
    if "linear" in families:
        cols, _ = _kept_columns(A, sa, fit_idx, rows_per_block)
        if (dtype == np.float32 and int(cols.sum()) >= SERIAL_DECOMPOSITION_WIDTH
                and ("pca", cols.tobytes()) not in sa.cache and _surely_unresolved(sa, cols)):
            raise _NeedFloat64  # as below, found without the eigen-decomposition
        wide = int(cols.sum()) >= SERIAL_DECOMPOSITION_WIDTH
        bar.describe(f"fitting maps: principal axes of A ({int(cols.sum())}-wide eigh)", now=wide)
        var, axes, unresolved = _pca(sa, cols, dtype, "A", lambda d: bar.tick(work.eigh(d)))
        if unresolved:
            raise _NeedFloat64  # least squares would need directions float32 sums cannot resolve
        M = np.zeros(cross.shape)
        # minimum-norm least squares on the columns that are neither constant nor copies of
        # another (a copy gets no weight; its twin carries it): pinv(A'A) A'B
        M[cols] = axes @ ((axes.T @ cross[cols]) / ((sa.n - 1) * var)[:, None])
        maps["linear"] = M
    if "rigid" in families:
        bar.describe(f"fitting maps: rigid SVD ({cross.shape[0]} x {cross.shape[1]})",
                     now=min(cross.shape) >= SERIAL_DECOMPOSITION_WIDTH)
        U, S, Vt = linalg.svd(cross, notes, what="rigid SVD")
        bar.tick(work.svd(*cross.shape))
        norm = float(sa.sq.sum())
        maps["rigid"] = (S.sum() / norm if norm > 0 else 1.0) * (U @ Vt)
    maps = {f: maps[f] for f in ("permutation", "rigid", "linear") if f in maps}
    if "ica" in families:
        bar.stage("ica")
        ica_a, ica_b = (_side_ica(X, st, fit_idx, dtype, rows_per_block, bar, work, side, **ica_params)
                        for X, st, side in ((A, sa, "A"), (B, sb, "B")))
        bar.stage("fitting maps")
        Ua, Ub = ica_a.unmixing_.T, ica_b.unmixing_.T  # centred columns -> sources (0 on dropped)
        cs = Ua.T @ cross @ Ub
        sq_sa = np.einsum("ij,ij->j", Ua, sa.gram @ Ua)
        sq_sb = np.einsum("ij,ij->j", Ub, sb.gram @ Ub)
        src, coef = _signed_matching(cs, sq_sa, sq_sb)
        L = np.zeros((Ua.shape[0], Ub.shape[1]))
        m = src >= 0
        L[:, m] = Ua[:, src[m]] * coef[m]
        maps["ica"] = (L, ica_b.mixing_.T)
        info = dict(ica_components=(ica_a.n_components_, ica_b.n_components_),
                    ica_variance=(ica_a.variance_kept_, ica_b.variance_kept_),
                    ica_converged=(bool(ica_a.converged_), bool(ica_b.converged_)),
                    ica_components_by_rule=(ica_a.whitener_.n_components_by_rule_,
                                            ica_b.whitener_.n_components_by_rule_))
    notes += sa.cache.get("notes", []) + sb.cache.get("notes", [])
    info["fallbacks"] = list(dict.fromkeys(notes))
    return maps, info


def _eval_pass(A, sa: _Stats, Bs, sbs, maps_per_b, rows, dtype, rows_per_block, tick) -> list[dict]:
    """Per-row errors ||h(a) - b|| of every map on the held-out ``rows`` (sorted)."""
    out = [{fam: np.empty(rows.size) for fam in maps} for maps in maps_per_b]
    prepared = []
    for maps in maps_per_b:
        # one product per family, never one stacked product: a BLAS kernel may round the
        # columns of a wider product differently, and a family's error must not depend on
        # which other families were asked for
        prep = {"dense": {f: np.ascontiguousarray(maps[f], dtype=dtype) for f in ("rigid", "linear") if f in maps}}
        if "ica" in maps:
            L, mix = maps["ica"]
            prep["ica"] = (L.astype(dtype), np.ascontiguousarray(mix, dtype=dtype))
        if "permutation" in maps:
            src, coef = maps["permutation"]
            prep["perm"] = (np.where(src >= 0, src, 0), np.where(src >= 0, coef, 0.0).astype(dtype))
        prepared.append(prep)
    a1, a2 = sa.shift, sa.dmean.astype(dtype)
    for start in range(0, rows.size, rows_per_block):
        idx = rows[start:start + rows_per_block]
        sl = slice(start, start + idx.size)
        Ac = _gather(A, idx, dtype)
        Ac -= a1  # centre in two steps (a row of the data, then a small remainder): exact
        Ac -= a2  # enough in float32 even when the mean is far from 0
        for j, (B, sb, prep) in enumerate(zip(Bs, sbs, prepared)):
            Bc = _gather(B, idx, dtype)
            Bc -= sb.shift
            Bc -= sb.dmean.astype(dtype)
            for fam, M in prep["dense"].items():
                E = Ac @ M
                E -= Bc
                out[j][fam][sl] = np.sqrt(np.einsum("ij,ij->i", E, E))
            if "ica" in prep:
                L, mix = prep["ica"]
                E = (Ac @ L) @ mix
                E -= Bc
                out[j]["ica"][sl] = np.sqrt(np.einsum("ij,ij->i", E, E))
            if "perm" in prep:
                src, coef = prep["perm"]
                E = Ac[:, src]
                E *= coef
                E -= Bc
                out[j]["permutation"][sl] = np.sqrt(np.einsum("ij,ij->i", E, E))
        tick(idx.size)
    return out


class _Work:
    """The estimated cost of each piece of the engine's work (units: see ``_UNITS``)."""

    def __init__(self, float32: bool):
        self.f = _UNITS["float32"] if float32 else 1.0

    def fit(self, rows, da, dbs, gram_a, gram_b) -> float:
        """One pass of the cross-products over ``rows`` rows (A'B, and the grams asked for)."""
        per_row = da * sum(dbs) + (da * da / 2 if gram_a else 0) + (sum(d * d for d in dbs) / 2 if gram_b else 0)
        return rows * (self.f * per_row + _UNITS["gather"] * (da + sum(dbs)))

    def evaluate(self, rows, da, dbs, families, ks) -> float:
        dense = len({"rigid", "linear"} & set(families))
        per_row = sum(dense * da * db + (k * (da + db) if "ica" in families else 0) + db for db, k in zip(dbs, ks))
        return rows * (self.f * per_row + _UNITS["gather"] * (da + sum(dbs)))

    @staticmethod
    def svd(m, n) -> float:
        return _UNITS["svd"] * m * n * min(m, n)

    @staticmethod
    def eigh(d) -> float:
        return _UNITS["eigh"] * d ** 3

    @staticmethod
    def ica_iteration(n, k) -> float:
        return 2 * n * k * k + _UNITS["logcosh"] * n * k + _UNITS["eigh"] * k ** 3

    def ica(self, n, k, d, max_iter) -> float:
        """One side's FastICA, at most ``max_iter`` iterations, and whitening its rows."""
        return max_iter * self.ica_iteration(n, k) + self.f * n * d * k


class _Progress:
    """A tqdm bar on stderr that appears only when the work lasts more than PROGRESS_DELAY,
    and the wall time of each stage (``timings``), shown or not.

    The bar counts estimated work (:class:`_Work`), not steps: a block of rows, a d x d
    decomposition and a FastICA iteration each advance it by their cost, so its percentage
    and remaining time hold for wide inputs, where decompositions and FastICA dominate
    (FastICA is counted at its iteration cap, then the bar jumps when it converges early)."""

    def __init__(self, enabled: bool, total: float, desc: str):
        import time

        self.clock = time.perf_counter
        self.timings: dict[str, float] = {}
        self.current, self.since = "validate", self.clock()
        self.started = self.since
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, delay=PROGRESS_DELAY, file=sys.stderr, leave=False,
                            dynamic_ncols=True, smoothing=0,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, about {remaining} left")

    def tick(self, n: float = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def describe(self, text: str, now: bool = False) -> None:
        """Show ``text`` at the next update, or ``now`` (before a long decomposition, which
        updates nothing while it runs) once the bar is past its delay."""
        if self.bar is not None:
            self.bar.set_description_str(text, refresh=now and self.clock() - self.started >= PROGRESS_DELAY)

    def stage(self, name: str) -> None:
        """Start timing stage ``name`` (and show it on the bar)."""
        now = self.clock()
        self.timings[self.current] = self.timings.get(self.current, 0.0) + now - self.since
        self.current, self.since = name, now
        self.describe(name)

    def grow(self, n: float) -> None:
        if self.bar is not None:
            self.bar.total += n
            self.bar.refresh()

    def replan(self, remaining: float) -> None:
        """The work still to do is ``remaining`` (after a change of plan, e.g. float64)."""
        if self.bar is not None:
            self.bar.total = self.bar.n + remaining
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _engine(As, Bs, *, fit_fraction, seed, families, want_cka, ica_components, ica_max_rows,
            ica_max_iter, dtype, progress, names=None, fit_rows=None, ica_max_components=None):
    """compare() for every (A, B) pair of the lists: a grid of AlignmentResult, and (n_fit, n_eval)."""
    if dtype not in (None, "float64"):
        raise ValueError(f"dtype must be None (float32 where the data allow) or 'float64', got {dtype!r}")
    if ica_max_rows is not None and ica_max_rows < 3:
        raise ValueError(f"ica_max_rows must be >= 3 or None, got {ica_max_rows}")
    if ica_max_components is not None:
        from nearid.ica import _check_max_components

        _check_max_components(ica_max_components)
    names = names or (["A"], ["B"])
    n = As[0].shape[0]
    width = max(X.shape[1] for X in list(As) + list(Bs))
    fit_idx, eval_idx = _split(n, width, fit_fraction, seed, fit_rows)
    fit_rows = np.sort(fit_idx)
    order = np.argsort(eval_idx)
    eval_rows = eval_idx[order]
    # Blocks are sized by the widest single input, not by the sum over a layer grid: float32
    # block products summed in float64 round differently at other block boundaries, so a
    # cell of a grid of same-width layers is the very number compare() gives for that pair
    # (unless the grid or the pair needs float64 where the other does not: the precision is
    # chosen per call, from what the requested families need).
    rows_per_block = max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // width)
    float32 = dtype is None and all(map(_narrow, list(As) + list(Bs)))
    plan = dict(n_fit=fit_rows.size, n_eval=eval_rows.size, families=families, want_cka=want_cka,
                ica_rows=fit_rows.size if ica_max_rows is None else min(fit_rows.size, ica_max_rows),
                ica_max_iter=ica_max_iter, ica_max_components=ica_max_components)
    bar = _Progress(progress, _planned_work(_Work(float32), As, Bs, **plan), "nearid align")
    try:
        return _engine_run(As, Bs, names, fit_idx, eval_idx, fit_rows, eval_rows, order, rows_per_block, plan,
                           bar, families=families, want_cka=want_cka, dtype=dtype, seed=seed,
                           ica_components=ica_components, ica_max_rows=ica_max_rows, ica_max_iter=ica_max_iter,
                           ica_max_components=ica_max_components)
    finally:
        bar.close()


def _ica_components_guess(d, n_rows, max_components) -> int:
    """The most components a side's ICA can get (the rows rule, the cap, the width)."""
    from nearid.ica import ROWS_PER_COMPONENT

    k = min(d, max(1, n_rows // ROWS_PER_COMPONENT))
    return k if max_components is None else min(k, max_components)


def _planned_work(work: _Work, As, Bs, *, n_fit, n_eval, families, want_cka, ica_rows, ica_max_iter,
                  ica_max_components) -> float:
    """The whole grid's estimated work, for the progress bar (see :class:`_Work`)."""
    das, dbs = [X.shape[1] for X in As], [X.shape[1] for X in Bs]
    need_a = bool(want_cka or {"linear", "ica"} & set(families))
    need_b = bool(want_cka or "ica" in families)
    ks = [_ica_components_guess(d, ica_rows, ica_max_components) for d in dbs]
    total = 0.0
    for i, da in enumerate(das):
        total += work.fit(n_fit, da, dbs, need_a, need_b and i == 0)
        if {"linear", "ica"} & set(families):
            total += work.eigh(da)
        if "rigid" in families:
            total += sum(work.svd(da, db) for db in dbs)
        if "ica" in families:
            total += work.ica(ica_rows, _ica_components_guess(da, ica_rows, ica_max_components), da, ica_max_iter)
        if families:
            total += work.evaluate(n_eval, da, dbs, families, ks)
    if "ica" in families:
        total += sum(work.eigh(db) + work.ica(ica_rows, k, db, ica_max_iter) for db, k in zip(dbs, ks))
    return total


def _engine_run(As, Bs, names, fit_idx, eval_idx, fit_rows, eval_rows, order, rows_per_block, plan, bar, *,
                families, want_cka, dtype, seed, ica_components, ica_max_rows, ica_max_iter, ica_max_components):
    for label, mats in (("A", As), ("B", Bs)):
        for name, X in zip(names[0] if label == "A" else names[1], mats):
            what = label if len(mats) == 1 else f"{label} layer {name!r}"
            _check_finite(X, what, max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // X.shape[1]))
    diameters = []
    for name, B in zip(names[1], Bs):
        try:
            diameters.append(latent_diameter(np.asarray(B[_diameter_rows(eval_idx)], dtype=np.float64)))
        except ValueError:
            what = "B" if len(Bs) == 1 else f"B layer {name!r}"
            raise ValueError(f"{what} is constant on the held-out rows (every row the same vector): "
                             "its diameter is 0, so no error can be normalised") from None
    need_a = bool(want_cka or {"linear", "ica"} & set(families))
    need_b = bool(want_cka or "ica" in families)
    ica_params = dict(seed=seed, ica_components=ica_components, ica_max_rows=ica_max_rows,
                      ica_max_iter=ica_max_iter, ica_max_components=ica_max_components)
    floats = ["float32", "float64"] if dtype is None and all(map(_narrow, list(As) + list(Bs))) else ["float64"]
    for attempt, prec in enumerate(floats):
        try:
            grid = _run_grid(As, Bs, names, fit_idx, fit_rows, eval_rows, order, diameters, np.dtype(prec),
                             families, want_cka, need_a, need_b, rows_per_block, bar, ica_params,
                             _Work(prec == "float32"))
            bar.replan(0.0)  # what was estimated is done: 100%
            bar.stage("done")
            for row in grid:
                for res in row:
                    res.timings = dict(bar.timings)
            return grid, (int(fit_idx.size), int(eval_idx.size))
        except _NeedFloat64:
            if attempt + 1 == len(floats):
                raise AssertionError("float64 sums were judged unresolved") from None  # pragma: no cover
            bar.replan(_planned_work(_Work(False), As, Bs, **plan))
            bar.describe("float64 (ill-conditioned data)")
    raise AssertionError("unreachable")  # pragma: no cover


def _run_grid(As, Bs, names, fit_idx, fit_rows, eval_rows, order, diameters, dt, families, want_cka,
              need_a, need_b, rows_per_block, bar, ica_params, work):
    stats_bs = [None] * len(Bs)
    grid = []
    dbs = [B.shape[1] for B in Bs]
    for i, A in enumerate(As):
        bar.stage("cross-products")
        da, gram_b = A.shape[1], need_b and stats_bs[0] is None
        sa, stats_bs, crosses = _fit_pass(A, Bs, fit_rows, dt, None, stats_bs, need_a, need_b, rows_per_block,
                                          lambda rows: bar.tick(work.fit(rows, da, dbs, need_a, gram_b)))
        for label, st, name, count in [("A", sa, names[0][i], len(As))] + [
                ("B", sb, nb, len(Bs)) for sb, nb in zip(stats_bs, names[1])]:
            if not st.nonconstant.any():
                what = label if count == 1 else f"{label} layer {name!r}"
                raise ValueError(f"{what} is constant on the fit rows (every row the same vector): "
                                 "there is nothing to align")
        bar.stage("fitting maps")
        # d x d decompositions (SVD, eigh) and FastICA's small matrices: one BLAS thread. More
        # threads gain little at this size and, on a machine other jobs keep busy, spin-wait
        # (an SVD of 768 x 768 took 10 s instead of 1 s with 2 threads on 2 shared cores).
        # From SERIAL_DECOMPOSITION_WIDTH on, a decomposition takes minutes and the threads
        # the caller allows (nearid align: the idle cores) pay; FastICA keeps one thread.
        from threadpoolctl import threadpool_limits

        serial = max([da, *dbs]) < SERIAL_DECOMPOSITION_WIDTH
        with threadpool_limits(limits=1 if serial else None):
            fitted = [_fit_maps(A, B, sa, sb, C, families, fit_idx, dt, rows_per_block, bar, ica_params, work)
                      for B, sb, C in zip(Bs, stats_bs, crosses)]
        bar.stage("held-out errors")
        ks = [(info.get("ica_components") or (0, 0))[1] for _, info in fitted]
        errs = (_eval_pass(A, sa, Bs, stats_bs, [m for m, _ in fitted], eval_rows, dt, rows_per_block,
                           lambda rows: bar.tick(work.evaluate(rows, da, dbs, families, ks)))
                if families else [{} for _ in Bs])
        row = []
        for j, (B, sb, C, (maps, info)) in enumerate(zip(Bs, stats_bs, crosses, fitted)):
            rows_err = {}
            for fam in families:
                e = np.empty(eval_rows.size)
                e[order] = errs[j][fam] / diameters[j]
                if not np.isfinite(e).all():
                    raise ValueError("the errors overflowed: values too large for float32 arithmetic; "
                                     "pass dtype='float64'")
                rows_err[fam] = e
            errors = {fam: float(rows_err[fam].mean()) for fam in families}
            eff = (ica_efficiency(errors["permutation"], errors["rigid"], errors["ica"])
                   if {"permutation", "rigid", "ica"} <= set(errors) else float("nan"))
            cka = _cka_from_moments(sa.gram, sb.gram, C) if want_cka else float("nan")
            row.append(AlignmentResult(errors=errors, row_errors=rows_err, ica_efficiency=eff, cka=cka,
                                       n_fit=int(fit_idx.size), n_eval=int(eval_rows.size),
                                       dim_a=int(A.shape[1]), dim_b=int(B.shape[1]),
                                       ica_components=info.get("ica_components"),
                                       ica_variance=info.get("ica_variance"),
                                       ica_converged=info.get("ica_converged"), dtype=dt.name,
                                       ica_max_components=(ica_params["ica_max_components"]
                                                           if "ica" in families else None),
                                       ica_components_by_rule=info.get("ica_components_by_rule"),
                                       fallbacks=info.get("fallbacks", [])))
        grid.append(row)
    return grid


def _compare_reference(A, B, *, fit_fraction, seed, families, want_cka, ica_components, ica_max_rows,
                       ica_max_iter, fit_rows=None, ica_max_components=None) -> AlignmentResult:
    """The obviously-correct path: float64 copies, one estimator per family (slow, for checks)."""
    A, B = check_pair(A, B)
    fit_idx, eval_idx = _split(A.shape[0], max(A.shape[1], B.shape[1]), fit_fraction, seed, fit_rows)
    A_fit, B_fit, A_eval, B_eval = A[fit_idx], B[fit_idx], A[eval_idx], B[eval_idx]
    for name, X in (("A", A_fit), ("B", B_fit)):
        if np.ptp(X, axis=0).max() == 0:
            raise ValueError(f"{name} is constant on the fit rows (every row the same vector): "
                             "there is nothing to align")
    try:
        diameter = latent_diameter(B_eval)
    except ValueError:
        raise ValueError("B is constant on the held-out rows (every row the same vector): its diameter "
                         "is 0, so no error can be normalised") from None
    errors, rows, info, notes = {}, {}, {}, []
    for family in families:
        ica_params = dict(n_components=ica_components, max_rows=ica_max_rows, max_iter=ica_max_iter,
                          max_components=ica_max_components) if family == "ica" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = make_alignment(family, random_state=seed, **ica_params).fit(A_fit, B_fit)
        rows[family] = np.linalg.norm(est.transform(A_eval) - B_eval, axis=1) / diameter
        errors[family] = float(rows[family].mean())
        notes += getattr(est, "fallbacks_", [])
        if family == "ica":
            info = dict(ica_components=(est.ica_A_.n_components_, est.ica_B_.n_components_),
                        ica_variance=(est.ica_A_.variance_kept_, est.ica_B_.variance_kept_),
                        ica_converged=(bool(est.ica_A_.converged_), bool(est.ica_B_.converged_)),
                        ica_components_by_rule=(est.ica_A_.whitener_.n_components_by_rule_,
                                                est.ica_B_.whitener_.n_components_by_rule_),
                        ica_max_components=ica_max_components)
            notes += [f"{side}: {n}" for side, ica in (("A", est.ica_A_), ("B", est.ica_B_))
                      for n in ica.fallbacks_]
    eff = (ica_efficiency(errors["permutation"], errors["rigid"], errors["ica"])
           if {"permutation", "rigid", "ica"} <= set(errors) else float("nan"))
    return AlignmentResult(errors=errors, row_errors=rows, ica_efficiency=eff,
                           cka=linear_cka(A_fit, B_fit) if want_cka else float("nan"),
                           n_fit=int(fit_idx.size), n_eval=int(eval_idx.size), dim_a=int(A.shape[1]),
                           dim_b=int(B.shape[1]), dtype="float64", fallbacks=notes, **info)


def mean_corr_coef(Z, U) -> float:
    """MCC: mean |Pearson correlation| of matched pairs (Hungarian) between Z and U columns."""
    Z, U = check_pair(Z, U)
    C = _abs_correlation(Z, U)
    r, c = linear_sum_assignment(-C)
    return float(C[r, c].mean())


def amari_distance(W, A) -> float:
    """Amari distance of P = W A from a scaled permutation, in [0, 1]; 0 = perfect unmixing."""
    P = np.abs(np.asarray(W, float) @ np.asarray(A, float))
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"W @ A must be square, got shape {P.shape}")
    n = P.shape[0]
    if n < 2:
        return 0.0
    rows = (P.sum(1) / P.max(1) - 1).sum()
    cols = (P.sum(0) / P.max(0) - 1).sum()
    return float((rows + cols) / (2 * n * (n - 1)))
