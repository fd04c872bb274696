"""Chapter 02's tasks and sweep on a tiny problem: the plan, pure tasks, tables, verdicts."""

import numpy as np
import pandas as pd
import pytest
import torch

from nearid.book.profiles import resolve
from nearid.experiments import ch02_isometric_dgp as ch02
from nearid.tasks import run_tasks

TINY = dict(seeds=2, trend_seeds=3, deltas=[0.0, 0.5], latent_dim=2, observed_dim=6, n_train=200, n_test=120, epochs=2,
            batch_size=64, hidden=8, image_size=8, image_epochs=1)


@pytest.fixture
def P():
    return resolve("02", "smoke", TINY)


def test_plan_lists_sweep_ablation_blob_and_trend_seeds(P):
    tasks = ch02.plan(P)
    assert len(tasks) == 2 * 2 + 2 + 1 + 2
    kinds = [t.kind for t in tasks]
    assert kinds == [ch02.MODEL_KIND] * 6 + [ch02.BLOB_KIND] + [ch02.MODEL_KIND] * 2
    assert [t.kwargs["delta"] for t in tasks[:6]] == [0.0, 0.0, 0.5, 0.5, 0.0, 0.0]
    assert [t.kwargs["training"].weight_decay for t in tasks[4:6]] == [0.0, 0.0]
    assert [(t.kwargs["delta"], t.kwargs["seed"]) for t in tasks[7:]] == [(0.0, 2), (0.5, 2)]
    assert len(ch02.plan(resolve("02", "smoke", {**TINY, "trend_seeds": 2}))) == 7  # no extra seeds
    assert len(ch02.plan(resolve("02", "smoke", {**TINY, "seeds": 4}))) == 4 * 2 + 4 + 1  # never below seeds
    assert all(t.kwargs["max_steps"] is None for t in tasks)
    assert tasks[0].steps == 2 * 4  # epochs * ceil(200 / 64)
    # device "auto" may use a GPU: on a Dask cluster it asks for one (dropped when no worker has one)
    assert all(t.gpu for t in tasks)
    assert not any(t.gpu for t in ch02.plan(resolve("02", "smoke", {**TINY, "device": "cpu"})))
    assert all(t.kwargs["sample"].sources == "uniform" for t in tasks[:6])


def test_dry_run_cuts_steps_and_evaluation(P):
    full = resolve("02", "full", {"dry_run": True})
    tasks = ch02.plan(full)
    assert len(tasks) == len(full.deltas) * ch02.trend_seeds(full) + full.seeds + 1
    assert all(t.kwargs["max_steps"] == ch02.DRY_RUN_STEPS and t.steps == ch02.DRY_RUN_STEPS for t in tasks)
    models = [t for t in tasks if t.kind == ch02.MODEL_KIND]
    assert all(t.kwargs["sample"].n_test == ch02.DRY_RUN_EVAL_ROWS for t in models)
    assert all(t.kwargs["n_test"] == ch02.DRY_RUN_EVAL_ROWS for t in tasks if t.kind == ch02.BLOB_KIND)
    assert all(t.kwargs["ica"].max_iter == ch02.DRY_RUN_ICA_ITER for t in models)
    assert all(t.kwargs["sample"].n_train == full.n_train for t in models)  # the full shapes


def test_sources_and_changes_reach_the_tasks(P):
    tasks = ch02.model_tasks(resolve("02", "smoke", {**TINY, "sources": "laplace"}), deltas=[0.3], seeds=3)
    assert [(t.kwargs["delta"], t.kwargs["seed"], t.kwargs["sample"].sources) for t in tasks] == [
        (0.3, 0, "laplace"), (0.3, 1, "laplace"), (0.3, 2, "laplace")]


def test_tasks_are_pure_and_keyed_by_every_setting(P):
    from dataclasses import replace

    from nearid.tasks import task_key

    task = ch02.plan(P)[0]
    moved = replace(task.kwargs["training"], lr=task.kwargs["training"].lr * 2)
    assert task_key(task) != task_key(replace(task, kwargs={**task.kwargs, "training": moved}))
    a = task()
    torch.manual_seed(123)  # global state must not matter
    np.random.seed(7)
    b = task()
    np.testing.assert_array_equal(a["codes"], b["codes"])
    assert a["codes"].shape == (P.n_test, P.latent_dim) and a["steps"] == task.steps
    short = ch02.train_isometric(**{**task.kwargs, "max_steps": 2})
    assert short["steps"] == 2


