"""Chapter 06, cell microscopy (Tables 3, 4, 6): its parameters in each profile, and what each accepts."""

from __future__ import annotations

from nearid.book.params import (
    BATCH,
    COUNT,
    DEPTH,
    DEVICE,
    EPOCHS,
    MAX_COUNT,
    MAX_IMAGE,
    MAX_ROWS,
    MAX_WIDTH,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    ComponentRule,
    FileOrEmpty,
    Interval,
    ListOf,
    Options,
    Rule,
    Text,
)
from nearid.book.profiles.shared import DRY_RUN, EXECUTOR, SCALE_OUT, SCHEDULER


# ica_components: a fixed number of whitened components, a quarter of the embedding's width
# (16 of 64 at quick, 48 of 192 at full; 3, the rows cap, at smoke), declared 2026-12-05
# (issue 35; 0.95 of the control wells' variance until then, which kept 4 of 64 at quick), at
# most one component per rows_per_component control wells (0 = no cap); ica_grid: the numbers
# of whitened components of the sensitivity figure, declared before any result;
# trend_epochs: the MAE training budgets of the scale trend (it must include epochs);
# mae_replicates: MAEs trained independently (seeds seed, seed + 1, ...) at ``epochs``, each on
# its own simulated screen (simulator seeds seed, seed + 1, ...; one shared screen until
# 2026-12-05); the verdicts resample them (a t interval over replicates).
# effect_scale: calibrated at quick on Base AUROC alone, the mean of three pilot screens per
# scale (benchmarks/ch06_calibration.py, issue 35; 1.5 until 2026-12-05, then 2 from one pilot
# screen per scale the same day), used unchanged by every profile.
# rxrx_* "" = simulate (give the paths of metadata_rxrx3_core.csv and
# OpenPhenom_rxrx3_core_embeddings.parquet for real data).
# (mae_replicates: five at quick and full, the floor issue 35 sets from power; 3 until 2026-12-05)
_SHARED = dict(seed=0, device="auto", mae_replicates=5, well_sd=0.5, effect_scale=3.0, batch_strength=0.5, mask_ratio=0.75,
               weight_decay=0.05, ica_components=0.95, rows_per_component=10,
               ica_grid=[4, 8, 16, 32, 64], ica_fit_on="controls", rxrx_embeddings="",
               rxrx_metadata="", rxrx_batch_column="experiment_name", **SCALE_OUT)
PROFILES = {
    "smoke": dict(_SHARED, mae_replicates=2, ica_components=3, image_size=16, n_batches=3, controls_per_batch=10,
                  wells_per_guide=1, cells_per_well=2, patch_size=4, embed_dim=16, depth=1, num_heads=2, decoder_embed_dim=8,
                  decoder_num_heads=2, decoder_depth=1, epochs=1, batch_size=64, lr=1.5e-3, n_splits=3, n_estimators=10,
                  trend_epochs=[1, 2]),
    "quick": dict(_SHARED, ica_components=16, image_size=32, n_batches=6, controls_per_batch=48, wells_per_guide=3,
                  cells_per_well=12, patch_size=8, embed_dim=64, depth=4, num_heads=4, decoder_embed_dim=32,
                  decoder_num_heads=4, decoder_depth=2, epochs=12, batch_size=128, lr=1.5e-3, n_splits=3, n_estimators=100,
                  trend_epochs=[3, 6, 12]),
    "full": dict(_SHARED, ica_components=48, image_size=64, n_batches=12, controls_per_batch=200, wells_per_guide=8,
                 cells_per_well=40, patch_size=8, embed_dim=192, depth=8, num_heads=6, decoder_embed_dim=128,
                 decoder_num_heads=4, decoder_depth=4, epochs=100, batch_size=256, lr=1.5e-4 * 4, n_splits=4,
                 n_estimators=300, ica_grid=[4, 8, 16, 32, 64, 128, 192], trend_epochs=[25, 50, 100]),
}

