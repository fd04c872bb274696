"""The chapter-03 sweep: tasks, theory-curve fit, rank-correlation verdicts, tiny real sweeps.

Real sweeps use scikit-learn's bundled 8x8 digits (``dataset="sklearn_digits"``) so they run
in seconds; the chapter itself uses MNIST.
"""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from nearid.book.profiles import resolve
from nearid.tasks import task_key
from nearid.experiments.ch03_bilipschitz import (DRY_RUN_EVAL_ROWS, DRY_RUN_STEPS, MIN_MEASURED, BiLipschitzSweep,
                                                 Grid, Images, Training, fit_sweeps, fit_theory_curve, leak_effect,
                                                 load_images, plan, rank_correlation, setting_labels, spearman_rho,
                                                 summarise, theory_curve, theory_fit_intervals, train_and_measure,
                                                 train_autoencoder)

TINY = dict(images=Images(dataset="sklearn_digits", n_train=600, n_test=300),
            training=Training(latent_dim=3, hidden=(16,), epochs=2, device="auto"))


def test_theory_curve_known_values():
    np.testing.assert_allclose(theory_curve([0.0, 1.0, 2.0]), [0.0, np.sqrt(3), np.sqrt(8)])
    with pytest.raises(ValueError):
        theory_curve([-0.1])


def test_fit_recovers_floor_and_slope():
    L = np.linspace(0.1, 3, 20)
    fit = fit_theory_curve(L, 0.05 + 0.2 * theory_curve(L))
    assert fit.c == pytest.approx(0.2) and fit.b == pytest.approx(0.05) and fit.r2 == pytest.approx(1.0)
    np.testing.assert_allclose(fit.predict([1.0]), 0.05 + 0.2 * np.sqrt(3))
    origin = fit_theory_curve(L, 0.3 * theory_curve(L), intercept=False)
    assert origin.c == pytest.approx(0.3) and origin.b == 0
    # a flat error is badly explained by a curve through the origin (R^2 < 0), well by a floor
    flat = np.full_like(L, 0.2) + 0.01 * np.sin(7 * L)
    assert fit_theory_curve(L, flat, intercept=False).r2 < 0
    assert fit_theory_curve(L, flat).b == pytest.approx(0.2, abs=0.02)
    with pytest.raises(ValueError):
        fit_theory_curve([1.0, 2.0], [0.1, 0.2])  # a floor and a slope need 3 points


def test_theory_fit_intervals_cover_the_planted_slope():
    rng = np.random.default_rng(0)
    L = rng.uniform(0.05, 2.0, 60)
    err = 0.1 + 0.05 * theory_curve(L) + rng.normal(0, 0.01, 60)
    iv = theory_fit_intervals(L, err, n_boot=500)
    assert iv["c"].low < 0.05 < iv["c"].high and iv["c"].verdict == "holds"
    assert iv["b"].low < 0.1 < iv["b"].high
    flat = theory_fit_intervals(L, 0.1 + rng.normal(0, 0.01, 60), n_boot=500)
    assert flat["c"].verdict == "inconclusive"


def test_spearman_rho_and_rank_correlation():
    x = np.arange(10.0)
    assert spearman_rho(x, np.exp(x)) == pytest.approx(1.0)
    assert spearman_rho(x, -x) == pytest.approx(-1.0)
    assert spearman_rho(np.r_[x, np.nan], np.r_[x, 1.0]) == pytest.approx(1.0)
    assert np.isnan(spearman_rho(x, np.ones(10))) and np.isnan(spearman_rho([1.0, 2.0], [1.0, 2.0]))
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    up = rank_correlation(x, x + 0.3 * rng.normal(size=40), n_boot=500)
    assert up.verdict == "holds" and up.n == 40 and up.low <= up.estimate <= up.high
    assert rank_correlation(x, -x, n_boot=500).verdict == "fails"
    assert rank_correlation(x, rng.normal(size=40), n_boot=500).verdict == "inconclusive"
    with pytest.raises(ValueError, match="at least 3"):
        rank_correlation([1.0, 2.0], [1.0, 2.0])


def test_leak_effect_pairs_by_seed():
    models = pd.DataFrame(dict(group="all", alpha=[0.0] * 4 + [1.0] * 4, weight_decay=[0.0, 0.0, 0.5, 0.5] * 2,
                               seed=[0, 1] * 4, L_mean=[2.0, 2.2, 1.9, 2.1, 1.0, 1.1, 1.0, 1.2]))
    v = leak_effect(models, alpha_a=0.0, alpha_b=1.0)
    assert v.n == 4 and v.estimate == pytest.approx(0.975) and v.verdict == "holds" and v.method == "t"
    assert leak_effect(models, alpha_a=1.0, alpha_b=0.0).verdict == "fails"
    with pytest.raises(ValueError, match="units"):
        leak_effect(models[models.seed == 0].iloc[:2], alpha_a=0.0, alpha_b=1.0)