def test_run_assembles_tables_and_pairs_rows(P):
    res = ch02.run(P, log=None)
    assert len(res.sweep.models) == 4 and set(res.sweep.models.delta) == {0.0, 0.5}
    assert set(res.sweep.pairs.family) == {"permutation", "rigid", "linear", "ica"}
    assert len(res.sweep.pairs) == 2 * 4  # one seed pair per delta, four families
    assert len(res.ablation.models) == 2 and set(res.ablation.models.delta) == {0.0}
    assert res.blob["codes"].shape == (P.n_test, 2)
    assert len(res.trend_models) == 2 * 3 and set(res.trend_models.seed) == {0, 1, 2}
    trend = ch02.seed_trend(res.trend_models, delta=0.0, budgets=[2, 3])
    assert len(trend) == 4 and set(trend.claim) == {"error_falls_with_delta", "ae_ica_recovers_axes"}
    k2 = trend[(trend.claim == "ae_ica_recovers_axes") & (trend.seeds == 2)].iloc[0]
    assert k2.n == 2 and k2.estimate == pytest.approx(ch02.ica_gain_verdict(res.sweep.models, 0.0).estimate)
    pair = res.sweep.comparisons[0.0][(0, 1)]
    assert pair.row_errors["ica"].shape == (P.n_test // 2,)
    again = ch02.assemble(run_tasks(ch02.model_tasks(P), log=None), seed=P.seed, ica_components="all")
    assert again.pairs.error.tolist() == res.sweep.pairs.error.tolist()


def test_task_functions_are_keyword_only():
    with pytest.raises(TypeError):
        ch02.train_isometric(0.0, 0, 0, "uniform", 2, 6, 100, 50, 1, 32, 1e-3, 0.0, 8)


def _models(deltas, errors, seeds):
    return pd.DataFrame({"delta": deltas, "rigid_error": errors, "seed": seeds,
                         "linear_error": np.zeros(len(deltas))})


def test_trend_verdict_holds_for_a_clear_rise_and_fails_for_a_fall():
    deltas = np.repeat([0.0, 0.2, 0.4, 0.6, 0.8], 3)
    seeds = np.tile([0, 1, 2], 5)
    noise = np.random.default_rng(0).normal(0, 0.005, deltas.size)
    assert ch02.trend_verdict(_models(deltas, deltas / 10 + noise, seeds)).verdict == "holds"
    assert ch02.trend_verdict(_models(deltas, -deltas / 10 + noise, seeds)).verdict == "fails"


def test_ica_gain_and_weight_decay_verdicts():
    m = pd.DataFrame({"delta": [0.0, 0.0, 0.0, 0.5], "seed": [0, 1, 2, 0], "mcc": [0.7, 0.72, 0.69, 0.5],
                      "mcc_ica": [0.98, 0.99, 0.97, 0.1]})
    v = ch02.ica_gain_verdict(m, 0.0)
    assert v.verdict == "holds" and v.n == 3 and v.method == "t"
    with_wd = _models([0.0] * 3, [0.10, 0.11, 0.12], [0, 1, 2])
    without = _models([0.0] * 3, [0.31, 0.30, 0.32], [2, 1, 0])  # matched by seed, not by order
    w = ch02.weight_decay_verdict(with_wd, without, 0.0)
    assert w.verdict == "holds" and w.estimate == pytest.approx(0.2)


@pytest.mark.parametrize("override,message", [
    ({"sources": "cauchy"}, "'sources' got 'cauchy'"),
    ({"ica_components": 0}, "'ica_components' got 0"),
    ({"ica_components": 1.5}, "'ica_components' got 1.5"),
    ({"ica_components": "some"}, "'ica_components' got 'some'"),
    ({"trend_seeds": 1}, "'trend_seeds' got 1"),
])
def test_chapter_parameters_refuse_bad_values(override, message):
    from nearid.book.params import InvalidParameterError

    with pytest.raises(InvalidParameterError, match=message):
        resolve("02", "quick", override)
    assert resolve("02", "quick", {"sources": "gaussian", "ica_components": 2}).ica_components == 2


def test_evaluation_plan_prices_every_seed_pair_at_the_chapters_shape():
    import math

    from nearid import planning

    full = resolve("02", "full")
    (task,) = ch02.evaluation_plan(full)
    assert task.steps == math.comb(full.seeds, 2) * (len(full.deltas) + 1) and planning.takes_max_steps(task)
    assert (task.kwargs["n_rows"], task.kwargs["latent_dim"]) == (full.n_test, full.latent_dim)
    (dry,) = ch02.evaluation_plan(resolve("02", "full", {"dry_run": True}))
    assert dry.kwargs["n_rows"] == ch02.DRY_RUN_EVAL_ROWS and dry.kwargs["ica"].max_iter == ch02.DRY_RUN_ICA_ITER
    small = {**task.kwargs, "n_rows": 200}
    assert ch02.seed_pair_comparisons(**small, max_steps=3) == 3, "a plan times a few pairs, then scales up"
    assert ch02.seed_pair_comparisons(**{**small, "pairs": 2}) == 2
