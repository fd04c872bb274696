"""The whitening + ICA protocol's declared numbers and argument rules, and the principal
axes of a covariance, without scikit-learn.

:mod:`nearid.ica` (whose estimators subclass scikit-learn's) re-exports everything here;
it lives apart so that :mod:`nearid.align` and ``nearid align`` can validate their ICA
arguments and fit the linear family without importing scikit-learn (over a second).
"""

from __future__ import annotations

import numpy as np

from nearid.constraints import POSITIVE_INT, ComponentRule, Interval, OrNone

DEFAULT_COMPONENTS = 0.95  # share of the fit rows' variance the kept components hold
ROWS_PER_COMPONENT = 10  # FastICA needs samples: at most one component per this many rows
LOW_VARIANCE = 0.5  # warn when the kept components hold less than this share
# What the whitening arguments accept (here, in nearid.align.compare and the chapter profiles):
COMPONENTS = OrNone(ComponentRule())  # the rule of choose_components; None = "all"
MAX_COMPONENTS = OrNone(POSITIVE_INT)  # a cap on the components; None = no cap
MAX_ROWS = OrNone(Interval(int, 3))  # FastICA's subsample; None = every row


class LowVarianceWarning(UserWarning):
    """The whitened components hold less than half of the data's variance."""


def _sign_convention(components: np.ndarray) -> np.ndarray:
    """Flip each principal axis (a column) so that its largest entry is positive.

    eigh returns axes with arbitrary signs (they depend on the LAPACK build); a fixed
    convention makes the whitened coordinates, and so FastICA's start, deterministic.
    (:meth:`Whitener.fit` keeps the SVD's own signs, so its results are unchanged.)"""
    pick = np.abs(components).argmax(0)
    signs = np.sign(components[pick, np.arange(components.shape[1])])
    signs[signs == 0] = 1.0
    return components * signs


def pca_from_covariance(covariance, rel_tol: float, abs_tol: float = 0.0,
                        notes: list[str] | None = None, top: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Principal variances (decreasing) and axes (columns) of a covariance matrix.

    Directions whose variance is at most ``rel_tol`` times the largest, or at most
    ``abs_tol``, are numerically zero and dropped. The eigen-decomposition runs in float64
    whatever the input's type (:func:`nearid.linalg.eigh`: numpy's, or a fallback driver
    recorded in ``notes``). ``top``: return only the first ``top`` axes (every variance is
    still returned, for the component rule): enough for a whitener capped at ``top``
    components, at about half the cost of every axis on a wide matrix.
    """
    from nearid import linalg

    cov = np.asarray(covariance, dtype=np.float64)
    cov = (cov + cov.T) / 2
    if top is not None and top < cov.shape[0]:
        var, vec = linalg.eigh_top(cov, top, notes, what="PCA eigh")
    else:
        var, vec = linalg.eigh(cov, notes, what="PCA eigh")
    var, vec = var[::-1], vec[:, ::-1]
    if var.size == 0 or var[0] <= 0:
        return var[:0], vec[:, :0]
    nonzero = var > max(var[0] * rel_tol, abs_tol)
    return var[nonzero], _sign_convention(vec[:, nonzero[:vec.shape[1]]])
