"""Chapter 02, the isometric DGP: its parameters in each profile, and what each accepts."""

from __future__ import annotations

from nearid.book.params import (
    BATCH,
    DEVICE,
    EPOCHS,
    MAX_IMAGE,
    MAX_ROWS,
    MAX_WIDTH,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    SEEDS,
    WIDTH,
    ComponentRule,
    Deferred,
    Interval,
    ListOf,
    Rule,
)
from nearid.book.profiles.shared import DRY_RUN, EXECUTOR, SCALE_OUT, SCHEDULER

# trend_seeds: the seed trend of the verdicts trains seeds up to max(seeds, trend_seeds) at every delta

_SHARED = dict(seed=0, sources="uniform", ica_components="all", device="auto", **SCALE_OUT)
PROFILES = {
    "smoke": dict(_SHARED, seeds=2, trend_seeds=3, deltas=[0.0, 0.5], latent_dim=3, observed_dim=10,
                  n_train=600, n_test=300, epochs=3, batch_size=128, lr=3e-3,
                  weight_decay=1e-4, hidden=32, image_size=16, image_epochs=2),
    "quick": dict(_SHARED, seeds=5, trend_seeds=6, deltas=[0.0, 0.2, 0.4, 0.6, 0.8], latent_dim=3,
                  observed_dim=20, n_train=3000, n_test=2000, epochs=30, batch_size=128,
                  lr=3e-3, weight_decay=1e-4, hidden=64, image_size=24, image_epochs=20),
    "full": dict(_SHARED, seeds=10, trend_seeds=10, deltas=[0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                 latent_dim=5, observed_dim=50, n_train=50000, n_test=10000, epochs=100,
                 batch_size=256, lr=1e-3, weight_decay=1e-4, hidden=256, image_size=32,
                 image_epochs=100),
}

# What the "How this book was run" page shows of each profile beside the paper's setup
# (nearid.paper.SETUPS): the parameters that size a run, and what stands in for the paper's.
SIZES = ("seeds", "latent_dim", "observed_dim", "n_train", "epochs", "hidden")
STAND_IN = ("our isometric DGP with small MLP autoencoders, and a blob-image DGP")


def _toy(name: str):
    """A constraint nearid.data.toy declares, looked up when first checked (toy imports scipy)."""
    def lookup():
        from nearid.data import toy
        return getattr(toy, name)
    return lookup


CONSTRAINTS = dict(
    seed=SEED, seeds=SEEDS, trend_seeds=SEEDS,
    deltas=ListOf(Deferred(_toy("DELTA")), unique=True),
    latent_dim=Interval(int, 2, MAX_WIDTH), observed_dim=Interval(int, 4, MAX_WIDTH), n_train=Interval(int, 20, MAX_ROWS),
    n_test=Interval(int, 20, MAX_ROWS), epochs=EPOCHS, batch_size=BATCH, lr=POSITIVE,
    weight_decay=NON_NEGATIVE, hidden=WIDTH, image_size=Interval(int, 8, MAX_IMAGE),
    image_epochs=EPOCHS,
    sources=Deferred(_toy("SOURCE_KIND")),
    ica_components=ComponentRule(), device=DEVICE, executor=EXECUTOR, scheduler=SCHEDULER, dry_run=DRY_RUN,
)

RULES = [
    Rule(("observed_dim", "latent_dim"), lambda p: p["observed_dim"] >= 2 * p["latent_dim"],
         "observed_dim must be at least 2 * latent_dim (the isometric embedding needs 2d dimensions)"),
]