def test_summarise_means_per_setting():
    models = pd.DataFrame(dict(group="all", alpha=[0.0, 0.0, 1.0, 1.0], weight_decay=0.0, seed=[0, 1, 0, 1],
                               L_mean=[2.0, 4.0, 1.0, 1.0], L_max=[5.0, 7.0, 1.0, 1.0], L_median=1.0,
                               L_mean_local=1.0, L_max_local=1.0, recon_error=[0.1, 0.3, 0.2, 0.2]))
    pairs = pd.DataFrame(dict(group="all", alpha=[0.0, 1.0], weight_decay=0.0, rigid_error=[0.3, 0.1],
                              linear_error=[0.2, 0.05]))
    s = summarise(models, pairs)
    assert list(s.alpha) == [0.0, 1.0]
    np.testing.assert_allclose(s.L_mean, [3.0, 1.0])
    np.testing.assert_allclose(s.L_max, [6.0, 1.0])
    np.testing.assert_allclose(s.recon_error, [0.2, 0.2])
    np.testing.assert_allclose(s.rigid_error, [0.3, 0.1])


def test_load_images_filters_and_copies():
    X, y = load_images("sklearn_digits", train=True, n=500, digit=3)
    assert X.shape[1] == 64 and (y == 3).all() and 0 < len(y) < 500
    X[:] = 0  # a copy: the cached set is untouched
    assert load_images("sklearn_digits", train=True, n=500, digit=3)[0].max() > 0
    with pytest.raises(ValueError, match="unknown dataset"):
        load_images("cifar", train=True)


def test_task_is_deterministic_and_stops_at_max_steps():
    images = Images(dataset="sklearn_digits", n_train=200, n_test=100)
    kw = dict(alpha=0.2, seed=3, images=images,
              training=Training(latent_dim=3, hidden=[16], epochs=2, batch_size=32, device="cpu"))
    a, b = train_and_measure(**kw), train_and_measure(**kw)
    assert np.array_equal(a["codes"], b["codes"]) and np.array_equal(a["singular_values"], b["singular_values"])
    assert a["steps"] == 2 * 7 and a["codes"].shape == (100, 3) and a["singular_values"].shape == (100, 3)
    short = train_and_measure(**{**kw, "max_steps": 2, "images": replace(images, eval_rows=40)})
    assert short["steps"] == 2 and short["codes"].shape == (40, 3) and short["n_test"] == 40
    planned = train_and_measure(**{**kw, "max_steps": 2, "evaluate": 0.5})  # nearid plan: half the images
    assert planned["codes"].shape == (50, 3) and planned["train_loss"] == short["train_loss"]
    assert train_and_measure(**{**kw, "max_steps": 2, "evaluate": 0.0})["codes"].shape == (MIN_MEASURED, 3)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        train_autoencoder(np.zeros((10, 64)), alpha=1.5, seed=0)


def test_tiny_sweep_frames_and_tasks():
    logs = []
    sw = BiLipschitzSweep(Grid(alphas=[0.0, 1.0], seeds=2, weight_decays=[0.0, 0.1], tie_encoder=True), **TINY)
    tasks = sw.tasks()
    assert len(tasks) == 8 and all(t.steps == 2 * 10 for t in tasks)  # 600 images, batch 64
    assert len({task_key(t) for t in tasks}) == 8 and len({t.label for t in tasks}) == 8
    assert [t.kwargs["training"].encoder_slope for t in tasks[:2]] == [0.0, 0.0]  # tied: each model's alpha
    assert {t.kwargs["training"].encoder_slope for t in tasks} == {0.0, 1.0}
    sw.fit(log=logs.append)
    assert len(sw.models_) == 8 and len(sw.pairs_) == 4 and len(sw.B_) == 8 * 300
    assert sum("tasks:" in line for line in logs) == 1 and sum(line.startswith("group all") for line in logs) == 4
    assert (sw.B_.B >= 1 - 1e-9).all() and (sw.B_.B_local <= sw.B_.B + 1e-9).all()
    # a linear decoder (alpha = 1) has one Jacobian everywhere: B(z) is constant per model
    lin = sw.B_[sw.B_.alpha == 1.0].groupby(["weight_decay", "seed"]).B
    assert (lin.std() < 1e-6 * lin.mean()).all()
    assert (sw.models_.L_max >= sw.models_.L_mean - 1e-9).all()
    assert (sw.pairs_.rigid_error >= sw.pairs_.linear_error - 0.02).all()  # held out: a little slack
    s = sw.summary()
    assert {"L_mean", "L_max", "L_mean_local", "rigid_error", "linear_error", "recon_error"} <= set(s.columns)
    assert len(s) == 4 and s.n_pairs.eq(1).all()


