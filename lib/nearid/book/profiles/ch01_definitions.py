"""Chapter 01, definitions: its parameters in each profile, and what each accepts."""

from __future__ import annotations

from nearid.book.params import (
    MAX_ROWS,
    MAX_SEEDS,
    MAX_WIDTH,
    NON_NEGATIVE,
    SEED,
    Interval,
    ListOf,
    Text,
)
from nearid.book.profiles.shared import DRY_RUN, EXECUTOR, SCALE_OUT, SCHEDULER


def _source_kind(kind: str) -> None:
    """ValueError unless ``kind`` is a source distribution nearid.data.toy can sample."""
    import numpy as np

    from nearid.data.toy import sample_sources

    sample_sources(kind, 1, 1, np.random.default_rng(0))


_SHARED = dict(seed=0, **SCALE_OUT)  # executor, scheduler: where the ICA sweep's fits run (tasks)
PROFILES = {
    "smoke": dict(_SHARED, n_points=300, noise_levels=[0.0, 0.1], ica_sample_sizes=[200, 1000],
                  ica_sources=["laplace", "uniform"], ica_dim=3, ica_repeats=2),
    "quick": dict(_SHARED, n_points=2000, noise_levels=[0.0, 0.02, 0.05, 0.1, 0.2, 0.4],
                  ica_sample_sizes=[100, 300, 1000, 3000, 10000],
                  ica_sources=["laplace", "uniform", "gennorm_1.5", "gennorm_2.5", "gaussian"],
                  ica_dim=4, ica_repeats=5),
    "full": dict(_SHARED, n_points=10000, noise_levels=[0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8],
                 ica_sample_sizes=[100, 300, 1000, 3000, 10000, 30000, 100000],
                 ica_sources=["laplace", "uniform", "gennorm_1.5", "gennorm_2.5", "gaussian"],
                 ica_dim=8, ica_repeats=20),
}

# What the "How this book was run" page shows of each profile beside the paper's setup
# (nearid.paper.SETUPS): the parameters that size a run, and what stands in for the paper's.
SIZES = ("n_points", "ica_sample_sizes", "ica_dim", "ica_repeats")
STAND_IN = ("FastICA on synthetic sources; nothing is trained")

CONSTRAINTS = dict(
    seed=SEED, n_points=Interval(int, 10, MAX_ROWS), noise_levels=ListOf(NON_NEGATIVE),
    ica_sample_sizes=ListOf(Interval(int, 10, MAX_ROWS)),
    ica_sources=ListOf(Text(_source_kind, "'laplace', 'uniform', 'gaussian' or 'gennorm_<beta>' "
                                          "with beta > 0"), unique=True),
    ica_dim=Interval(int, 2, MAX_WIDTH), ica_repeats=Interval(int, 1, MAX_SEEDS), executor=EXECUTOR, scheduler=SCHEDULER,
    dry_run=DRY_RUN,
)

RULES = []
