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

For many rows, :class:`WhitenedICA` takes ``max_rows``: the whitening is computed on every
row, the FastICA rotation on a seeded subsample of at most that many whitened rows
(:func:`ica_rows`), which bounds FastICA's cost. :meth:`Whitener.from_moments` builds the
same whitening from a mean and covariance accumulated elsewhere (``nearid.align.compare``
streams them over row blocks), so a large matrix is never copied to whiten it.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
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


def ica_rows(n_rows: int, max_rows: int | None, random_state: int | None) -> np.ndarray | None:
    """Sorted positions of the seeded subsample FastICA is fitted on (None = every row)."""
    if max_rows is None or n_rows <= max_rows:
        return None
    if max_rows < 3:
        raise ValueError(f"max_rows must be >= 3, got {max_rows}")
    return np.sort(np.random.default_rng(random_state).choice(n_rows, max_rows, replace=False))


def _sign_convention(components: np.ndarray) -> np.ndarray:
    """Flip each principal axis (a column) so that its largest entry is positive.

    eigh returns axes with arbitrary signs (they depend on the LAPACK build); a fixed
    convention makes the whitened coordinates, and so FastICA's start, deterministic.
    (:meth:`Whitener.fit` keeps the SVD's own signs, so its results are unchanged.)"""
    pick = np.abs(components).argmax(0)
    signs = np.sign(components[pick, np.arange(components.shape[1])])
    signs[signs == 0] = 1.0
    return components * signs


