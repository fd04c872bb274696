"""Transform families: the estimators the book teaches.

This module holds what a reader studies: each family as a scikit-learn-style estimator,
written the obvious way in float64. The normalised error, the ICA efficiency and the ICA
protocol live in :mod:`nearid.align.protocol`, linear CKA and the other similarity
measures in :mod:`nearid.align.measures` (both re-exported here); none of them needs
scikit-learn, which only this module imports. It knows nothing of the streaming engine
(:mod:`nearid.align.engine`, which computes the same maps from cross-products for large
inputs) nor of the result table (:mod:`nearid.align.result`).

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

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from nearid import linalg
from nearid.align.measures import _cka_from_moments, linear_cka  # noqa: F401  (re-exported)
from nearid.align.protocol import (  # noqa: F401  (re-exported: the names the book and users import from here)
    EFFICIENCY_MIN_GAP,
    FAMILIES,
    FAMILY,
    FAMILY_INFO,
    ICA_COMPONENTS,
    ICA_MAX_COMPONENTS,
    ICA_MAX_ITER,
    ICA_MAX_ROWS,
    ICASettings,
    check_pair,
    ica_efficiency,
    ica_settings,
    latent_diameter,
    normalised_error,
)
from nearid.constraints import validate_params
from nearid.ica import DEFAULT_COMPONENTS


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
    """A fresh estimator for one of :data:`FAMILIES`, the class its record names
    (:data:`FAMILY_INFO`); ``random_state`` and ``ica_params`` go to a family that is seeded
    (ICAAlignment), a closed-form one takes neither."""
    cls = FAMILY_INFO[family].estimator_class()
    if "random_state" not in cls().get_params():
        return cls()
    return cls(random_state=random_state, **ica_params)
