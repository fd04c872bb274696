"""Chapter 01's experiments: how the error tolerance eps grows with noise, and how whitening +
ICA's unmixing approaches a signed permutation as the sample grows (Theorem 2's premise).

The chapter trains nothing. Its one sweep, the ICA fits of the sample-size check, runs as
tasks (:func:`plan`: one FastICA fit each, through :func:`nearid.tasks.run_tasks`, so that
``full``'s 700 fits use every core or worker and the task cache); the rest of its cells take
seconds (:func:`evaluation_plan` lists them for ``nearid plan``). Under ``dry_run``
(:func:`settings`) it keeps the full profile's sources, dimensions and noise levels and
subsamples rows and repeats.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pandas as pd

from nearid.align import PAPER_FAMILIES, alignment_table
from nearid.data.toy import sample_sources
from nearid.ica import WhitenedICA
from nearid.metrics.recovery import amari_distance
from nearid.tasks import Task
from nearid.verdicts import Verdict, paired_difference

DRY_RUN_ROWS = 1000  # a dry run uses at most this many points per experiment
DRY_RUN_REPEATS = 2  # ... and this many repeats of the ICA sweep
ICA_KIND = "ica_fit"  # kinds of the sweep's tasks: ica_fit_<source>_n<n>


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
        for family in PAPER_FAMILIES:
            rows.append({"noise": sigma, "family": family, "error": table[family]})
    return pd.DataFrame(rows)


def ica_fit(*, source: str, n: int, dim: int, repeat: int, seed: int = 0) -> dict:
    """One fit of the sweep: the Amari distance of whitening + ICA's unmixing from the truth.

    X = S A^T, with ``n`` rows of ``dim`` independent ``source`` sources S and a random
    well-conditioned mixing A, both drawn from the fit's own generator (seeded by ``seed``,
    ``repeat``, ``n`` and the source), so that any fit can run alone, in any order, on any
    worker, and give the same number. Gaussian sources need not converge: that is recorded in
    ``converged``, not warned about.
    """
    rng = np.random.default_rng([seed, repeat, n, zlib.crc32(source.encode())])
    S = sample_sources(source, n, dim, rng)
    A = rng.standard_normal((dim, dim)) + 2 * np.eye(dim)
    X = S @ A.T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ica = WhitenedICA(n_components="all", random_state=repeat, max_iter=2000).fit(X)
    return {"source": source, "n": n, "repeat": repeat, "converged": ica.converged_,
            "amari": amari_distance(ica.unmixing_, A)}


def sweep_tasks(*, sample_sizes, sources, dim: int, repeats: int, seed: int = 0) -> list[Task]:
    """One :func:`ica_fit` task per (source, sample size, repeat), in the sweep's row order.

    A task is one fit, not one (source, n) block of repeats: a fit's cost is set by whether
    FastICA converges (a Gaussian or near-Gaussian source runs all 2000 iterations), so it
    ranges from a tenth of a second to half a minute at the same n, and single fits spread
    the expensive ones over every worker. The cheapest fits still take 0.1 s, far above a
    task's own overhead (milliseconds). Tasks of one (source, n) share a ``kind``: they cost
    alike, so ``nearid plan`` times one of them and scales by the repeats.
    """
    return [Task(ica_fit, dict(source=source, n=int(n), dim=int(dim), repeat=r, seed=int(seed)),
                 kind=f"{ICA_KIND}_{source}_n{int(n)}", label=f"ICA {source} n={int(n)} repeat {r}")
            for source in sources for n in sample_sizes for r in range(repeats)]


def plan(P) -> list[Task]:
    """The chapter's tasks: the ICA sample-size sweep at ``P``'s sizes (:func:`settings`, so a
    dry run keeps the full profile's sources and dimension and cuts rows and repeats)."""
    S = settings(P)
    return sweep_tasks(sample_sizes=S["ica_sample_sizes"], sources=P["ica_sources"], dim=P["ica_dim"],
                       repeats=S["ica_repeats"], seed=P["seed"])


def collect(results) -> pd.DataFrame:
    """The sweep's table, one row per fit, from :func:`ica_fit` results in task order."""
    return pd.DataFrame(list(results))


def ica_amari_sweep(*, sample_sizes, sources, dim: int, repeats: int, seed: int = 0) -> pd.DataFrame:
    """Amari distance of whitening + ICA's unmixing from the truth, per sample size and source,
    every fit in this process one after another (:func:`plan` runs the same fits as tasks).

    X = S A^T with a random well-conditioned mixing A; Theorem 2's claim is that the
    remaining ambiguity is a signed permutation, i.e. the distance tends to 0 with n for
    non-Gaussian sources, and not for Gaussian ones.
    """
    tasks = sweep_tasks(sample_sizes=sample_sizes, sources=sources, dim=dim, repeats=repeats, seed=seed)
    return collect(task() for task in tasks)


# The exercise's small sweep (notebooks/01_definitions.py, "Almost Gaussian sources"): two
# sample sizes, three repeats, sources on either side of the Gaussian's shape 2.
EXERCISE_SWEEP = dict(sample_sizes=[300, 3000], sources=["laplace", "gennorm_1.8", "gennorm_2.2"], repeats=3)


def rotated_copy(*, n_points: int, noise_levels, seed: int = 0) -> pd.DataFrame:
    """The chapter's first experiment: :func:`rigid_residuals` of ``n_points`` Laplace codes in
    3 dimensions against a rotated copy, at each noise level (what its opening cells run)."""
    from nearid.data.toy import random_orthogonal

    rng = np.random.default_rng(seed)
    Z = sample_sources("laplace", n_points, 3, rng)
    R = random_orthogonal(3, rng)
    return rigid_residuals(Z, Z @ R, noise_levels=noise_levels, seed=seed)


def evaluation_plan(P) -> list[Task]:
    """What the chapter computes outside :func:`plan`'s tasks, at ``P``'s shape, for ``nearid
    plan`` to time: the rotated-copy noise sweep and the exercise's small ICA sweep."""
    S = settings(P)
    return [Task(rotated_copy, dict(n_points=S["n_points"], noise_levels=list(P["noise_levels"]), seed=P["seed"]),
                 kind="rotated_copy", label=f"rotated copy: {S['n_points']} points x {len(P['noise_levels'])} noise "
                                            "levels"),
            Task(ica_amari_sweep, dict(EXERCISE_SWEEP, dim=P["ica_dim"], seed=P["seed"]), kind="exercise_sweep",
                 label="exercise: small ICA sweep")]


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
