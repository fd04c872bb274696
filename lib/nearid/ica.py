"""Whitening + ICA, the post-processing step behind Theorem 2: the one path every chapter uses.

Whitening removes the linear ambiguity down to a rotation; ICA picks the rotation whose axes
are maximally non-Gaussian. For independent non-Gaussian sources that rotation is unique up
to signed permutations (Comon 1994), which is what turns "identifiable up to linear maps"
into "identifiable up to signed permutations".

Two steps are ours rather than FastICA's, because FastICA's own whitening fails silently on
the embeddings this book meets:

* **Degenerate columns.** A constant column (a dead ReLU unit) or an exact copy of another
  column carries no direction of its own. scikit-learn's ``whiten_solver="svd"`` flips
  signs with ``np.sign(u[0])``; a constant first column makes that sign 0, whole whitened
  components become 0 and the unmixing matrix blows up while FastICA reports convergence.
  :class:`Whitener` drops such columns before whitening and restores them on the way back.
* **How many components.** Unit-variance whitening gives every kept direction the same
  weight, so whitening onto directions that hold only noise drowns the signal, and FastICA
  needs many more rows than components. The number of components is chosen by a declared
  rule (:func:`choose_components`): by default the leading principal components holding 95%
  of the variance of the fit rows, at most one per ten rows.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted

DEFAULT_COMPONENTS = 0.95  # share of the fit rows' variance the kept components hold
ROWS_PER_COMPONENT = 10  # FastICA needs samples: at most one component per this many rows
LOW_VARIANCE = 0.5  # warn when the kept components hold less than this share


class LowVarianceWarning(UserWarning):
    """The whitened components hold less than half of the data's variance."""