def test_fit_sweeps_matches_separate_fits():
    a = BiLipschitzSweep(Grid(alphas=[0.5], seeds=2), **TINY)
    b = BiLipschitzSweep(Grid(alphas=[0.5], seeds=2, digits=[0, 7]), **TINY)
    fit_sweeps({"a": a, "b": b}, log=None)
    a2 = BiLipschitzSweep(Grid(alphas=[0.5], seeds=2), **TINY).fit(log=None)
    pd.testing.assert_frame_equal(a.pairs_, a2.pairs_)
    assert sorted(b.models_.group.unique()) == ["0", "7"]
    y_te = load_images("sklearn_digits", train=False, n=300)[1]
    sizes = b.B_.groupby("group").size()
    assert sizes["0"] == 2 * (y_te == 0).sum() and sizes["7"] == 2 * (y_te == 7).sum()


def test_sweep_validation():
    with pytest.raises(ValueError, match="seeds"):
        Grid(alphas=[0.5], seeds=1)
    with pytest.raises(ValueError, match="alphas"):
        Grid(alphas=[-0.1])
    with pytest.raises(ValueError, match="dataset"):
        Images(dataset="cifar")
    with pytest.raises(ValueError, match="a Grid record"):
        BiLipschitzSweep({"alphas": [0.5]}, **TINY).tasks()
    with pytest.raises(ValueError, match="held-out"):
        BiLipschitzSweep(Grid(alphas=[0.5], digits=[1]), **{**TINY, "images": replace(TINY["images"], n_test=40)}).tasks()
    with pytest.raises(ValueError, match="results"):
        BiLipschitzSweep(Grid(alphas=[0.5], seeds=2), **TINY).fit(results=[{}], log=None)


def test_plan_lists_the_chapters_models(mnist_root):
    P = resolve("03_bilipschitz", "smoke")
    tasks = plan(P)
    n_all = P.seeds * len(P.alphas) * len(P.weight_decays)
    n_digit = len(P.digit_n_trains) * len(P.digits) * len(P.digit_alphas) * P.digit_seeds
    assert len(tasks) == n_all + n_digit
    assert {t.kwargs["images"].n_train for t in tasks[n_all:]} == set(P.digit_n_trains)
    assert all(t.kwargs["max_steps"] is None and t.kwargs["images"].eval_rows is None and t.steps > 0 for t in tasks)
    dry = plan(resolve("03_bilipschitz", "full", {"dry_run": True}))
    assert all(t.kwargs["max_steps"] == DRY_RUN_STEPS and t.steps == DRY_RUN_STEPS for t in dry)
    assert all(t.kwargs["images"].eval_rows == DRY_RUN_EVAL_ROWS for t in dry)


def test_figure_a4_same_proportionality_is_an_equivalence_test():
    """Figure A.4: the error follows L_max as it follows L_mean. Where L_max is nearly a
    monotone function of L_mean the two rank correlations are close (holds); where it is
    exactly one, they are equal on every resample: a difference fixed by construction, which
    decides nothing; where L_max carries no information about the error the difference is
    large and the interval lies outside the margin (fails)."""
    from nearid.experiments.ch03_bilipschitz import same_proportionality

    rng = np.random.default_rng(0)
    l_mean = rng.uniform(0.1, 2.0, size=60)
    error = 0.05 + 0.1 * np.sqrt(2 * l_mean + l_mean ** 2) + 0.01 * rng.normal(size=60)
    close = same_proportionality(l_mean, 1.5 * l_mean ** 2 * np.exp(0.05 * rng.normal(size=60)), error, margin=0.2)
    assert abs(close.estimate) < 0.1 and close.verdict == "holds" and close.n == 60
    same = same_proportionality(l_mean, 1.5 * l_mean ** 2, error, margin=0.2)
    assert same.estimate == pytest.approx(0.0, abs=1e-12) and same.verdict == "inconclusive"
    unrelated = same_proportionality(l_mean, rng.uniform(size=60), error, margin=0.2)
    assert unrelated.estimate < -0.5 and unrelated.verdict == "fails"
    with pytest.raises(ValueError, match="at least 3 rows"):
        same_proportionality([1.0, np.nan], [1.0, 2.0], [0.1, 0.2], margin=0.2)