# What the "How this book was run" page shows of each profile beside the paper's setup
# (nearid.paper.SETUPS): the parameters that size a run, and what stands in for the paper's.
SIZES = ("mae_replicates", "image_size", "n_batches", "controls_per_batch", "embed_dim", "depth", "epochs")
STAND_IN = ("a simulated cell screen and a small ViT-MAE of ours (RxRx3-core embeddings instead when their files are given)")

def _rxrx(name: str):
    """A check of nearid.data.rxrx, imported when a path is given (it imports pandas)."""
    def check(path: str) -> None:
        from nearid.data import rxrx
        getattr(rxrx, name)(path)
    return check


CONSTRAINTS = dict(
    seed=SEED, device=DEVICE, mae_replicates=Interval(int, 1, 10), image_size=Interval(int, 16, MAX_IMAGE),
    n_batches=Interval(int, 2, MAX_COUNT), controls_per_batch=Interval(int, 2, MAX_COUNT), wells_per_guide=COUNT,
    cells_per_well=COUNT,
    well_sd=NON_NEGATIVE, effect_scale=NON_NEGATIVE, batch_strength=NON_NEGATIVE,
    patch_size=Interval(int, 1, MAX_IMAGE), embed_dim=Interval(int, 4, MAX_WIDTH), depth=DEPTH, num_heads=DEPTH,
    decoder_embed_dim=Interval(int, 2, MAX_WIDTH), decoder_num_heads=DEPTH, decoder_depth=DEPTH,
    mask_ratio=Interval(float, 0, 1, closed="neither"), epochs=EPOCHS, batch_size=BATCH,
    lr=POSITIVE, weight_decay=NON_NEGATIVE, ica_components=ComponentRule(), rows_per_component=Interval(int, 0, MAX_ROWS),
    ica_grid=ListOf(Interval(int, 2, MAX_WIDTH), unique=True), ica_fit_on=Options(("controls", "all")),
    n_splits=Interval(int, 2, MAX_COUNT), n_estimators=COUNT,
    rxrx_embeddings=FileOrEmpty(_rxrx("check_embeddings_file"),
                                "RxRx3-core OpenPhenom embeddings: Parquet with well_id and numeric feature_<k> columns"),
    rxrx_metadata=FileOrEmpty(_rxrx("check_metadata_file"),
                              "RxRx3-core metadata: a CSV whose header names well_id, experiment_name, plate, ..."),
    rxrx_batch_column=Text(empty=False), executor=EXECUTOR,
    scheduler=SCHEDULER, dry_run=DRY_RUN, trend_epochs=ListOf(EPOCHS, unique=True),
)

RULES = [
    Rule(("epochs", "trend_epochs"), lambda p: p["epochs"] in p["trend_epochs"],
         "trend_epochs must include epochs (the trend passes through the chapter's own budget)"),
    Rule(("n_splits", "n_batches"), lambda p: p["n_splits"] <= p["n_batches"],
         "n_splits must not exceed n_batches (cross-validation folds are whole batches)"),
    Rule(("embed_dim", "num_heads"), lambda p: p["embed_dim"] % p["num_heads"] == 0,
         "embed_dim must be a multiple of num_heads"),
    Rule(("decoder_embed_dim", "decoder_num_heads"), lambda p: p["decoder_embed_dim"] % p["decoder_num_heads"] == 0,
         "decoder_embed_dim must be a multiple of decoder_num_heads"),
    Rule(("image_size", "patch_size"), lambda p: p["image_size"] % p["patch_size"] == 0,
         "image_size must be a multiple of patch_size"),
    Rule(("rxrx_embeddings", "rxrx_metadata"),
         lambda p: bool(p["rxrx_embeddings"]) == bool(p["rxrx_metadata"]),
         "give both rxrx_embeddings and rxrx_metadata (real data) or neither (simulation)"),
]
