"""The Table 3/4 protocol on planted features where the right answer is known."""

import math

import numpy as np
import pandas as pd
import pytest

from nearid.book.profiles import resolve
from nearid.experiments import ch06_cell_microscopy
from nearid.paper import TABLE3, TABLE4, TABLE6_LIGHTGBM
from nearid.tasks import Task


def planted(seed=0, n_batches=4, n_ctrl=40, n_pert=10, d=6):
    """Independent uniform sources; guide 'g_1' shifts source 0; batches shift source 5.

    Observations are a fixed random mixing of the sources: whitening + ICA should undo it.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(n_batches):
        for _ in range(n_ctrl):
            rows.append((b, "control", "control", True))
        for _ in range(n_pert):
            rows.append((b, "G", "g_1", False))
    wells = pd.DataFrame(rows, columns=["batch", "gene", "guide", "is_control"])
    S = rng.uniform(-np.sqrt(3), np.sqrt(3), (len(wells), d))
    S[~wells.is_control.to_numpy(), 0] += 1.5
    S[:, 5] += 2.0 * wells.batch.to_numpy()
    A = rng.normal(size=(d, d))
    return S @ A.T, wells, S


def test_whitening_on_controls_through_nearid_ica():
    X, wells, _ = planted()
    ctrl = wells.is_control.to_numpy()
    fs = ch06_cell_microscopy.FeatureSet("pca", n_components="all", rows_per_component=None).fit(X, ctrl)
    Z = fs.transform(X)
    np.testing.assert_allclose(Z[ctrl].mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(np.cov(Z[ctrl].T), np.eye(X.shape[1]), atol=1e-8)
    assert fs.n_components_ == 6 and fs.variance_kept_ == pytest.approx(1.0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_declared_rule_picks_the_components():
    X, wells, _ = planted(n_ctrl=40)  # 160 controls: the cap allows 16, the rank 6
    ctrl = wells.is_control.to_numpy()
    default = ch06_cell_microscopy.FeatureSet("pca").fit(X, ctrl)
    var = np.linalg.svd(X[ctrl] - X[ctrl].mean(0), compute_uv=False) ** 2
    expected = int(np.searchsorted(np.cumsum(var) / var.sum(), 0.95) + 1)
    assert default.n_components_ == expected
    assert default.variance_kept_ >= 0.95
    assert ch06_cell_microscopy.FeatureSet("pca", n_components=2).fit(X, ctrl).n_components_ == 2
    # the cap: 40 control rows allow at most 4 components
    few = planted(n_ctrl=10)
    capped = ch06_cell_microscopy.FeatureSet("pca", n_components="all").fit(few[0], few[1].is_control.to_numpy())
    assert capped.n_components_ == 4
    for kind in ch06_cell_microscopy.WHITENED_SETS:
        F = ch06_cell_microscopy.FeatureSet(kind, n_components=3).fit_transform(X, ctrl)
        assert F.shape == (len(X), 3)
    base = ch06_cell_microscopy.FeatureSet("base").fit(X, ctrl)
    assert base.n_components_ == 6 and base.converged_


def test_rotations_are_orthogonal_and_ica_unmixes():
    X, wells, S = planted(n_ctrl=300)
    ctrl = wells.is_control.to_numpy()
    kw = dict(n_components="all", rows_per_component=None)
    R = ch06_cell_microscopy.FeatureSet("pca_rand", random_state=0, **kw).fit(X, ctrl).rotation_
    np.testing.assert_allclose(R.T @ R, np.eye(R.shape[0]), atol=1e-10)
    ica = ch06_cell_microscopy.FeatureSet("pca_ica", **kw).fit(X, ctrl)
    F = ica.transform(X)
    assert ica.converged_
    # ICA fitted on the (white) controls is a rotation: the controls stay white
    np.testing.assert_allclose(np.cov(F[ctrl].T), np.eye(6), atol=1e-6)
    assert ch06_cell_microscopy.factor_recovery(F[ctrl], S[ctrl][:, :5])["mcc"] > 0.9
    Rand = ch06_cell_microscopy.FeatureSet("pca_rand", **kw).fit_transform(X, ctrl)
    assert ch06_cell_microscopy.factor_recovery(Rand[ctrl], S[ctrl][:, :5])["mcc"] < 0.8
    np.testing.assert_allclose(ch06_cell_microscopy.FeatureSet("base").fit_transform(X, ctrl), X)
    with pytest.raises(ValueError, match="unknown feature set"):
        ch06_cell_microscopy.FeatureSet("nope").fit(X, ctrl)
    with pytest.raises(ValueError, match="ica_fit_on"):
        ch06_cell_microscopy.FeatureSet("pca_ica", ica_fit_on="guides").fit(X, ctrl)
    on_all = ch06_cell_microscopy.FeatureSet("pca_ica", ica_fit_on="all", **kw).fit_transform(X, ctrl)
    assert on_all.shape == F.shape and not np.allclose(on_all, F)


def test_effect_vector_is_sparse_only_in_the_ica_basis():
    X, wells, _ = planted(n_ctrl=300, n_pert=60)
    out = ch06_cell_microscopy.evaluate(X, wells, protocol=ch06_cell_microscopy.Protocol(n_components="all", n_splits=2,
                                                                                         n_estimators=20))
    sp = out["table3"]["G"]["sparsity"]
    assert sp["pca_ica"] > 0.8 and sp["pca_ica"] > sp["pca_rand"] + 0.2
    # across batches the axis-aligned basis classifies best (the batch source mixes into
    # every raw feature, and trees split along axes)
    a = out["table3"]["G"]["auroc"]
    assert a["pca_ica"] > 0.75 and a["pca_ica"] > a["base"]
    assert set(out["table4"]) == set(out["table4_share"]) == set(ch06_cell_microscopy.FEATURE_SETS)
    assert out["table4"]["pca_ica"] > out["table4"]["pca_rand"]
    assert out["table4_share"]["pca_ica"] > out["table4_share"]["pca_rand"]
    assert out["table3"]["G"]["guides"] == 1
    # per (guide, fold): 2 folds x 4 sets, whole batches held out
    pf = out["per_fold"]
    assert len(pf) == 2 * 4 and set(pf.fold) == {0, 1}
    assert pf.auroc.between(0, 1).all() and pf.sparsity.between(0, 1).all()


def test_effect_vector_batch_matched():
    F = np.array([[0.0], [2.0], [10.0], [13.0], [1.0], [11.0]])
    wells = pd.DataFrame({"batch": [0, 0, 1, 1, 0, 1], "gene": ["c", "G", "c", "G", "c", "c"],
                          "guide": ["control", "g", "control", "g", "control", "control"],
                          "is_control": [True, False, True, False, True, True]})
    # batch 0: 2 - 0.5 = 1.5; batch 1: 13 - 10.5 = 2.5; mean 2; control sd of [0,10,1,11]
    sd = np.std([0, 10, 1, 11], ddof=1)
    assert ch06_cell_microscopy.effect_vector(F, wells, "g")[0] == pytest.approx(2.0 / sd)
    assert ch06_cell_microscopy.effect_vector(F, wells, "g", batches=[1])[0] == pytest.approx(2.5 / sd)
    with pytest.raises(ValueError, match="no wells in batches"):
        ch06_cell_microscopy.effect_vector(F, wells, "g", batches=[7])


def test_cross_batch_scores_hold_out_whole_batches_and_classifier_config():
    clf = ch06_cell_microscopy.make_classifier(n_estimators=10, seed=0)
    params = clf.get_params()
    for k, v in TABLE6_LIGHTGBM.items():
        assert params[k] == v
    rng = np.random.default_rng(0)
    y = np.tile([0, 0, 0, 1], 30)
    batches = np.repeat(np.arange(6), 20)
    F = rng.normal(size=(120, 3))
    F[:, 0] += 2.5 * y
    scores, fold = ch06_cell_microscopy.cross_batch_scores(F, y, batches, n_splits=3, n_estimators=30)
    assert set(fold) == {0, 1, 2} and np.isfinite(scores).all()
    for b in range(6):
        assert len(set(fold[batches == b])) == 1  # a batch lies in one fold
    assert ch06_cell_microscopy.cross_batch_auroc(F, y, batches, n_splits=3, n_estimators=30) > 0.9
    noise = ch06_cell_microscopy.cross_batch_auroc(rng.normal(size=(120, 3)), y, batches, n_estimators=30)
    assert 0.25 < noise < 0.75
    with pytest.raises(ValueError, match="2 batches"):
        ch06_cell_microscopy.cross_batch_auroc(F, y, np.zeros(120), n_estimators=5)


def two_guides(**kw):
    """:func:`planted` with a second gene "H" (guide "h_1") on half the perturbed wells, and
    batches named by strings, as RxRx3-core's are."""
    X, wells, S = planted(**kw)
    wells = wells.copy()
    wells.loc[wells.index[~wells.is_control][::2], ["gene", "guide"]] = ["H", "h_1"]
    wells["batch"] = "plate" + wells["batch"].astype(str)
    return X, wells, S