def test_evaluation_plan_prices_every_seed_pair_and_exercise_at_the_chapters_shape():
    """Full: 9 alphas x 3 weight decays x C(5, 2) = 270 pairs of 10,000 x 16 codes, 3 budgets x
    10 digits x 5 alphas x C(5, 2) = 1,500 pairs of the digit models, the bootstraps, and the 15
    exercise autoencoders (6 + 8 in the sweeps, 1 by hand) at the profile's hidden layers."""
    import math

    from nearid import planning
    from nearid.experiments import ch03_bilipschitz as ch03

    full = resolve("03", "full")
    tasks = ch03.evaluation_plan(full)
    kinds = planning.group(tasks)
    (pairs,) = kinds["ch03 seed-pair alignments"]
    assert pairs.steps == len(full.alphas) * len(full.weight_decays) * math.comb(full.seeds, 2) == 270
    assert pairs.kwargs["rows"] == [full.n_test] and pairs.kwargs["latent_dim"] == full.latent_dim
    (digits,) = kinds["ch03 seed-pair alignments (digit models)"]
    assert digits.steps == (len(full.digit_n_trains) * len(full.digits) * len(full.digit_alphas)
                            * math.comb(full.digit_seeds, 2)) == 1500
    assert len(digits.kwargs["rows"]) == len(full.digits) and sum(digits.kwargs["rows"]) == full.n_test
    (boot,) = kinds["ch03 verdict bootstraps"]
    assert boot.kwargs["pairs"] == 270 and boot.kwargs["digit_pairs"] == [500, 500, 500]
    exercise = kinds["ch03 exercise autoencoder"]
    assert len(exercise) == 15 and all(planning.takes_max_steps(t) and t.steps for t in exercise)
    assert all(t.kwargs["training"].hidden == tuple(full.hidden) for t in exercise)
    assert all(planning.takes_max_steps(t) for t in (pairs, digits))

    dry = planning.group(ch03.evaluation_plan(resolve("03", "full", {"dry_run": True})))
    assert dry["ch03 seed-pair alignments"][0].kwargs["rows"] == [DRY_RUN_EVAL_ROWS]
    assert max(dry["ch03 seed-pair alignments (digit models)"][0].kwargs["rows"]) == DRY_RUN_EVAL_ROWS
    assert len(dry["ch03 exercise autoencoder"]) == 15, "the exercise cells train whole in a dry run too"
    assert "ch03 seed-pair alignments (digit models)" not in planning.group(
        ch03.evaluation_plan(resolve("03", "smoke", {"digits": []})))

    small = dict(rows=[60, 40], latent_dim=3, pairs=5)
    assert ch03.seed_pair_alignments(**small, max_steps=2) == 2, "a plan times a few pairs, then scales up"
    assert ch03.seed_pair_alignments(**small) == 5
    assert ch03.verdict_bootstraps(pairs=4, nonlinear_pairs=2, models=8, margin=0.2) == 8


def test_leak_effect_on_a_log_scale_and_settings_as_clusters():
    """log=True compares log L (a ratio: one model with a huge L cannot decide it), and the
    pair-based verdicts resample settings, so n counts settings, not pairs."""
    models = pd.DataFrame({"group": "all", "weight_decay": 0.0, "seed": [0, 1, 2, 0, 1, 2],
                           "alpha": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "L_mean": [2.0, 4.0, 400.0, 1.0, 2.0, 4.0]})
    raw = leak_effect(models, alpha_a=0.0, alpha_b=1.0)
    logged = leak_effect(models, alpha_a=0.0, alpha_b=1.0, log=True)
    assert raw.estimate == pytest.approx((1 + 2 + 396) / 3)
    assert logged.estimate == pytest.approx(np.log(2 * 2 * 100) / 3)
    pairs = pd.DataFrame({"group": "all", "alpha": np.repeat([0.0, 0.2, 0.5, 1.0], 3), "weight_decay": 0.0,
                          "L_mean": np.arange(12.0), "rigid_error": np.arange(12.0) + 0.1})
    labels = setting_labels(pairs)
    assert len(set(labels)) == 4 and labels[0] == labels[2] != labels[3]
    v = rank_correlation(pairs.L_mean, pairs.rigid_error, groups=labels)
    assert v.n == 4 and v.estimate == pytest.approx(1.0)