def pca_from_covariance(covariance, rel_tol: float, abs_tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Principal variances (decreasing) and axes (columns) of a covariance matrix.

    Directions whose variance is at most ``rel_tol`` times the largest, or at most
    ``abs_tol``, are numerically zero and dropped. The eigen-decomposition runs in float64
    whatever the input's type.
    """
    cov = np.asarray(covariance, dtype=np.float64)
    var, vec = np.linalg.eigh((cov + cov.T) / 2)
    var, vec = var[::-1], vec[:, ::-1]
    if var.size == 0 or var[0] <= 0:
        return var[:0], vec[:, :0]
    nonzero = var > max(var[0] * rel_tol, abs_tol)
    return var[nonzero], _sign_convention(vec[:, nonzero])


class Whitener(TransformerMixin, BaseEstimator):
    """PCA whitening onto a declared number of components, robust to degenerate columns.

    Parameters
    ----------
    n_components : the rule of :func:`choose_components` (default: 95% of the variance).
    rows_per_component : at most one component per this many fit rows (None = no cap).
    rtol : a column whose range is below ``rtol`` times the data's largest magnitude is
        constant (a dead unit).
    max_rows : the component cap counts at most this many rows (the rows FastICA will see
        when :class:`WhitenedICA` fits its rotation on a subsample); None = every row.

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
                 rows_per_component: int | None = ROWS_PER_COMPONENT, rtol: float = 1e-9,
                 max_rows: int | None = None):
        self.n_components = n_components
        self.rows_per_component = rows_per_component
        self.rtol = rtol
        self.max_rows = max_rows

    def fit(self, X, y=None) -> "Whitener":
        X = check_array(X, dtype=np.float64, ensure_min_samples=3)
        n, d = X.shape
        mean = X.mean(0)
        keep, duplicates = _degenerate_columns(X, self.rtol)
        if not keep.any():
            raise ValueError("every column is constant on the fit rows: nothing to whiten")
        Xc = X[:, keep] - mean[keep]
        _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
        var = s ** 2 / (n - 1)
        nonzero = var > var[0] * max(Xc.shape) * np.finfo(np.float64).eps
        return self._set(mean, var[nonzero], Vt[nonzero].T, n, keep, duplicates)

    @classmethod
    def from_moments(cls, mean, covariance, n_rows: int, *, kept_columns=None, duplicates=None,
                     pca: tuple[np.ndarray, np.ndarray] | None = None, rel_tol: float | None = None,
                     **params) -> "Whitener":
        """A fitted Whitener from the fit rows' mean and (d, d) covariance, without the rows.

        ``kept_columns`` and ``duplicates`` are what :meth:`fit` would find on the rows
        (constant and duplicate columns; default: zero-variance columns dropped, no
        duplicates); ``pca`` = (variances, axes) of the kept columns' covariance when the
        caller has it already; ``rel_tol`` is the relative size below which a principal
        variance counts as zero (default: float64 round-off, as in :meth:`fit`). The rest of
        ``params`` are the constructor's.
        """
        self = cls(**params)
        mean = np.asarray(mean, dtype=np.float64)
        cov = np.asarray(covariance, dtype=np.float64)
        d = mean.shape[0]
        if cov.shape != (d, d):
            raise ValueError(f"covariance must be ({d}, {d}), got {cov.shape}")
        keep = np.diag(cov) > 0 if kept_columns is None else np.asarray(kept_columns, dtype=bool)
        if not keep.any():
            raise ValueError("every column is constant on the fit rows: nothing to whiten")
        if rel_tol is None:
            rel_tol = max(n_rows, int(keep.sum())) * np.finfo(np.float64).eps
        if pca is None:
            pca = pca_from_covariance(cov[np.ix_(keep, keep)], rel_tol)
        var, axes = pca
        return self._set(mean, np.asarray(var, dtype=np.float64), np.asarray(axes, dtype=np.float64), n_rows,
                         keep, dict(duplicates or {}))

    def _set(self, mean, var, axes, n_rows, keep, duplicates) -> "Whitener":
        """Store the fitted state from principal variances ``var`` and axes (columns)."""
        if var.size == 0:
            raise ValueError("no direction with non-zero variance: nothing to whiten")
        self.mean_ = mean
        self.kept_columns_ = keep
        self.duplicates_ = duplicates
        cap_rows = n_rows if self.max_rows is None else min(n_rows, self.max_rows)
        k = choose_components(var, cap_rows, self.n_components, self.rows_per_component)
        self.n_components_ = k
        self.explained_variance_ratio_ = var[:k] / var.sum()
        self.variance_kept_ = float(var[:k].sum() / var.sum())
        scale = np.sqrt(var[:k])
        self.whitening_ = axes[:, :k] / scale
        self.dewhitening_ = axes[:, :k].T * scale[:, None]
        self.n_features_in_ = mean.shape[0]
        if self.variance_kept_ < LOW_VARIANCE:
            warnings.warn(f"the {k} whitened components hold only {100 * self.variance_kept_:.0f}% of the "
                          "variance: most of the data lies outside what ICA will see", LowVarianceWarning,
                          stacklevel=3)
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
    random_state : seed of FastICA's initial rotation (and of the subsample), for
        deterministic output.
    max_rows : fit the rotation on a seeded subsample of at most this many rows
        (:func:`ica_rows`); the whitening always uses every row. None = every row.

    Attributes
    ----------
    whitener_ : the fitted :class:`Whitener` (``n_components_``, ``variance_kept_``).
    rotation_ : (k, k) orthogonal ICA rotation of the white components.
    converged_ : False when FastICA stopped at ``max_iter`` (a warning is raised too).
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 rows_per_component: int | None = ROWS_PER_COMPONENT, max_iter: int = 1000,
                 tol: float = 1e-4, fun: str = "logcosh", random_state: int | None = 0,
                 max_rows: int | None = None):
        self.n_components = n_components
        self.rows_per_component = rows_per_component
        self.max_iter = max_iter
        self.tol = tol
        self.fun = fun
        self.random_state = random_state
        self.max_rows = max_rows

    def fit(self, X, y=None) -> "WhitenedICA":
        X = check_array(X, dtype=np.float64, ensure_min_samples=3)
        whitener = Whitener(self.n_components, self.rows_per_component, max_rows=self.max_rows).fit(X)
        rows = ica_rows(X.shape[0], self.max_rows, self.random_state)
        return self.fit_whitened(whitener, whitener.transform(X if rows is None else X[rows]))

    def fit_whitened(self, whitener: Whitener, Z) -> "WhitenedICA":
        """Fit the ICA rotation on rows ``Z`` already whitened by the fitted ``whitener``.

        :meth:`fit` is ``fit_whitened(Whitener(...).fit(X), <X's subsample, whitened>)``;
        ``nearid.align.compare`` calls this directly with a :meth:`Whitener.from_moments`.
        """
        from sklearn.decomposition import FastICA
        from threadpoolctl import threadpool_limits

        self.whitener_ = whitener
        # float64 always: FastICA in float32 was seen to diverge (a 1e29 "rotation") on
        # Gaussian-noise directions where float64 merely stops at max_iter
        Z = check_array(Z, dtype=np.float64)
        k = Z.shape[1]
        if k == 1:
            self.rotation_, self.converged_ = np.ones((1, 1)), True
        else:
            ica = FastICA(n_components=k, whiten=False, fun=self.fun, max_iter=self.max_iter,
                          tol=self.tol, random_state=self.random_state)
            # FastICA iterates on small (k x k) matrices, where multi-threaded BLAS spends its
            # time waiting for threads (an eigh of 128 x 128 took 0.3 s instead of 2 ms on a
            # busy 2-core machine): one thread is faster, and the result is the same.
            with warnings.catch_warnings(record=True) as caught, threadpool_limits(limits=1):
                warnings.simplefilter("always", ConvergenceWarning)
                ica.fit(Z)
            self.converged_ = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
            if not self.converged_:
                warnings.warn(f"FastICA did not converge in {self.max_iter} iterations; "
                              "components may be rotated away from the independent axes",
                              ConvergenceWarning, stacklevel=2)
            self.rotation_ = ica.components_  # orthogonal: the data are already white
        self.n_components_ = k
        self.variance_kept_ = whitener.variance_kept_
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
