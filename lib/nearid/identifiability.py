"""Statistical and structural near-identifiability, measured on learned codes.

*Statistical*: do the codes of independently trained models agree up to a transform family?
(:func:`statistical_errors`, all seed pairs). *Structural*: do they agree with the true
factors u? (:func:`structural_scores`: rigid error to u, and after whitening + ICA the
signed-permutation error and the mean correlation coefficient.)
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from nearid.align import (
    FAMILIES,
    SignedPermutationAlignment,
    alignment_table,
    check_pair,
    latent_diameter,
    mean_corr_coef,
)
from nearid.ica import WhitenedICA


def statistical_errors(codes: list[np.ndarray], families=FAMILIES, fit_fraction: float = 0.5,
                       seed: int = 0) -> pd.DataFrame:
    """One row per ordered seed pair (i -> j, i < j) and family: the held-out normalised error."""
    if len(codes) < 2:
        raise ValueError(f"statistical identifiability needs codes of at least 2 models, got {len(codes)}")
    rows = []
    for i, j in combinations(range(len(codes)), 2):
        table = alignment_table(codes[i], codes[j], fit_fraction=fit_fraction, seed=seed,
                                families=families)
        for family in families:
            rows.append({"pair": f"{i}->{j}", "family": family, "error": table[family]})
    return pd.DataFrame(rows)


def structural_scores(Z, U, fit_fraction: float = 0.5, seed: int = 0) -> dict[str, float]:
    """How well codes Z recover the true factors U.

    Returns ``rigid_error`` (rotation + scale + translation from Z to U, held-out, normalised
    by U's diameter), ``linear_error``, ``ica_perm_error`` (whitening + ICA on Z, then a signed
    permutation with per-axis scale to U), ``mcc`` (mean |correlation| of Z's axes with U's,
    matched) and ``mcc_ica`` (the same after whitening + ICA). Every map is fitted on a
    random ``fit_fraction`` of rows and scored on the rest.
    """
    Z, U = check_pair(Z, U, min_rows=6)
    n = Z.shape[0]
    order = np.random.default_rng(seed).permutation(n)
    n_fit = int(round(fit_fraction * n))
    fit, ev = order[:n_fit], order[n_fit:]
    diameter = latent_diameter(U[ev])
    ica = WhitenedICA(n_components="all", random_state=seed).fit(Z[fit])  # codes have one axis per factor
    S = ica.transform(Z)
    table = alignment_table(Z, U, fit_fraction=fit_fraction, seed=seed, families=("rigid", "linear"))
    perm = SignedPermutationAlignment().fit(S[fit], U[fit])
    return {
        "rigid_error": table["rigid"],
        "linear_error": table["linear"],
        "ica_perm_error": perm.score(S[ev], U[ev], diameter=diameter),
        "mcc": mean_corr_coef(Z[ev], U[ev]),
        "mcc_ica": mean_corr_coef(S[ev], U[ev]),
    }
