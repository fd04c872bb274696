"""Whitening + ICA, the post-processing step behind Theorem 2.

Whitening removes the linear ambiguity down to a rotation; ICA picks the rotation whose axes
are maximally non-Gaussian. For independent non-Gaussian sources that rotation is unique up
to signed permutations (Comon 1994), which is what turns "identifiable up to linear maps"
into "identifiable up to signed permutations".
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted


class WhitenedICA(TransformerMixin, BaseEstimator):
    """Whiten, then rotate to independent components (FastICA, logcosh contrast).

    Parameters
    ----------
    n_components : number of components; None keeps the input dimension.
    max_iter, tol : FastICA's convergence controls.
    random_state : seed of FastICA's initial rotation, for deterministic output.

    Attributes
    ----------
    ica_ : the fitted :class:`sklearn.decomposition.FastICA`.
    converged_ : False when FastICA stopped at ``max_iter`` (a warning is raised too).
    """

    def __init__(self, n_components: int | None = None, max_iter: int = 1000,
                 tol: float = 1e-4, random_state: int | None = 0):
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, X, y=None) -> "WhitenedICA":
        X = check_array(X, dtype=np.float64, ensure_min_samples=3)
        self.ica_ = FastICA(n_components=self.n_components, whiten="unit-variance",
                            whiten_solver="svd", max_iter=self.max_iter, tol=self.tol,
                            random_state=self.random_state)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            self.ica_.fit(X)
        self.converged_ = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        if not self.converged_:
            warnings.warn(f"FastICA did not converge in {self.max_iter} iterations; "
                          "components may be rotated away from the independent axes",
                          ConvergenceWarning, stacklevel=2)
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "ica_")
        return self.ica_.transform(check_array(X, dtype=np.float64))

    def inverse_transform(self, S) -> np.ndarray:
        check_is_fitted(self, "ica_")
        return self.ica_.inverse_transform(check_array(S, dtype=np.float64))

    @property
    def mixing_(self) -> np.ndarray:
        check_is_fitted(self, "ica_")
        return self.ica_.mixing_

    @property
    def unmixing_(self) -> np.ndarray:
        """The full unmixing matrix W (whitening included): sources = (X - mean) @ W.T."""
        check_is_fitted(self, "ica_")
        return self.ica_.components_