def choose_components(variances, n_rows: int, rule: float | int | str | None = DEFAULT_COMPONENTS,
                      rows_per_component: int | None = ROWS_PER_COMPONENT) -> int:
    """How many leading principal components to whiten onto.

    ``variances`` are the principal variances in decreasing order (zeros already removed).
    ``rule``: a float in (0, 1] keeps the fewest leading components whose variance reaches
    that share; an int keeps that many; "all" or None keeps every one. The result is then
    capped at ``n_rows // rows_per_component`` (None = no cap) and is at least 1.
    """
    variances = np.asarray(variances, dtype=np.float64)
    rank = int(variances.size)
    if rank == 0:
        raise ValueError("no direction with non-zero variance: nothing to whiten")
    if rule is None or rule == "all":
        k = rank
    elif isinstance(rule, numbers.Integral) and not isinstance(rule, bool):
        if rule < 1:
            raise ValueError(f"n_components must be >= 1, got {rule}")
        k = min(int(rule), rank)
    elif isinstance(rule, numbers.Real) and not isinstance(rule, bool):
        if not 0 < rule <= 1:
            raise ValueError(f"a variance share must lie in (0, 1], got {rule}")
        share = np.cumsum(variances) / variances.sum()
        k = int(np.searchsorted(share, rule - 1e-12) + 1)
    else:
        raise ValueError(f"n_components must be a share in (0, 1], an int >= 1 or 'all', got {rule!r}")
    if rows_per_component:
        k = min(k, n_rows // rows_per_component)
    return max(1, min(k, rank))


def _degenerate_columns(X: np.ndarray, rtol: float) -> tuple[np.ndarray, dict[int, int]]:
    """Boolean mask of columns to keep, and {dropped duplicate: the kept column it copies}."""
    scale = np.abs(X).max() if X.size else 0.0
    spread = X.max(0) - X.min(0)
    keep = spread > rtol * max(scale, 1e-300)
    duplicates: dict[int, int] = {}
    seen: dict[bytes, int] = {}
    for j in np.flatnonzero(keep):
        key = np.ascontiguousarray(X[:, j]).tobytes()
        if key in seen:
            duplicates[int(j)] = seen[key]
            keep[j] = False
        else:
            seen[key] = int(j)
    return keep, duplicates


class Whitener(TransformerMixin, BaseEstimator):
    """PCA whitening onto a declared number of components, robust to degenerate columns.

    Parameters
    ----------
    n_components : the rule of :func:`choose_components` (default: 95% of the variance).
    rows_per_component : at most one component per this many fit rows (None = no cap).
    rtol : a column whose range is below ``rtol`` times the data's largest magnitude is
        constant (a dead unit).

    Attributes
    ----------
    kept_columns_ : boolean mask of the input columns whitened (constant and duplicate
        columns are dropped, and restored by ``inverse_transform``).
    duplicates_ : {dropped column: the kept column it equals}.
    mean_ : mean of every input column on the fit rows.
    n_components_ : number of whitened components.
    explained_variance_ratio_ : share of the (kept columns') variance of each component.
    variance_kept_ : share of the total variance the whitened components hold.
    whitening_ : (n_kept_columns, n_components) map from centred kept columns to white
        components; ``dewhitening_`` maps back.
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 rows_per_component: int | None = ROWS_PER_COMPONENT, rtol: float = 1e-9):
        self.n_components = n_components
        self.rows_per_component = rows_per_component
        self.rtol = rtol

    def fit(self, X, y=None) -> "Whitener":
        X = check_array(X, dtype=np.float64, ensure_min_samples=3)
        n, d = X.shape
        self.mean_ = X.mean(0)
        keep, self.duplicates_ = _degenerate_columns(X, self.rtol)
        if not keep.any():
            raise ValueError("every column is constant on the fit rows: nothing to whiten")
        self.kept_columns_ = keep
        Xc = X[:, keep] - self.mean_[keep]
        _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
        var = s ** 2 / (n - 1)
        nonzero = var > var[0] * max(Xc.shape) * np.finfo(np.float64).eps
        var, Vt = var[nonzero], Vt[nonzero]
        k = choose_components(var, n, self.n_components, self.rows_per_component)
        self.n_components_ = k
        self.explained_variance_ratio_ = var[:k] / var.sum()
        self.variance_kept_ = float(var[:k].sum() / var.sum())
        scale = np.sqrt(var[:k])
        self.whitening_ = Vt[:k].T / scale
        self.dewhitening_ = Vt[:k] * scale[:, None]
        self.n_features_in_ = d
        if self.variance_kept_ < LOW_VARIANCE:
            warnings.warn(f"the {k} whitened components hold only {100 * self.variance_kept_:.0f}% of the "
                          "variance: most of the data lies outside what ICA will see", LowVarianceWarning,
                          stacklevel=2)
        return self

    def _check(self, X) -> np.ndarray:
        check_is_fitted(self, "whitening_")
        X = check_array(X, dtype=np.float64)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"expected {self.n_features_in_} columns, got {X.shape[1]}")
        return X

    def transform(self, X) -> np.ndarray:
        X = self._check(X)
        return (X[:, self.kept_columns_] - self.mean_[self.kept_columns_]) @ self.whitening_

    def inverse_transform(self, Z) -> np.ndarray:
        check_is_fitted(self, "whitening_")
        Z = check_array(Z, dtype=np.float64)
        out = np.tile(self.mean_, (Z.shape[0], 1))
        out[:, self.kept_columns_] += Z @ self.dewhitening_
        for dropped, twin in self.duplicates_.items():
            out[:, dropped] = out[:, twin]
        return out


class WhitenedICA(TransformerMixin, BaseEstimator):
    """Whiten (:class:`Whitener`), then rotate to independent components (FastICA).

    Parameters
    ----------
    n_components, rows_per_component : the whitening rule (see :func:`choose_components`).
    max_iter, tol, fun : FastICA's convergence controls and contrast (logcosh by default).
    random_state : seed of FastICA's initial rotation, for deterministic output.

    Attributes
    ----------
    whitener_ : the fitted :class:`Whitener` (``n_components_``, ``variance_kept_``).
    rotation_ : (k, k) orthogonal ICA rotation of the white components.
    converged_ : False when FastICA stopped at ``max_iter`` (a warning is raised too).
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 rows_per_component: int | None = ROWS_PER_COMPONENT, max_iter: int = 1000,
                 tol: float = 1e-4, fun: str = "logcosh", random_state: int | None = 0):
        self.n_components = n_components
        self.rows_per_component = rows_per_component
        self.max_iter = max_iter
        self.tol = tol
        self.fun = fun
        self.random_state = random_state

    def fit(self, X, y=None) -> "WhitenedICA":
        self.whitener_ = Whitener(self.n_components, self.rows_per_component).fit(X)
        Z = self.whitener_.transform(X)
        k = Z.shape[1]
        if k == 1:
            self.rotation_, self.converged_ = np.ones((1, 1)), True
        else:
            ica = FastICA(n_components=k, whiten=False, fun=self.fun, max_iter=self.max_iter,
                          tol=self.tol, random_state=self.random_state)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                ica.fit(Z)
            self.converged_ = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
            if not self.converged_:
                warnings.warn(f"FastICA did not converge in {self.max_iter} iterations; "
                              "components may be rotated away from the independent axes",
                              ConvergenceWarning, stacklevel=2)
            self.rotation_ = ica.components_  # orthogonal: the data are already white
        self.n_components_ = k
        self.variance_kept_ = self.whitener_.variance_kept_
        self.n_features_in_ = self.whitener_.n_features_in_
        return self

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "rotation_")
        return self.whitener_.transform(X) @ self.rotation_.T

    def inverse_transform(self, S) -> np.ndarray:
        check_is_fitted(self, "rotation_")
        return self.whitener_.inverse_transform(check_array(S, dtype=np.float64) @ self.rotation_)

    @property
    def unmixing_(self) -> np.ndarray:
        """(k, d) unmixing matrix W: sources = (X - mean) @ W.T (dropped columns get 0)."""
        check_is_fitted(self, "rotation_")
        w = self.whitener_
        W = np.zeros((self.n_components_, w.n_features_in_))
        W[:, w.kept_columns_] = (w.whitening_ @ self.rotation_.T).T
        return W

    @property
    def mixing_(self) -> np.ndarray:
        """(d, k) mixing matrix: X - mean ~ sources @ mixing_.T on the kept subspace."""
        check_is_fitted(self, "rotation_")
        w = self.whitener_
        M = np.zeros((w.n_features_in_, self.n_components_))
        M[w.kept_columns_] = (self.rotation_ @ w.dewhitening_).T
        for dropped, twin in w.duplicates_.items():
            M[dropped] = M[twin]
        return M
