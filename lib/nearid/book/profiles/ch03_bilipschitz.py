"""Chapter 03, bi-Lipschitz decoders: its parameters in each profile, and what each accepts.

``digit_n_trains`` are the training budgets of the digit-specific models (the first n MNIST
training images, of which each digit model sees its own class): the largest is the chapter's
Figure A.6 sweep, all of them together show how its verdict moves with scale.
"""

from __future__ import annotations

from nearid.book.params import (
    BATCH,
    DEVICE,
    EPOCHS,
    MAX_WIDTH,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    SEEDS,
    WIDTH,
    Boolean,
    Interval,
    ListOf,
    Rule,
)
from nearid.book.profiles.shared import DRY_RUN, EXECUTOR, MNIST_TEST, MNIST_TRAIN, SCALE_OUT, SCHEDULER


_SHARED = dict(seed=0, tie_encoder=True, digit_weight_decay=0.5, device="auto", **SCALE_OUT)
PROFILES = {
    "smoke": dict(_SHARED, seeds=2, alphas=[0.0, 1.0], weight_decays=[0.0, 0.5], latent_dim=4,
                  hidden=[32], n_train=600, n_test=300, epochs=2,
                  batch_size=64, lr=2e-3, digits=[1], digit_alphas=[0.0, 1.0], digit_seeds=3,
                  digit_n_trains=[300, 600, 1200]),
    "quick": dict(_SHARED, seeds=3, alphas=[0.0, 0.05, 0.2, 0.5, 1.0], weight_decays=[0.0, 0.5],
                  latent_dim=8, hidden=[128, 64], n_train=5000, n_test=2000,
                  epochs=30, batch_size=64, lr=2e-3, digits=[0, 1, 7],
                  digit_alphas=[0.0, 0.2, 1.0], digit_seeds=3, digit_n_trains=[2500, 5000, 10000]),
    "full": dict(_SHARED, seeds=5, alphas=[0.0, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0],
                 weight_decays=[0.0, 0.1, 0.5], latent_dim=16, hidden=[512, 256],
                 n_train=60000, n_test=10000, epochs=50, batch_size=128,
                 lr=1e-3, digits=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                 digit_alphas=[0.0, 0.05, 0.2, 0.5, 1.0], digit_seeds=5,
                 digit_n_trains=[15000, 30000, 60000]),
}

# What the "How this book was run" page shows of each profile beside the paper's setup
# (nearid.paper.SETUPS): the parameters that size a run, and what stands in for the paper's.
SIZES = ("seeds", "n_train", "latent_dim", "hidden", "alphas", "epochs", "digits")
STAND_IN = ("MNIST MLP autoencoders of ours, leak swept (our alpha = 1 is the linear end)")

CONSTRAINTS = dict(
    seed=SEED, seeds=SEEDS, alphas=ListOf(Interval(float, 0, 1), unique=True),
    weight_decays=ListOf(NON_NEGATIVE, unique=True), latent_dim=Interval(int, 2, MAX_WIDTH),
    hidden=ListOf(WIDTH), tie_encoder=Boolean(), n_train=Interval(int, 10, MNIST_TRAIN),
    n_test=Interval(int, 20, MNIST_TEST), epochs=EPOCHS, batch_size=BATCH, lr=POSITIVE,
    digits=ListOf(Interval(int, 0, 9), min_len=0, unique=True),
    digit_alphas=ListOf(Interval(float, 0, 1), unique=True), digit_seeds=SEEDS,
    digit_weight_decay=NON_NEGATIVE, digit_n_trains=ListOf(Interval(int, 10, MNIST_TRAIN), unique=True),
    device=DEVICE, executor=EXECUTOR, scheduler=SCHEDULER, dry_run=DRY_RUN,
)

RULES = [
    Rule(("alphas",), lambda p: len(p["alphas"]) >= 2,
         "alphas needs at least two slopes (the chapter compares the smallest with the largest)"),
    Rule(("digit_alphas", "digits"), lambda p: len(p["digit_alphas"]) >= 2 or not p["digits"],
         "digit_alphas needs at least two slopes (a rank correlation over one slope measures nothing)"),
    Rule(("seeds", "alphas", "weight_decays"),
         lambda p: p["seeds"] * (p["seeds"] - 1) // 2 * len(p["alphas"]) * len(p["weight_decays"]) >= 3,
         "the rank correlation over pairs of seeds needs at least 3 pairs in all"),
]
