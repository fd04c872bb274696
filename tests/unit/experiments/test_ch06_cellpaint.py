"""The Table 3/4 protocol on planted features where the right answer is known."""

import numpy as np
import pandas as pd
import pytest

from nearid.experiments import ch06_cellpaint
from nearid.paper import TABLE6_LIGHTGBM


def planted(seed=0, n_batches=4, n_ctrl=40, n_pert=10, d=6):
    """Independent uniform sources; guide 'g_1' shifts source 0; batches shift source 5.

    Observations are a fixed random mixing of the sources: whitening + ICA should undo it.
    """
    rng = np.random.default_rng(seed)
    rows, S = [], []
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


def test_whitening_on_controls():
    X, wells, _ = planted()
    ctrl = wells.is_control.to_numpy()
    Z = ch06_cellpaint.ControlWhitening().fit(X, ctrl).transform(X)
    np.testing.assert_allclose(Z[ctrl].mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(np.cov(Z[ctrl].T), np.eye(X.shape[1]), atol=1e-8)


def test_rotations_are_orthogonal_and_ica_unmixes():
    X, wells, S = planted(n_ctrl=300)
    ctrl = wells.is_control.to_numpy()
    for kind in ("pca_ica", "pca_rand"):
        fs = ch06_cellpaint.FeatureSet(kind, random_state=0).fit(X, ctrl)
        R = fs.rotation_
        np.testing.assert_allclose(R.T @ R, np.eye(R.shape[0]), atol=1e-6)
    F = ch06_cellpaint.FeatureSet("pca_ica").fit_transform(X, ctrl)
    assert ch06_cellpaint.factor_recovery(F[ctrl], S[ctrl][:, :5])["mcc"] > 0.9
    R = ch06_cellpaint.FeatureSet("pca_rand").fit_transform(X, ctrl)
    assert ch06_cellpaint.factor_recovery(R[ctrl], S[ctrl][:, :5])["mcc"] < 0.8
    np.testing.assert_allclose(ch06_cellpaint.FeatureSet("base").fit_transform(X, ctrl), X)
    with pytest.raises(ValueError, match="unknown feature set"):
        ch06_cellpaint.FeatureSet("nope").fit(X, ctrl)


def test_effect_vector_is_sparse_only_in_the_ica_basis():
    X, wells, _ = planted(n_ctrl=300, n_pert=60)
    out = ch06_cellpaint.evaluate(X, wells, n_splits=2, n_estimators=20)
    sp = out["table3"]["G"]["sparsity"]
    assert sp["pca_ica"] > 0.8 and sp["pca_ica"] > sp["pca_rand"] + 0.2
    # across batches the axis-aligned basis classifies best (the batch source mixes into
    # every raw feature, and trees split along axes)
    a = out["table3"]["G"]["auroc"]
    assert a["pca_ica"] > 0.75 and a["pca_ica"] > a["base"]
    assert set(out["table4"]) == set(ch06_cellpaint.FEATURE_SETS)
    assert out["table4"]["pca_ica"] > out["table4"]["pca_rand"]
    assert out["table3"]["G"]["guides"] == 1


def test_effect_vector_batch_matched():
    F = np.array([[0.0], [2.0], [10.0], [13.0], [1.0], [11.0]])
    wells = pd.DataFrame({"batch": [0, 0, 1, 1, 0, 1], "gene": ["c", "G", "c", "G", "c", "c"],
                          "guide": ["control", "g", "control", "g", "control", "control"],
                          "is_control": [True, False, True, False, True, True]})
    # batch 0: 2 - 0.5 = 1.5; batch 1: 13 - 10.5 = 2.5; mean 2; control sd of [0,10,1,11]
    sd = np.std([0, 10, 1, 11], ddof=1)
    assert ch06_cellpaint.effect_vector(F, wells, "g")[0] == pytest.approx(2.0 / sd)


def test_cross_batch_auroc_and_classifier_config():
    clf = ch06_cellpaint.make_classifier(n_estimators=10, seed=0)
    params = clf.get_params()
    for k, v in TABLE6_LIGHTGBM.items():
        assert params[k] == v
    rng = np.random.default_rng(0)
    y = np.tile([0, 0, 0, 1], 30)
    batches = np.repeat(np.arange(6), 20)
    F = rng.normal(size=(120, 3))
    F[:, 0] += 2.5 * y
    assert ch06_cellpaint.cross_batch_auroc(F, y, batches, n_splits=3, n_estimators=30) > 0.9
    noise = ch06_cellpaint.cross_batch_auroc(rng.normal(size=(120, 3)), y, batches, n_estimators=30)
    assert 0.25 < noise < 0.75
    with pytest.raises(ValueError, match="2 batches"):
        ch06_cellpaint.cross_batch_auroc(F, y, np.zeros(120), n_estimators=5)


def test_orderings_and_checks():
    t3 = {"A": {"auroc": {"base": 0.6, "pca": 0.7, "pca_ica": 0.8, "pca_rand": 0.65},
                "sparsity": {"base": 0.3, "pca": 0.2, "pca_ica": 0.4, "pca_rand": 0.5}}}
    o = ch06_cellpaint.orderings(t3).set_index("metric")
    assert o.loc["auroc", "ica_ge_pca_ge_base"] and o.loc["auroc", "ica_gt_rand"]
    assert not o.loc["sparsity", "ica_ge_pca_ge_base"] and not o.loc["sparsity", "ica_gt_rand"]
    X, wells, _ = planted()
    with pytest.raises(ValueError, match="lacks columns"):
        ch06_cellpaint.evaluate(X, wells.drop(columns=["guide"]))
    with pytest.raises(ValueError, match="rows"):
        ch06_cellpaint.evaluate(X[:-1], wells)


def test_batch_share():
    X, wells, S = planted()
    ctrl = wells.is_control.to_numpy()
    # source 5 is the batch: it is all batch; the others carry none
    # batch variance 4 * 1.25 = 5 against unit within-batch variance: 5 / 6
    assert ch06_cellpaint.batch_share(S[:, [5, 5, 5]], wells) == pytest.approx(5 / 6, abs=0.05)
    assert ch06_cellpaint.batch_share(S[:, :5], wells) < 0.1
    del X, ctrl
