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
    ica = WhitenedICA(random_state=seed).fit(Z[fit])
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


def rigid_residuals(A, B, noise_levels, seed: int = 0) -> pd.DataFrame:
    """Errors of every family when B is a rotated copy of A plus Gaussian noise of each level.

    The noise level is relative to A's per-axis standard deviation; this is the "eps grows
    with noise" illustration of chapter 01.
    """
    A = np.asarray(A, dtype=np.float64)
    rng = np.random.default_rng(seed)
    rows = []
    for sigma in noise_levels:
        noisy = B + sigma * A.std() * rng.standard_normal(B.shape)
        table = alignment_table(A, noisy, seed=seed)
        for family in FAMILIES:
            rows.append({"noise": sigma, "family": family, "error": table[family]})
    return pd.DataFrame(rows)


def ica_amari_sweep(sample_sizes, sources, dim: int, repeats: int, seed: int = 0) -> pd.DataFrame:
    """Amari distance of whitening + ICA's unmixing from the truth, per sample size and source.

    X = S A^T with a random well-conditioned mixing A; Theorem 2's claim is that the
    remaining ambiguity is a signed permutation, i.e. the distance tends to 0 with n for
    non-Gaussian sources, and not for Gaussian ones.
    """
    import warnings
    import zlib

    from nearid.align import amari_distance
    from nearid.data.toy import sample_sources

    rows = []
    for kind in sources:
        for n in sample_sizes:
            for r in range(repeats):
                rng = np.random.default_rng([seed, r, n, zlib.crc32(kind.encode())])
                S = sample_sources(kind, n, dim, rng)
                A = rng.standard_normal((dim, dim)) + 2 * np.eye(dim)
                X = S @ A.T
                with warnings.catch_warnings():  # Gaussian sources need not converge: recorded
                    warnings.simplefilter("ignore")
                    ica = WhitenedICA(random_state=r, max_iter=2000).fit(X)
                rows.append({"source": kind, "n": n, "repeat": r, "converged": ica.converged_,
                             "amari": amari_distance(ica.unmixing_, A)})
    return pd.DataFrame(rows)
