"""Chapter 03, bi-Lipschitz decoders: its parameters in each profile, and what each accepts."""

from __future__ import annotations

from nearid.book.params import DEVICE, NON_NEGATIVE, POSITIVE, POSITIVE_INT, SEED, Boolean, Interval, ListOf
from nearid.book.profiles.shared import MNIST_TEST, MNIST_TRAIN

PROFILES = {
    "smoke": dict(seed=0, seeds=2, alphas=[0.0, 1.0], weight_decays=[0.0, 0.5], latent_dim=4,
                  hidden=[32], tie_encoder=True, n_train=600, n_test=300, epochs=2,
                  batch_size=64, lr=2e-3, digits=[1], digit_alphas=[0.0, 1.0], digit_seeds=3,
                  digit_weight_decay=0.5, digit_n_train=1200, device="auto"),
    "quick": dict(seed=0, seeds=3, alphas=[0.0, 0.05, 0.2, 0.5, 1.0], weight_decays=[0.0, 0.5],
                  latent_dim=8, hidden=[128, 64], tie_encoder=True, n_train=5000, n_test=2000,
                  epochs=30, batch_size=64, lr=2e-3, digits=[0, 1, 7],
                  digit_alphas=[0.0, 0.2, 1.0], digit_seeds=3, digit_weight_decay=0.5,
                  digit_n_train=10000, device="auto"),
    "full": dict(seed=0, seeds=5, alphas=[0.0, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0],
                 weight_decays=[0.0, 0.1, 0.5], latent_dim=16, hidden=[512, 256],
                 tie_encoder=True, n_train=60000, n_test=10000, epochs=50, batch_size=128,
                 lr=1e-3, digits=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                 digit_alphas=[0.0, 0.05, 0.2, 0.5, 1.0], digit_seeds=5,
                 digit_weight_decay=0.5, digit_n_train=60000, device="auto"),
}

CONSTRAINTS = dict(
    seed=SEED, seeds=Interval(int, 2), alphas=ListOf(Interval(float, 0, 1), unique=True),
    weight_decays=ListOf(NON_NEGATIVE, unique=True), latent_dim=Interval(int, 2),
    hidden=ListOf(POSITIVE_INT), tie_encoder=Boolean(), n_train=Interval(int, 10, MNIST_TRAIN),
    n_test=Interval(int, 20, MNIST_TEST), epochs=POSITIVE_INT, batch_size=POSITIVE_INT, lr=POSITIVE,
    digits=ListOf(Interval(int, 0, 9), min_len=0, unique=True),
    digit_alphas=ListOf(Interval(float, 0, 1), unique=True), digit_seeds=Interval(int, 2),
    digit_weight_decay=NON_NEGATIVE, digit_n_train=Interval(int, 10, MNIST_TRAIN), device=DEVICE,
)

RULES = []
