"""The chapters' parameter constraints: the library's classes (:mod:`nearid.constraints`,
re-exported here for the profiles) and the limits only the book's profiles share.

``nearid run 04 -p fit_fraction=1.5`` fails in milliseconds with a message naming the
parameter, the bad value and what is allowed (:func:`nearid.book.profiles.resolve`).
"""

from __future__ import annotations

from nearid.constraints import (  # noqa: F401  (re-exported: the profiles import them from here)
    DEVICE,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    Boolean,
    ComponentRule,
    Constraint,
    Deferred,
    FileOrEmpty,
    InvalidParameterError,
    Interval,
    ListOf,
    Mapping,
    Options,
    OrNone,
    Rule,
    Text,
)

# Shared constraints of the chapters' parameter blocks.
# A chapter derives further seeds from its seed (seed + k for its models, k below a few
# thousand); numpy's legacy seeding and scikit-learn's random_state take at most 2**32 - 1, so
# the seed stops at 2**31 - 1 and every derived seed fits (-p seed=4294967296 once failed in
# cell 5, "Seed must be between 0 and 2**32 - 1").
MAX_SEED = 2**31 - 1
SEED = Interval(int, 0, MAX_SEED)
# A number of independently trained models (or repeats) per setting. The paper reports at most
# 5 seeds and our `full` profiles use at most 20; beyond 1,000 it is a typo (-p seeds=1000000000
# once built a billion-item sweep before any check), and the cost check prices what is below.
MAX_SEEDS = 1000
SEEDS = Interval(int, 2, MAX_SEEDS)
# Sizes: every parameter that sizes an allocation or a loop stops far above the `full`
# profile's value, so a typo is refused before any work (-p hidden=2000000000 once asked for
# an 80 GB matrix in cell 7). What is below the bounds the cost check prices.
MAX_WIDTH = 8192  # units of a layer; embedding, latent and context widths (full: at most 512)
MAX_ROWS = 10_000_000  # samples, rows, windows, sentences (full: at most 200,000)
MAX_EPOCHS = 100_000  # passes over the data (full: at most 100)
MAX_BATCH = 65_536  # rows per optimisation step (full: at most 256)
MAX_DEPTH = 256  # layers, attention heads (full: at most 8)
MAX_IMAGE = 1024  # an image's side in pixels, or a patch's (full: at most 64)
MAX_COUNT = 100_000  # other counts: batches, wells, cells, trees, folds (full: at most 300)
WIDTH = Interval(int, 1, MAX_WIDTH)
EPOCHS = Interval(int, 1, MAX_EPOCHS)
BATCH = Interval(int, 1, MAX_BATCH)
DEPTH = Interval(int, 1, MAX_DEPTH)
COUNT = Interval(int, 1, MAX_COUNT)
