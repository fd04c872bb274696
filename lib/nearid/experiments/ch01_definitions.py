"""Chapter 01's experiments: how the error tolerance eps grows with noise, and how whitening +
ICA's unmixing approaches a signed permutation as the sample grows (Theorem 2's premise).

The chapter is cheap and runs no sweep of trained models, so it has no tasks; under
``dry_run`` (:func:`settings`) it keeps the full profile's sources, dimensions and noise
levels and subsamples rows and repeats.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nearid.align import FAMILIES, alignment_table
from nearid.ica import WhitenedICA
from nearid.verdicts import Verdict, paired_difference

DRY_RUN_ROWS = 1000  # a dry run uses at most this many points per experiment
DRY_RUN_REPEATS = 2  # ... and this many repeats of the ICA sweep


def settings(P) -> dict:
    """The sizes the chapter runs for parameters ``P``: P's own, or under ``dry_run`` at most
    :data:`DRY_RUN_ROWS` rows and :data:`DRY_RUN_REPEATS` repeats (numbers meaningless)."""
    if not P.get("dry_run", False):
        return {"n_points": P["n_points"], "ica_sample_sizes": list(P["ica_sample_sizes"]),
                "ica_repeats": P["ica_repeats"]}
    return {"n_points": min(P["n_points"], DRY_RUN_ROWS),
            "ica_sample_sizes": sorted({min(n, DRY_RUN_ROWS) for n in P["ica_sample_sizes"]}),
            "ica_repeats": min(P["ica_repeats"], DRY_RUN_REPEATS)}


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

    from nearid.data.toy import sample_sources
    from nearid.metrics.recovery import amari_distance

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


def sample_size_verdict(sweep: pd.DataFrame, seed: int = 0) -> Verdict:
    """Does ICA's unmixing improve with n for non-Gaussian sources? Per (source, repeat), the
    Amari distance at the smallest n minus at the largest n; bootstrap interval over them."""
    ng = sweep[sweep["source"] != "gaussian"]
    lo, hi = ng["n"].min(), ng["n"].max()
    small = ng[ng["n"] == lo].set_index(["source", "repeat"])["amari"]
    large = ng[ng["n"] == hi].set_index(["source", "repeat"])["amari"].loc[small.index]
    return paired_difference(small.to_numpy(), large.to_numpy(), method="bootstrap", seed=seed)


def gaussian_verdict(sweep: pd.DataFrame) -> Verdict:
    """Do Gaussian sources stay unresolved? At the largest n, per repeat: the Gaussian Amari
    distance minus the mean over the non-Gaussian sources; Student's t interval over repeats."""
    top = sweep[sweep["n"] == sweep["n"].max()]
    if "gaussian" not in set(top["source"]) or set(top["source"]) == {"gaussian"}:
        raise ValueError("needs Gaussian and non-Gaussian sources")
    gauss = top[top["source"] == "gaussian"].set_index("repeat")["amari"]
    rest = top[top["source"] != "gaussian"].groupby("repeat")["amari"].mean().loc[gauss.index]
    return paired_difference(gauss.to_numpy(), rest.to_numpy(), method="t")
