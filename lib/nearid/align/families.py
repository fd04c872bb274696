"""Transform families and the errors that measure near-identifiability: the estimators the book teaches.

This module holds what a reader studies: each family as a scikit-learn-style estimator,
the normalised error, the ICA efficiency and linear CKA, each written the obvious way in
float64. It knows nothing of the streaming engine (:mod:`nearid.align.engine`, which
computes the same maps from cross-products for large inputs) nor of the result table
(:mod:`nearid.align.result`); both build on it.

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

The ICA family's protocol (components rule, FastICA rows and iterations, cap on
components) travels as one frozen :class:`ICASettings` record, built by :func:`ica_settings`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from nearid import linalg
from nearid.constraints import Options, validate_params
from nearid.ica import DEFAULT_COMPONENTS, WhitenedICA

FAMILIES = ("permutation", "rigid", "linear", "ica")
FAMILY = Options(FAMILIES, noun="family")
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


# --------------------------------------------------------------------------- ICA settings
@dataclass(frozen=True)
class ICASettings:
    """The ICA family's protocol, in the keyword names of :class:`ICAAlignment` and
    :class:`nearid.ica.WhitenedICA`: the whitening rule (``n_components``, see
    :func:`nearid.ica.choose_components`), FastICA on at most ``max_rows`` rows (None = all)
    for at most ``max_iter`` iterations, and at most ``max_components`` whitened components
    per side (None = no cap). Build it with :func:`ica_settings`."""

    n_components: float | int | str | None = ICA_COMPONENTS
    max_rows: int | None = None
    max_iter: int = 1000
    max_components: int | None = None

    def params(self) -> dict[str, Any]:
        """Keyword arguments of :class:`ICAAlignment` and :class:`nearid.ica.WhitenedICA`."""
        return asdict(self)

    def whitened_ica(self, random_state: int | None) -> WhitenedICA:
        """A fresh (unfitted) :class:`nearid.ica.WhitenedICA` with this protocol."""
        return WhitenedICA(random_state=random_state, **self.params())

    def compare_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`nearid.align.compare` (``ica_components``, ``ica_max_rows``,
        ``ica_max_iter``, and ``ica_max_components`` only when a cap is set: None is compare's
        default, and helpers that forward the chapters' uncapped protocol do not take it)."""
        out: dict[str, Any] = dict(ica_components=self.n_components, ica_max_rows=self.max_rows,
                                   ica_max_iter=self.max_iter)
        if self.max_components is not None:
            out["ica_max_components"] = self.max_components
        return out


def ica_settings(*, ica_components: float | int | str | None = ICA_COMPONENTS, ica_max_rows: int | None = None,
                 ica_max_iter: int = 1000, ica_max_components: int | None = None) -> ICASettings:
    """The one place the ICA protocol is assembled: :func:`nearid.align.compare`'s ``ica_*``
    arguments (same names, same defaults) as an :class:`ICASettings` record. Nothing is
    validated here: the entry points check their arguments (:data:`nearid.align.api.ICA_ARGUMENTS`)
    and :class:`nearid.ica.WhitenedICA` its parameters."""
    return ICASettings(n_components=ica_components, max_rows=ica_max_rows, max_iter=ica_max_iter,
                       max_components=ica_max_components)


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


def abs_correlation(A: np.ndarray, B: np.ndarray) -> np.ndarray:
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
    C = abs_correlation(np.asarray(A, float), np.asarray(B, float))
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
    through B's ICA mixing. B's directions outside its kept components, which ICA does not
    see, are predicted as the permutation family predicts them (its map, projected onto
    those directions), so the family pays no floor the others do not: on an exact signed
    permutation its error is 0 whatever the whitening rule keeps.
    ``max_rows`` fits the two FastICA rotations on a seeded random subset of at
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
        settings = ica_settings(ica_components=self.n_components, ica_max_rows=self.max_rows,
                                ica_max_iter=self.max_iter, ica_max_components=self.max_components)
        self.ica_A_, self.ica_B_ = (settings.whitened_ica(self.random_state).fit(X) for X in (A, B))
        SA, SB = self.ica_A_.transform(A), self.ica_B_.transform(B)
        # per-component least-squares scale, exactly as in the permutation family, so that the
        # ICA efficiency compares like with like (only the ICA rotations differ)
        self.matching_ = SignedPermutationAlignment(scale=self.scale).fit(SA, SB)
        # B's directions outside its kept components: the permutation family's map, on equal terms
        self.rest_ = SignedPermutationAlignment(scale=self.scale).fit(A, B)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        A = self._check_dims(A)
        kept = self.ica_B_.inverse_transform(self.matching_.transform(self.ica_A_.transform(A)))
        P = self.rest_.transform(A)
        return kept + (P - self.ica_B_.inverse_transform(self.ica_B_.transform(P)))


@validate_params(family=FAMILY)
def make_alignment(family: str, random_state: int | None = 0, **ica_params) -> _Alignment:
    """A fresh estimator for one of :data:`FAMILIES` (``ica_params`` go to ICAAlignment)."""
    if family == "ica":
        return ICAAlignment(random_state=random_state, **ica_params)
    return {"permutation": SignedPermutationAlignment, "rigid": RigidAlignment,
            "linear": LinearAlignment}[family]()


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