def test_scoring_tasks_are_one_cross_batch_scoring_per_guide_and_feature_set():
    X, wells, _ = two_guides(n_ctrl=20, n_pert=6)
    feats = ch06_cell_microscopy.feature_sets(X, wells, n_components="all", rows_per_component=None)
    tasks = ch06_cell_microscopy.scoring_tasks(feats, wells, n_splits=3, n_estimators=5, seed=1)
    assert len(tasks) == 2 * 4 and {t.fn for t in tasks} == {ch06_cell_microscopy.cross_batch_scores}
    assert [t.kwargs["F"].shape[1] for t in tasks[:4]] == [feats[k].shape[1] for k in feats]
    first = tasks[0].kwargs  # gene H (first to appear), raw features: the controls and h_1's wells
    sel = wells.is_control.to_numpy() | (wells.guide == "h_1").to_numpy()
    np.testing.assert_array_equal(first["F"], feats["base"][sel])
    np.testing.assert_array_equal(first["y"], (~wells.is_control.to_numpy()[sel]).astype(int))
    assert first["n_splits"] == 3 and first["n_estimators"] == 5 and first["seed"] == 1
    # string batches travel as integer codes (hashed by content), and give the same folds
    assert first["batches"].dtype == np.int64
    by_label = ch06_cell_microscopy.cross_batch_scores(first["F"], first["y"], wells.batch.to_numpy()[sel],
                                                       n_splits=3, n_estimators=5, seed=1)
    for got, want in zip(tasks[0](), by_label):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="7 scorings for 2 guides x 4 feature sets"):
        ch06_cell_microscopy.guide_tables(feats, wells, [t() for t in tasks[:-1]])


