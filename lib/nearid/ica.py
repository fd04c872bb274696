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
(:func:`ica_rows`), which bounds FastICA's cost. For many columns it takes
``max_components``, a cap on the number of whitened components applied after the rule
(None, the default, = no cap: what every chapter uses), which bounds it in the other
direction (``nearid align`` passes ``nearid.align.ICA_MAX_COMPONENTS``).
:meth:`Whitener.from_moments` builds the same whitening from a mean and covariance
accumulated elsewhere (``nearid.align.compare`` streams them over row blocks), so a large
matrix is never copied to whiten it.

The decompositions run through :mod:`nearid.linalg`, which retries a LAPACK driver that
does not converge with a slower, more robust one (bit-identical where the first succeeds),
and FastICA failing numerically is retried once from the identity start, then replaced by
the unrotated principal axes; each fallback is recorded in ``fallbacks_``.

**A fit that does not converge.** scikit-learn's parallel FastICA takes its full fixed-point
step every iteration. On the low-dimensional, barely non-Gaussian codes of chapters 04-06
that step overshoots: the iterates jump about (successive changes of 0.2-0.8) for 20,000
iterations, although a point that the step leaves in place exists. A fit still moving at
``max_iter`` is therefore refitted from the same start with the step relaxed to
:data:`STABILISED_STEP` of its length (:func:`stabilised_fastica`; Hyvarinen's stabilised
FastICA shortens its step the same way: Hyvarinen 1999, "Fast and robust fixed-point
algorithms for independent component analysis", IEEE TNN 10(3)), for up to ``max_iter``
more iterations, and it stops only by scikit-learn's own test on the full step. A fit that
converges as scikit-learn runs it is untouched, bit for bit; ``stabilised_`` says which fits
took the second route.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted

from nearid.constraints import Interval, check_params, validate_params
from nearid.ica_protocol import (  # noqa: F401  (re-exported: nearid.ica is where users look)
    COMPONENTS,
    DEFAULT_COMPONENTS,
    LOW_VARIANCE,
    MAX_COMPONENTS,
    MAX_ROWS,
    ROWS_PER_COMPONENT,
    LowVarianceWarning,
    _sign_convention,
    pca_from_covariance,
)


@validate_params(rule=COMPONENTS, max_components=MAX_COMPONENTS)
def choose_components(variances, n_rows: int, rule: float | int | str | None = DEFAULT_COMPONENTS,
                      rows_per_component: int | None = ROWS_PER_COMPONENT,
                      max_components: int | None = None) -> int:
    """How many leading principal components to whiten onto.

    ``variances`` are the principal variances in decreasing order (zeros already removed).
    ``rule``: a float in (0, 1] keeps the fewest leading components whose variance reaches
    that share; an int keeps that many; "all" or None keeps every one. The result is then
    capped at ``n_rows // rows_per_component`` (None = no cap) and at ``max_components``
    (None = no cap), and is at least 1.
    """
    variances = np.asarray(variances, dtype=np.float64)
    rank = int(variances.size)
    if rank == 0:
        raise ValueError("no direction with non-zero variance: nothing to whiten")
    if rule is None or rule == "all":
        k = rank
    elif isinstance(rule, numbers.Integral):
        k = min(int(rule), rank)
    else:  # a share of the variance (COMPONENTS)
        share = np.cumsum(variances) / variances.sum()
        k = int(np.searchsorted(share, rule - 1e-12) + 1)
    if rows_per_component:
        k = min(k, n_rows // rows_per_component)
    if max_components is not None:
        k = min(k, int(max_components))
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


@validate_params(max_rows=MAX_ROWS)
def ica_rows(n_rows: int, max_rows: int | None, random_state: int | None) -> np.ndarray | None:
    """Sorted positions of the seeded subsample FastICA is fitted on (None = every row)."""
    if max_rows is None or n_rows <= max_rows:
        return None
    return np.sort(np.random.default_rng(random_state).choice(n_rows, max_rows, replace=False))


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
    max_components : at most this many components, whatever the rule asks (None = no cap).

    Attributes
    ----------
    kept_columns_ : boolean mask of the input columns whitened (constant and duplicate
        columns are dropped, and restored by ``inverse_transform``).
    duplicates_ : {dropped column: the kept column it equals}.
    mean_ : mean of every input column on the fit rows.
    n_components_ : number of whitened components.
    n_components_by_rule_ : the number the rule (and the rows cap) asked for, before
        ``max_components``; larger than ``n_components_`` when that cap bound.
    fallbacks_ : numerical fallbacks used (text, one per event; empty when none).
    explained_variance_ratio_ : share of the (kept columns') variance of each component.
    variance_kept_ : share of the total variance the whitened components hold.
    whitening_ : (n_kept_columns, n_components) map from centred kept columns to white
        components; ``dewhitening_`` maps back.
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 rows_per_component: int | None = ROWS_PER_COMPONENT, rtol: float = 1e-9,
                 max_rows: int | None = None, max_components: int | None = None):
        self.n_components = n_components
        self.rows_per_component = rows_per_component
        self.rtol = rtol
        self.max_rows = max_rows
        self.max_components = max_components

    _constraints = dict(n_components=COMPONENTS, max_rows=MAX_ROWS, max_components=MAX_COMPONENTS)

    def fit(self, X, y=None) -> "Whitener":
        check_params(self)
        X = check_array(X, dtype=np.float64, ensure_min_samples=3)
        n, d = X.shape
        mean = X.mean(0)
        keep, duplicates = _degenerate_columns(X, self.rtol)
        if not keep.any():
            raise ValueError("every column is constant on the fit rows: nothing to whiten")
        Xc = X[:, keep] - mean[keep]
        from nearid import linalg

        notes: list[str] = []
        _, s, Vt = linalg.svd(Xc, notes, what="whitening SVD")
        var = s ** 2 / (n - 1)
        nonzero = var > var[0] * max(Xc.shape) * np.finfo(np.float64).eps
        return self._set(mean, var[nonzero], Vt[nonzero].T, n, keep, duplicates, notes)

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
        check_params(self)
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
        notes: list[str] = []
        if pca is None:
            pca = pca_from_covariance(cov[np.ix_(keep, keep)], rel_tol, notes=notes)
        var, axes = pca
        return self._set(mean, np.asarray(var, dtype=np.float64), np.asarray(axes, dtype=np.float64), n_rows,
                         keep, dict(duplicates or {}), notes)

    def _set(self, mean, var, axes, n_rows, keep, duplicates, notes=()) -> "Whitener":
        """Store the fitted state from principal variances ``var`` and axes (columns)."""
        if var.size == 0:
            raise ValueError("no direction with non-zero variance: nothing to whiten")
        self.mean_ = mean
        self.kept_columns_ = keep
        self.duplicates_ = duplicates
        self.fallbacks_ = list(notes)
        cap_rows = n_rows if self.max_rows is None else min(n_rows, self.max_rows)
        by_rule = choose_components(var, cap_rows, self.n_components, self.rows_per_component)
        k = by_rule if self.max_components is None else choose_components(
            var, cap_rows, self.n_components, self.rows_per_component, self.max_components)
        self.n_components_by_rule_ = by_rule
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
    max_components : at most this many whitened components, whatever ``n_components``
        asks (None = no cap); see ``nearid.align.ICA_MAX_COMPONENTS`` for why a cap.

    Attributes
    ----------
    whitener_ : the fitted :class:`Whitener` (``n_components_``, ``variance_kept_``).
    rotation_ : (k, k) orthogonal ICA rotation of the white components.
    converged_ : False when FastICA stopped at ``max_iter`` by both routes (a warning is
        raised too), or when it failed numerically and a fallback was used.
    n_iter_ : FastICA's iterations (0 when it did not run), both routes counted.
    stabilised_ : True when scikit-learn's FastICA stopped at ``max_iter`` and the rotation
        comes from the stabilised iteration (:func:`stabilised_fastica`) from the same start;
        ``converged_`` then says whether that converged.
    fallbacks_ : numerical fallbacks used by the whitening or FastICA (text; empty if none).
        FastICA raising (LinAlgError, or a ValueError from non-finite iterates) is retried
        once from the identity rotation; if that fails too, the rotation is the identity
        (the whitened principal axes, unrotated) and ``converged_`` is False.
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 rows_per_component: int | None = ROWS_PER_COMPONENT, max_iter: int = 1000,
                 tol: float = 1e-4, fun: str = "logcosh", random_state: int | None = 0,
                 max_rows: int | None = None, max_components: int | None = None):
        self.n_components = n_components
        self.rows_per_component = rows_per_component
        self.max_iter = max_iter
        self.tol = tol
        self.fun = fun
        self.random_state = random_state
        self.max_rows = max_rows
        self.max_components = max_components

    _constraints = Whitener._constraints

    def fit(self, X, y=None) -> "WhitenedICA":
        check_params(self)
        X = check_array(X, dtype=np.float64, ensure_min_samples=3)
        whitener = Whitener(self.n_components, self.rows_per_component, max_rows=self.max_rows,
                            max_components=self.max_components).fit(X)
        rows = ica_rows(X.shape[0], self.max_rows, self.random_state)
        return self.fit_whitened(whitener, whitener.transform(X if rows is None else X[rows]))

    def fit_whitened(self, whitener: Whitener, Z, on_iteration=None) -> "WhitenedICA":
        """Fit the ICA rotation on rows ``Z`` already whitened by the fitted ``whitener``.

        :meth:`fit` is ``fit_whitened(Whitener(...).fit(X), <X's subsample, whitened>)``;
        ``nearid.align.compare`` calls this directly with a :meth:`Whitener.from_moments`.
        ``on_iteration`` (a callable without arguments, or None) is called once per FastICA
        iteration, for a progress bar; the arithmetic is the same with or without it.
        """
        self.whitener_ = whitener
        self.fallbacks_ = list(getattr(whitener, "fallbacks_", ()))
        whitener_notes = tuple(self.fallbacks_)
        # float64 always: FastICA in float32 was seen to diverge (a 1e29 "rotation") on
        # Gaussian-noise directions where float64 merely stops at max_iter
        Z = check_array(Z, dtype=np.float64)
        k = Z.shape[1]
        self.stabilised_ = False
        if k == 1:
            self.rotation_, self.converged_, self.n_iter_ = np.ones((1, 1)), True, 0
        else:
            try:
                self._fastica(Z, None, on_iteration)
            except (np.linalg.LinAlgError, ValueError, FloatingPointError) as first:
                # Z is finite (check_array): a failure here is FastICA's own iterates
                # degenerating (an eigh or the final pinv on a non-finite or singular matrix)
                try:
                    self._fastica(Z, np.eye(k), on_iteration)
                    self.fallbacks_.append(f"FastICA failed from its random start ({type(first).__name__}: "
                                           f"{first}); refitted from the identity rotation")
                except (np.linalg.LinAlgError, ValueError, FloatingPointError) as second:
                    self.rotation_, self.converged_, self.n_iter_ = np.eye(k), False, 0
                    self.fallbacks_.append(f"FastICA failed from its random start ({type(first).__name__}: "
                                           f"{first}) and from the identity ({type(second).__name__}: "
                                           f"{second}); the whitened principal axes are used unrotated")
            if not self.converged_ and not self.fallbacks_[len(whitener_notes):]:
                self._stabilise(Z, on_iteration)
            if not self.converged_:
                warnings.warn(f"FastICA did not converge in {self.max_iter} iterations"
                              f"{', nor stabilised in as many more' if self.stabilised_ else ''}; "
                              "components may be rotated away from the independent axes",
                              ConvergenceWarning, stacklevel=2)
        self.n_components_ = k
        self.variance_kept_ = whitener.variance_kept_
        self.n_features_in_ = self.whitener_.n_features_in_
        return self

    def _fastica(self, Z, w_init, on_iteration) -> None:
        """scikit-learn's FastICA on the white rows Z: sets rotation_, converged_, n_iter_."""
        from sklearn.decomposition import FastICA
        from threadpoolctl import threadpool_limits

        fun = self.fun
        if on_iteration is not None and fun == "logcosh":
            fun = _counting_logcosh(on_iteration)
        ica = FastICA(n_components=Z.shape[1], whiten=False, fun=fun, max_iter=self.max_iter,
                      tol=self.tol, random_state=self.random_state, w_init=w_init)
        # FastICA iterates on small (k x k) matrices, where multi-threaded BLAS spends its
        # time waiting for threads (an eigh of 128 x 128 took 0.3 s instead of 2 ms on a
        # busy 2-core machine): one thread is faster, and the result is the same.
        with warnings.catch_warnings(record=True) as caught, threadpool_limits(limits=1):
            warnings.simplefilter("always", ConvergenceWarning)
            ica.fit(Z)
        self.converged_ = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        self.n_iter_ = int(ica.n_iter_)
        self.rotation_ = ica.components_  # orthogonal: the data are already white

    def _stabilise(self, Z, on_iteration) -> None:
        """Refit the rotation by :func:`stabilised_fastica` from scikit-learn's own start."""
        from sklearn.utils import check_random_state

        k = Z.shape[1]
        w_init = check_random_state(self.random_state).normal(size=(k, k))  # FastICA's draw
        try:
            with np.errstate(divide="raise", invalid="raise"):
                rotation, converged, n_iter = stabilised_fastica(Z, w_init, fun=self.fun, tol=self.tol,
                                                                 max_iter=self.max_iter, on_iteration=on_iteration)
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as failure:
            self.fallbacks_.append(f"FastICA did not converge in {self.max_iter} iterations; the stabilised refit "
                                   f"failed numerically ({type(failure).__name__}: {failure}); scikit-learn's "
                                   "last iterate is kept")
            return
        self.fallbacks_.append(f"FastICA did not converge in {self.max_iter} iterations; refitted from the "
                               f"same start with the stabilised step ({STABILISED_STEP}): "
                               + (f"converged in {n_iter}" if converged else "did not converge either"))
        self.rotation_, self.converged_, self.stabilised_ = rotation, converged, True
        self.n_iter_ += n_iter

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


STABILISED_STEP = 0.5  # the share of FastICA's step a stabilised iteration takes (Hyvarinen's mu, halved)


def _contrast(fun: str, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FastICA's contrast derivative g and its derivative g' at Y (scikit-learn's three)."""
    if fun == "logcosh":
        g = np.tanh(Y)
        return g, 1.0 - g ** 2
    if fun == "exp":
        e = np.exp(-0.5 * Y ** 2)
        return Y * e, (1.0 - Y ** 2) * e
    if fun == "cube":
        return Y ** 3, 3.0 * Y ** 2
    raise ValueError(f"the stabilised FastICA knows the contrasts 'logcosh', 'exp' and 'cube', got {fun!r}")


def _symmetric_decorrelation(W: np.ndarray) -> np.ndarray:
    """(W W^T)^(-1/2) W: the nearest matrix with orthonormal rows, as FastICA orthogonalises."""
    from scipy import linalg

    s, u = linalg.eigh(W @ W.T)
    return (u * (1.0 / np.sqrt(s))) @ u.T @ W


@validate_params(max_iter=Interval(int, 1), tol=Interval(float, 0, closed="neither"),
                 step=Interval(float, 0, 1, closed="right"))
def stabilised_fastica(Z, w_init, *, fun: str = "logcosh", tol: float = 1e-4, max_iter: int = 1000,
                       step: float = STABILISED_STEP, on_iteration=None) -> tuple[np.ndarray, bool, int]:
    """Symmetric FastICA whose fixed-point step is relaxed, on white rows ``Z`` (n x k).

    F(W) is scikit-learn's parallel FastICA update, orth(E[g(W z) z^T] - diag(E[g'(W z)]) W)
    with orth the symmetric orthogonalisation. The undamped iteration W <- F(W) can overshoot
    a fixed point, or hand one row's direction to another, and jump about for ever; this one
    moves only ``step`` of the way, W <- orth((1 - step) W + step F(W)), as Hyvarinen's
    stabilised FastICA shortens its step (Hyvarinen 1999). F's rows are first matched to W's
    (Hungarian on |<F_i, W_j>|) and signed to agree with them: a row and its negative are one
    direction, and the order of the components means nothing (every use of them treats them
    as a set), while averaging a row with another row's direction would collapse the two.
    It stops by scikit-learn's test on the full step, on the matched rows: F moves no
    direction by more than ``tol`` (1 - |<F_i, W_i>|), i.e. W is a fixed point of FastICA's
    map up to the order and signs of its rows; it returns F(W), rows in W's order. Returns
    (rotation with orthonormal rows, converged, iterations); ``on_iteration`` is called once
    per iteration. Raises FloatingPointError if the iterates stop being finite.
    """
    from scipy.optimize import linear_sum_assignment

    Z = check_array(Z, dtype=np.float64)
    n, k = Z.shape
    W = _symmetric_decorrelation(check_array(w_init, dtype=np.float64))
    if W.shape != (k, k):
        raise ValueError(f"w_init must be {k} x {k} for {k} white columns, got {W.shape}")
    for it in range(1, max_iter + 1):
        if on_iteration is not None:
            on_iteration()
        g, g_prime = _contrast(fun, Z @ W.T)
        F = _symmetric_decorrelation(g.T @ Z / n - g_prime.mean(0)[:, None] * W)
        overlap = F @ W.T  # overlap[i, j] = <F_i, W_j>
        rows, cols = linear_sum_assignment(-np.abs(overlap))
        F = F[rows[np.argsort(cols)]]  # F's row matched to W's row j now sits at j
        agreement = np.einsum("ij,ij->i", F, W)
        F *= np.where(agreement < 0, -1.0, 1.0)[:, None]
        if float(np.max(1.0 - np.abs(agreement))) < tol:
            return F, True, it
        W = _symmetric_decorrelation((1.0 - step) * W + step * F)
        if not np.all(np.isfinite(W)):
            raise FloatingPointError("the stabilised FastICA iterates stopped being finite")
    return W, False, max_iter


def _counting_logcosh(on_iteration):
    """FastICA's logcosh contrast, calling ``on_iteration()`` each time FastICA evaluates it
    (once per iteration of the parallel algorithm). The arithmetic is scikit-learn's own
    function, so the iterates are bit for bit those of ``fun="logcosh"``; where that private
    function is not found, plain "logcosh" is used (no progress, same numbers)."""
    try:
        from sklearn.decomposition._fastica import _logcosh
    except ImportError:  # pragma: no cover - a future scikit-learn
        return "logcosh"

    def logcosh(x, **fun_args):
        on_iteration()
        return _logcosh(x, fun_args)

    return logcosh
