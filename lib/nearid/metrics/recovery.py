"""How well recovered sources match the true ones: the mean correlation coefficient (MCC)
and the Amari distance of an unmixing matrix.

Both score a recovery against known ground truth (planted sources, a known mixing), so
they sit with the other metrics rather than with the alignment families of
:mod:`nearid.align`, which compare two learned codes with each other.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from nearid.align.families import abs_correlation, check_pair


def mean_corr_coef(Z, U) -> float:
    """MCC: mean |Pearson correlation| of matched pairs (Hungarian) between Z and U columns."""
    Z, U = check_pair(Z, U)
    C = abs_correlation(Z, U)
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