def test_evaluate_on_a_process_pool_gives_the_in_process_numbers(monkeypatch):
    monkeypatch.setenv("NEARID_WORKERS", "2")
    monkeypatch.delenv("NEARID_TASK_CACHE", raising=False)
    X, wells, _ = two_guides(n_ctrl=20, n_pert=6)
    kw = dict(protocol=ch06_cell_microscopy.Protocol(n_components="all", n_splits=3, n_estimators=10))
    here = ch06_cell_microscopy.evaluate(X, wells, executor="inprocess", log=None, **kw)
    said = []
    pool = ch06_cell_microscopy.evaluate(X, wells, executor="processes", log=said.append, **kw)
    assert said[-1].startswith("8 tasks: 0 reused, 8 computed") and "processes x2" in said[-1]
    for name in ("per_guide", "per_fold"):
        pd.testing.assert_frame_equal(pool[name], here[name], check_exact=True)
    assert pool["table3"] == here["table3"] and pool["table4"] == here["table4"]
    assert len(here["per_fold"]) == 2 * 4 * 3 and here["per_fold"].auroc.notna().any()


def _per_fold(gap, metric="auroc", n=30, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        base = rng.uniform(0.5, 0.8)
        for k, shift in (("base", 0.0), ("pca", 0.0), ("pca_ica", gap), ("pca_rand", -gap)):
            rows.append(dict(gene="G", guide=f"g{i // 3}", fold=i % 3, feature_set=k,
                             auroc=base + shift + rng.normal(0, 0.01), sparsity=base + shift))
    return pd.DataFrame(rows)


def test_table3_verdicts_are_paired_intervals():
    held = ch06_cell_microscopy.table3_verdicts(_per_fold(0.05))
    assert set(held) == set(ch06_cell_microscopy.TABLE3_CLAIMS)
    assert held["auroc_ica_gt_pca"].verdict == "holds" and held["auroc_ica_gt_pca"].n == 30
    assert held["auroc_ica_gt_pca"].estimate == pytest.approx(0.05, abs=0.01)
    assert held["sparsity_ica_gt_rand"].verdict == "holds"
    assert ch06_cell_microscopy.table3_verdicts(_per_fold(-0.05))["auroc_ica_gt_pca"].verdict == "fails"
    # paired: the shared per-unit level cancels, so a tiny but steady gap still decides
    assert ch06_cell_microscopy.table3_verdicts(_per_fold(0.02))["auroc_ica_gt_rand"].verdict == "holds"
    tie = ch06_cell_microscopy.table3_verdicts(_per_fold(0.0))["auroc_pca_gt_base"]
    assert tie.verdict == "inconclusive"


def test_table4_verdicts_bootstrap_over_wells():
    rng = np.random.default_rng(0)
    labels = np.repeat(["control", "g"], 200)
    A = rng.normal(size=(400, 8))
    A[labels == "g", :2] += 1.5  # biology on two axes
    R = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    feats = {"pca_ica": A, "pca_rand": A @ R, "base": rng.normal(size=(400, 8))}
    v = ch06_cell_microscopy.table4_verdicts(feats, labels, n_boot=300)
    assert v["concentration_ica_gt_rand"].verdict == "holds" and v["concentration_ica_gt_rand"].n == 400
    assert v["concentration_rand_gt_base"].verdict == "holds"
    same = ch06_cell_microscopy.table4_verdicts({"pca_ica": A, "pca_rand": A, "base": A}, labels, n_boot=100)
    assert same["concentration_ica_gt_rand"].verdict == "inconclusive"


def test_paper_difference_and_comparison():
    ica_pca = np.mean([r["auroc"][2] - r["auroc"][1] for r in TABLE3.values()])
    assert ch06_cell_microscopy.paper_difference("auroc", "pca_ica", "pca") == pytest.approx(ica_pca)
    assert ch06_cell_microscopy.paper_difference("concentration", "pca_rand", "base") == pytest.approx(
        TABLE4["pca_rand"] - TABLE4["base"])
    t3 = {g: {"auroc": dict.fromkeys(ch06_cell_microscopy.FEATURE_SETS, 0.6),
              "sparsity": dict.fromkeys(ch06_cell_microscopy.FEATURE_SETS, 0.2), "guides": 1} for g in TABLE3}
    rows = ch06_cell_microscopy.paper_comparison(t3, dict.fromkeys(ch06_cell_microscopy.FEATURE_SETS, 0.3))
    assert len(rows) == len(TABLE3) * 8 + 4
    mtor = [r for r in rows if r["row"] == "MTOR" and r["column"] == "AUROC PCA + ICA"]
    assert mtor == [dict(table="Table 3", row="MTOR", column="AUROC PCA + ICA", ours=0.6,
                         paper=TABLE3["MTOR"]["auroc"][2])]


def test_component_sweep_reuses_embeddings_and_caps_by_rank():
    X, wells, _ = planted(n_ctrl=60, n_pert=15)
    said = []
    sweep = ch06_cell_microscopy.component_sweep(X, wells, grid=(2, 4, 6, 64),
                                                 protocol=ch06_cell_microscopy.Protocol(n_splits=2, n_estimators=10),
                                                 n_boot=100, log=said.append)
    scores, intervals = sweep["scores"], sweep["intervals"]
    assert sorted(set(scores.n_components)) == [2, 4, 6]  # 64 capped by the rank (6 columns)
    assert list(scores.asked.unique()) == [2, 4, 6]
    # one run of tasks: 3 k x 3 sets x 1 guide; the capped k (a repeat of k = 6) is not scored
    assert [line.split(":")[0] for line in said if " tasks: " in line] == ["9 tasks"]
    assert set(scores.feature_set) == set(ch06_cell_microscopy.WHITENED_SETS)
    assert scores.loc[scores.n_components == 6, "variance_kept"].eq(1.0).all()
    assert scores.concentration.between(0, 1).all() and scores.share.between(0.25, 1).all()
    assert set(intervals.claim) == {c for c, v in ch06_cell_microscopy.TABLE3_CLAIMS.items() if "base" not in v[1:3]}
    assert set(intervals.verdict) <= {"holds", "fails", "inconclusive"}


def test_orderings_gone_and_checks():
    X, wells, _ = planted()
    with pytest.raises(ValueError, match="lacks columns"):
        ch06_cell_microscopy.evaluate(X, wells.drop(columns=["guide"]))
    with pytest.raises(ValueError, match="rows"):
        ch06_cell_microscopy.evaluate(X[:-1], wells)
    assert not hasattr(ch06_cell_microscopy, "orderings")  # no strict-> counts any more


def test_batch_share():
    _, wells, S = planted()
    # source 5 is the batch: batch variance 4 * 1.25 = 5 against unit within-batch variance
    assert ch06_cell_microscopy.batch_share(S[:, [5, 5, 5]], wells) == pytest.approx(5 / 6, abs=0.05)
    assert ch06_cell_microscopy.batch_share(S[:, :5], wells) < 0.1


def test_plan_is_one_mae_task_per_replicate_and_budget_and_dry_run_cuts_them():
    P = resolve("06", "quick")
    tasks = ch06_cell_microscopy.plan(P)
    # one independently trained replicate each at the chapter's budget; the first seed's run
    # goes to the trend's longest budget and embeds the wells at the others on the way
    assert [(t.kwargs["mae"]["epochs"], t.kwargs["seed"], t.kwargs.get("snapshots")) for t in tasks] == [
        (12, 0, [3, 6]), (12, 1, None), (12, 2, None), (12, 3, None), (12, 4, None)]
    # each replicate on its own simulated screen
    assert [t.kwargs["simulator"]["seed"] for t in tasks] == [0, 1, 2, 3, 4]
    assert {t.kwargs["simulator"]["effect_scale"] for t in tasks} == {P.effect_scale}
    first = {"i": 0, "wells": "w", "snapshots": [{"epochs": 3, "i": 5}, {"epochs": 6, "i": 6}]}
    reps, trend = ch06_cell_microscopy.split_runs(tasks, [first, *({"i": i} for i in range(1, 5))], seed=P.seed,
                                                  epochs=12)
    assert reps == [{"i": 0, "wells": "w"}, *({"i": i} for i in range(1, 5))]
    assert trend == {3: {"i": 5, "wells": "w"}, 6: {"i": 6, "wells": "w"}, 12: {"i": 0, "wells": "w"}}
    # a budget above the chapter's (smoke: 1 epoch, trend [1, 2]): the first replicate is a snapshot
    smoke = ch06_cell_microscopy.plan(resolve("06", "smoke"))
    assert [(t.kwargs["mae"]["epochs"], t.kwargs.get("snapshots")) for t in smoke] == [(2, [1]), (1, None)]
    reps, trend = ch06_cell_microscopy.split_runs(smoke, [{"i": 0, "snapshots": [{"epochs": 1, "i": 9}]}, {"i": 1}],
                                                  seed=0, epochs=1)
    assert reps == [{"i": 9}, {"i": 1}] and trend == {1: {"i": 9}, 2: {"i": 0}}
    task = tasks[0]
    assert isinstance(task, Task) and task.kind == "mae" and task.gpu
    assert task.kwargs["max_steps"] is None
    cells = 6 * (48 + 15 * 3) * 12
    assert ch06_cell_microscopy.n_cells(task.kwargs["simulator"]) == cells
    assert task.steps == P.epochs * math.ceil(cells / P.batch_size)
    dry = ch06_cell_microscopy.plan(resolve("06", "full", {"dry_run": True}))[0]
    assert dry.kwargs["max_steps"] == ch06_cell_microscopy.DRY_RUN_STEPS
    assert dry.kwargs["simulator"]["cells_per_well"] == ch06_cell_microscopy.DRY_RUN_CELLS
    assert dry.kwargs["mae"]["embed_dim"] == 192  # the model keeps full's shape
    assert ch06_cell_microscopy.evaluation_protocol(resolve("06", "full", {"dry_run": True})).n_estimators == 10
    assert ch06_cell_microscopy.evaluation_protocol(P).n_estimators == 100
    assert ch06_cell_microscopy.sweep_grid(P) == P.ica_grid
    assert ch06_cell_microscopy.sweep_grid(resolve("06", "full", {"dry_run": True})) == [4]


def test_calibration_pilots_use_seeds_no_replicate_uses_and_choose_the_nearest_scale():
    P = resolve("06", "quick")
    pilots = ch06_cell_microscopy.calibration_plan(P, grid=(1.0, 2.0))
    n_seeds = len(ch06_cell_microscopy.CALIBRATION_SEEDS)
    assert n_seeds >= 3
    assert [t.kwargs["simulator"]["effect_scale"] for t in pilots] == [1.0, 2.0] * n_seeds
    assert all(t.kwargs["seed"] == t.kwargs["simulator"]["seed"] for t in pilots)
    seeds = {t.kwargs["seed"] for t in pilots}
    used = {t.kwargs["seed"] for t in ch06_cell_microscopy.plan(P)} | {
        t.kwargs["simulator"]["seed"] for t in ch06_cell_microscopy.plan(P)}
    assert seeds == set(ch06_cell_microscopy.CALIBRATION_SEEDS) and not seeds & used
    assert all(t.kwargs["mae"]["epochs"] == P.epochs for t in pilots)
    low, mean, high = ch06_cell_microscopy.paper_base_auroc()
    assert (low, high) == (0.663, 0.803) and low < mean < high
    choose = ch06_cell_microscopy.choose_effect_scale
    assert choose({1.0: 0.55, 2.0: 0.68, 4.0: 0.90}) == 2.0
    assert choose({1.0: 0.25, 2.0: 0.75}, target=0.5) == 1.0  # a tie goes to the weaker effect
    with pytest.raises(ValueError, match="no pilot"):
        choose({})


def test_calibration_table_averages_the_pilots_of_each_scale():
    rows = pd.DataFrame({"effect_scale": [2.0, 3.0, 2.0, 3.0], "pilot_seed": [1000, 1000, 1001, 1001],
                         "base_auroc": [0.60, 0.70, 0.70, 0.74]})
    table = ch06_cell_microscopy.calibration_table(rows)
    assert list(table.columns) == ["effect_scale", "base_auroc", "in_paper_range", "pilot_1000", "pilot_1001"]
    np.testing.assert_allclose(table.base_auroc, [0.65, 0.72])
    assert table.in_paper_range.tolist() == [False, True]
    # the mean of the pilots decides: one easy pilot (0.70 at scale 2) does not
    assert ch06_cell_microscopy.choose_effect_scale(dict(zip(table.effect_scale, table.base_auroc))) == 3.0


def test_plan_is_empty_for_real_data(tmp_path):
    import pandas as pd

    from nearid.data.rxrx import METADATA_COLUMNS

    pd.DataFrame({"well_id": ["w1"], "feature_0": [0.5]}).to_parquet(tmp_path / "e.parquet")
    (tmp_path / "m.csv").write_text(",".join(METADATA_COLUMNS) + "\n")
    P = resolve("06", "smoke", {"rxrx_embeddings": str(tmp_path / "e.parquet"),
                                "rxrx_metadata": str(tmp_path / "m.csv")})
    assert ch06_cell_microscopy.plan(P) == []


def test_screen_embeddings_task_returns_plain_data():
    P = resolve("06", "smoke", {"n_batches": 2, "controls_per_batch": 2, "n_splits": 2, "trend_epochs": [1],
                                "mae_replicates": 1})
    (task,) = ch06_cell_microscopy.plan(P)
    out = Task(task.fn, dict(task.kwargs, max_steps=1, device="cpu"))()
    n_wells = 2 * (2 + 15)
    assert out["embeddings"].shape == (n_wells, P.embed_dim) and np.isfinite(out["embeddings"]).all()
    assert len(out["wells"]) == n_wells and out["well_factors"].shape == (n_wells, 24)
    assert out["steps"] == 1 and out["n_cells"] == n_wells * P.cells_per_well
    assert out["examples"]["crops"].shape == (6, 2, 4, 16, 16)
    again = Task(task.fn, dict(task.kwargs, max_steps=1, device="cpu"))()
    np.testing.assert_array_equal(again["embeddings"], out["embeddings"])  # seeded inside


def test_a_snapshot_is_the_run_of_its_own_budget():
    """The scale trend's shorter budgets come from the first replicate's run: each must be,
    bit for bit, what a run of that many epochs gives (same seed, batches and masks)."""
    P = resolve("06", "smoke", {"n_batches": 2, "controls_per_batch": 2, "n_splits": 2, "mae_replicates": 1,
                                "trend_epochs": [1, 2, 3]})
    (task,) = ch06_cell_microscopy.plan(P)
    assert task.kwargs["mae"]["epochs"] == 3 and task.kwargs["snapshots"] == [1, 2]
    run = Task(task.fn, dict(task.kwargs, device="cpu"))()
    _, by_epochs = ch06_cell_microscopy.split_runs([task], [run], seed=P.seed, epochs=P.epochs)
    assert sorted(by_epochs) == [1, 2, 3] and "snapshots" not in by_epochs[1]
    for epochs in (1, 2):
        kwargs = {k: v for k, v in task.kwargs.items() if k != "snapshots"}
        alone = Task(task.fn, dict(kwargs, mae=kwargs["mae"] | {"epochs": epochs}, device="cpu"))()
        np.testing.assert_array_equal(by_epochs[epochs]["embeddings"], alone["embeddings"])
        assert by_epochs[epochs]["losses"] == alone["losses"] and by_epochs[epochs]["steps"] == alone["steps"]
        pd.testing.assert_frame_equal(by_epochs[epochs]["wells"], alone["wells"])
    capped = Task(task.fn, dict(task.kwargs, device="cpu", max_steps=1))()  # stops inside the first epoch
    assert [s["steps"] for s in capped["snapshots"]] == [1, 1]
    np.testing.assert_array_equal(capped["snapshots"][1]["embeddings"], capped["embeddings"])
    with pytest.raises(ValueError, match="snapshots must be budgets below"):
        Task(task.fn, dict(task.kwargs, device="cpu", snapshots=[3]))()


def test_a_planned_run_embeds_a_share_of_the_cells(monkeypatch):
    """nearid plan prices the MAE's training and the embedding of every cell apart."""
    P = resolve("06", "smoke", {"n_batches": 2, "controls_per_batch": 2, "n_splits": 2, "mae_replicates": 1,
                                "trend_epochs": [1]})
    (task,) = ch06_cell_microscopy.plan(P)
    monkeypatch.setattr(ch06_cell_microscopy, "MIN_EMBEDDED_CELLS", 4)
    n_cells = 2 * (2 + 15) * P.cells_per_well
    whole = Task(task.fn, dict(task.kwargs, max_steps=1, device="cpu"))()
    half = Task(task.fn, dict(task.kwargs, max_steps=1, device="cpu", evaluate=0.5))()
    none = Task(task.fn, dict(task.kwargs, max_steps=1, device="cpu", evaluate=0.0))()
    assert half["embeddings"].shape == (math.ceil(n_cells / 2), P.embed_dim) and "crops" not in half["examples"]
    assert none["embeddings"].size == 0 and none["examples"] == {}
    assert half["losses"] == none["losses"] == whole["losses"], "the MAE trains the same"
    with pytest.raises(ValueError, match="evaluate must be a share"):
        Task(task.fn, dict(task.kwargs, max_steps=1, device="cpu", evaluate=1.5))()


def test_scale_trend_decides_every_claim_at_every_budget():
    P = resolve("06", "smoke", {"n_batches": 3, "controls_per_batch": 4, "n_splits": 3})
    tasks = ch06_cell_microscopy.plan(P)
    results = [Task(t.fn, dict(t.kwargs, max_steps=2, device="cpu"))() for t in tasks]
    _, embeddings = ch06_cell_microscopy.split_runs(tasks, results, seed=P.seed, epochs=P.epochs)
    said = []
    trend = ch06_cell_microscopy.scale_trend(embeddings, n_boot=50, log=said.append,
                                             protocol=ch06_cell_microscopy.evaluation_protocol(P))
    assert [line.split(":")[0] for line in said if " tasks: " in line] == ["120 tasks"]  # 2 budgets x 15 guides x 4 sets
    assert sorted(trend.epochs.unique()) == [1, 2]
    assert set(trend.claim) == set(ch06_cell_microscopy.TABLE3_CLAIMS) | set(ch06_cell_microscopy.TABLE4_CLAIMS)
    assert set(trend.verdict) <= {"holds", "fails", "inconclusive"}


def test_replicate_verdicts_put_the_interval_over_trained_maes():
    """Three "MAEs" whose (guide, fold) units differ a lot within each but whose means agree:
    the t interval over replicates is narrow and decides; one replicate is refused."""
    rng = np.random.default_rng(0)
    evaluations = []
    for shift in (0.05, 0.06, 0.04):
        rows = []
        for g in range(10):
            for f in range(3):
                base = rng.normal(0.7, 0.1)
                for k, d in (("base", -0.02), ("pca", 0.0), ("pca_ica", shift), ("pca_rand", 0.01)):
                    rows.append(dict(guide=f"g{g}", fold=f, feature_set=k, auroc=base + d, sparsity=base + d))
        feats = {k: rng.normal(size=(40, 6)) for k in ("base", "pca", "pca_ica", "pca_rand")}
        evaluations.append({"per_fold": pd.DataFrame(rows), "features": feats})
    labels = np.repeat(["ctrl", "a", "b", "c"], 10)
    out = ch06_cell_microscopy.replicate_verdicts(evaluations, labels)
    v = out["auroc_ica_gt_pca"]
    assert v.method == "t" and v.n == 3 and v.estimate == pytest.approx(0.05) and v.verdict == "holds"
    assert set(out) == {*ch06_cell_microscopy.TABLE3_CLAIMS, *ch06_cell_microscopy.TABLE4_CLAIMS}
    with pytest.raises(ValueError, match="two or more"):
        ch06_cell_microscopy.replicate_verdicts(evaluations[:1], labels)


def test_evaluation_plan_prices_every_lightgbm_scoring_at_the_chapters_shape():
    """Full: 15 guides x (4 feature sets x (5 replicates + 3 trend budgets) + 3 whitened sets x
    7 grid points) = 795 scorings of 4 LightGBM fits: the 3,180 fits planning.py's table counts."""
    from nearid import planning

    full = resolve("06", "full")
    (task,) = ch06_cell_microscopy.evaluation_plan(full)
    assert task.steps == 795 and task.steps * full.n_splits == 3180 and planning.takes_max_steps(task)
    assert task.kwargs["n_features"] == full.embed_dim and task.kwargs["protocol"].n_estimators == full.n_estimators
    (dry,) = ch06_cell_microscopy.evaluation_plan(resolve("06", "full", {"dry_run": True}))
    assert dry.kwargs["protocol"].n_estimators == ch06_cell_microscopy.DRY_RUN_TREES
    assert ch06_cell_microscopy.evaluation_plan({**resolve("06", "smoke"), "rxrx_embeddings": "x.parquet"}) == []
    small = {**task.kwargs, "controls_per_batch": 20, "n_features": 8,
             "protocol": ch06_cell_microscopy.Protocol(n_splits=full.n_splits, n_estimators=5)}
    assert ch06_cell_microscopy.lightgbm_scoring(**small, max_steps=2) == 2, "a plan times a few, then scales up"
    assert ch06_cell_microscopy.lightgbm_scoring(**{**small, "units": 1}) == 1


def test_only_claims_on_pca_ica_rest_on_a_fastica_fit():
    on_ica = {cid for cid in [*ch06_cell_microscopy.TABLE3_CLAIMS, *ch06_cell_microscopy.TABLE4_CLAIMS]
              if ch06_cell_microscopy.uses_ica(cid)}
    assert on_ica == {"auroc_ica_gt_pca", "auroc_ica_gt_rand", "sparsity_ica_gt_rand", "sparsity_ica_gt_pca",
                      "concentration_ica_gt_rand"}
    assert ch06_cell_microscopy.FeatureSet().max_iter == ch06_cell_microscopy.ICA_MAX_ITER == 1_000
