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
