"""Chapter 05, disentanglement (Table 2): its parameters in each profile, and what each accepts."""

from __future__ import annotations

from nearid.book.params import (
    BATCH,
    DEVICE,
    EPOCHS,
    MAX_ROWS,
    POSITIVE,
    SEED,
    SEEDS,
    WIDTH,
    Deferred,
    Interval,
    ListOf,
    Mapping,
    Options,
    Rule,
)
from nearid.book.profiles.shared import DRY_RUN, EXECUTOR, POWER_OF_TWO, SCALE_OUT, SCHEDULER


def _datasets() -> tuple[str, ...]:
    from nearid.data.procedural import DATASETS
    return DATASETS


def _ch05(name: str):
    def values() -> tuple[str, ...]:
        from nearid.experiments import ch05_disentanglement
        return getattr(ch05_disentanglement, name)
    return values


def _smallest_grid(datasets) -> int:
    from nearid.data.procedural import grid_size
    return min(grid_size(d) for d in datasets)


# epochs: every Table 2 row trains this long; trend_epochs: the AE's snapshots (same run,
# trained to the largest) scored for the scale trend; latent_multiplier: latents per factor.
_SHARED = dict(seed=0, datasets=["shapes3d", "mpi3d", "falcor3d", "isaac3d"], batch_size=64, hyper={},
               latent_multiplier=2, ica_keep="all", heatmap_dataset="shapes3d", device="auto", **SCALE_OUT)
PROFILES = {
    "smoke": dict(_SHARED, seeds=2, image_size=16, supersample=1, n_train=160, n_eval=120, epochs=1,
                  trend_epochs=[1, 2, 3], lr=1e-3, width=8, hidden=32, traversal_size=32),
    "quick": dict(_SHARED, seeds=5, image_size=32, supersample=1, n_train=2000, n_eval=1000, epochs=8,
                  trend_epochs=[2, 4, 8, 16], lr=2e-3, width=16, hidden=128, traversal_size=64),
    "full": dict(_SHARED, seeds=5, image_size=64, supersample=2, n_train=100000, n_eval=10000, epochs=30,
                 trend_epochs=[8, 15, 30, 60], lr=1e-3, width=32, hidden=256, traversal_size=64),
}

# What the "How this book was run" page shows of each profile beside the paper's setup
# (nearid.paper.SETUPS): the parameters that size a run, and what stands in for the paper's.
SIZES = ("seeds", "image_size", "n_train", "epochs", "width")
STAND_IN = ("procedural look-alikes of the four datasets, rendered here, and all four models trained by us")

# checked in this order: the three whose rules live in the experiment module (which imports
# torch) last, so that any other bad value fails before that import
CONSTRAINTS = dict(
    seed=SEED, seeds=SEEDS, datasets=ListOf(Options(_datasets), unique=True),
    image_size=POWER_OF_TWO, supersample=Interval(int, 1, 16), n_train=Interval(int, 10, MAX_ROWS),
    n_eval=Interval(int, 20, MAX_ROWS), epochs=EPOCHS,
    trend_epochs=ListOf(EPOCHS, min_len=3, unique=True), batch_size=BATCH,
    lr=POSITIVE, width=WIDTH, hidden=WIDTH,
    heatmap_dataset=Options(_datasets), traversal_size=POWER_OF_TWO, device=DEVICE,
    executor=EXECUTOR, scheduler=SCHEDULER, dry_run=DRY_RUN,
    hyper=Mapping(Options(_ch05("MODELS")), knobs=_ch05("MODEL_KNOBS")), ica_keep=Deferred(_ch05("ICA_KEEP_CHOICE")),
    latent_multiplier=Deferred(_ch05("LATENT_MULTIPLIER")),
)

RULES = [
    Rule(("epochs", "trend_epochs"), lambda p: p["epochs"] in p["trend_epochs"],
         "trend_epochs must include epochs (the trend passes through Table 2's budget)"),
    Rule(("heatmap_dataset", "datasets"), lambda p: p["heatmap_dataset"] in p["datasets"],
         "heatmap_dataset must be one of the datasets run"),
    Rule(("n_train", "n_eval", "datasets"),
         lambda p: p["n_train"] + p["n_eval"] <= _smallest_grid(p["datasets"]),
         "n_train + n_eval must not exceed the number of distinct images of the smallest dataset grid"),
]
