"""Chapter 01's experiments: how the error tolerance eps grows with noise, and how whitening +
ICA's unmixing approaches a signed permutation as the sample grows (Theorem 2's premise)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nearid.align import FAMILIES, alignment_table
from nearid.ica import WhitenedICA


def rigid_residuals(A, B, *, noise_levels, seed: int = 0) -> pd.DataFrame:
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


def ica_amari_sweep(*, sample_sizes, sources, dim: int, repeats: int, seed: int = 0) -> pd.DataFrame:
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
                    ica = WhitenedICA(n_components="all", random_state=r, max_iter=2000).fit(X)
                rows.append({"source": kind, "n": n, "repeat": r, "converged": ica.converged_,
                             "amari": amari_distance(ica.unmixing_, A)})
    return pd.DataFrame(rows)
