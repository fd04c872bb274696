"""Statistical and structural near-identifiability, measured on learned codes.

*Statistical*: do the codes of independently trained models agree up to a transform family?
(:func:`statistical_comparisons` keeps every seed pair's :class:`~nearid.align.AlignmentResult`
with its per-row errors, for intervals; :func:`statistical_errors` is its table of means).
*Structural*: do they agree with the true factors u? (:func:`structural_scores`: rigid error
to u, and after whitening + ICA the signed-permutation error and the mean correlation
coefficient.)
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from nearid.align import (
    LINEAR,
    PAPER_FAMILIES,
    RIGID,
    ICA_COMPONENTS,
    AlignmentResult,
    SignedPermutationAlignment,
    alignment_table,
    check_pair,
    compare,
    latent_diameter,
    split_rows,
)
from nearid.ica import WhitenedICA
from nearid.metrics.recovery import mean_corr_coef


def statistical_comparisons(codes: list[np.ndarray], *, families=PAPER_FAMILIES, fit_fraction: float = 0.5,
                            seed: int = 0, ica_components: float | int | str | None = ICA_COMPONENTS,
                            ica_max_iter: int = 1000) -> dict[tuple[int, int], AlignmentResult]:
    """{(i, j): compare(codes[i], codes[j])} for every seed pair i < j.

    Every pair uses the same fit/evaluation split (``seed``), so ``row_errors`` of different
    pairs refer to the same evaluation inputs, row for row: averaging them over pairs gives
    one paired difference per input for a bootstrap over inputs. ``ica_components`` is the
    whitening rule of the ICA family (:func:`nearid.ica.choose_components`), ``ica_max_iter``
    FastICA's iteration limit.
    """
    if len(codes) < 2:
        raise ValueError(f"statistical identifiability needs codes of at least 2 models, got {len(codes)}")
    return {(i, j): compare(codes[i], codes[j], fit_fraction=fit_fraction, seed=seed, families=families,
                            ica_components=ica_components, ica_max_iter=ica_max_iter)
            for i, j in combinations(range(len(codes)), 2)}


def statistical_errors(codes: list[np.ndarray], families=PAPER_FAMILIES, fit_fraction: float = 0.5,
                       seed: int = 0, ica_components: float | int | str | None = ICA_COMPONENTS,
                       ) -> pd.DataFrame:
    """One row per seed pair (i -> j, i < j) and family: the held-out normalised error."""
    comparisons = statistical_comparisons(codes, families=families, fit_fraction=fit_fraction, seed=seed,
                                          ica_components=ica_components)
    return pairs_table(comparisons, families)


def pairs_table(comparisons: dict[tuple[int, int], AlignmentResult], families=PAPER_FAMILIES) -> pd.DataFrame:
    """The mean errors of :func:`statistical_comparisons` as rows (pair, family, error)."""
    return pd.DataFrame([{"pair": f"{i}->{j}", "family": family, "error": res.errors[family]}
                         for (i, j), res in comparisons.items() for family in families])


def row_difference(comparisons: dict[tuple[int, int], AlignmentResult], worse: str, better: str) -> np.ndarray:
    """Per evaluation row, ``worse``'s minus ``better``'s error, averaged over the seed pairs.

    The paired units of a bootstrap over inputs (see :func:`statistical_comparisons`).
    """
    diffs = [res.row_errors[worse] - res.row_errors[better] for res in comparisons.values()]
    if not diffs:
        raise ValueError("no seed pairs to compare")
    if len({d.shape for d in diffs}) != 1:
        raise ValueError("the seed pairs were evaluated on different rows")
    return np.mean(diffs, axis=0)


def structural_scores(Z, U, fit_fraction: float = 0.5, seed: int = 0,
                      ica_components: float | int | str | None = "all", ica_max_iter: int = 1000,
                      ) -> dict[str, float]:
    """How well codes Z recover the true factors U.

    Returns ``rigid_error`` (rotation + scale + translation from Z to U, held-out, normalised
    by U's diameter), ``linear_error``, ``ica_perm_error`` (whitening + ICA on Z, then a signed
    permutation with per-axis scale to U), ``mcc`` (mean |correlation| of Z's axes with U's,
    matched) and ``mcc_ica`` (the same after whitening + ICA), and ``ica_components`` (how many
    whitened components ICA kept, by the rule ``ica_components``; "all" when the code has one
    axis per factor; ``ica_max_iter`` bounds FastICA) and ``ica_converged`` (whether FastICA
    met its tolerance within those iterations). Every map is fitted on a random
    ``fit_fraction`` of rows and scored on the rest.
    """
    Z, U = check_pair(Z, U, min_rows=6)
    n = Z.shape[0]
    fit, ev = split_rows(n, fit_fraction, seed)  # the rows alignment_table fits and scores on
    diameter = latent_diameter(U[ev])
    ica = WhitenedICA(n_components=ica_components, random_state=seed, max_iter=ica_max_iter).fit(Z[fit])
    S = ica.transform(Z)
    table = alignment_table(Z, U, fit_fraction=fit_fraction, seed=seed, families=(RIGID, LINEAR))
    perm = SignedPermutationAlignment().fit(S[fit], U[fit])
    return {
        "rigid_error": table[RIGID],
        "linear_error": table[LINEAR],
        "ica_perm_error": perm.score(S[ev], U[ev], diameter=diameter),
        "mcc": mean_corr_coef(Z[ev], U[ev]),
        "mcc_ica": mean_corr_coef(S[ev], U[ev]),
        "ica_components": int(ica.n_components_),
        "ica_converged": bool(ica.converged_),
    }
