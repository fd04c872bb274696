import numpy as np
import pytest

from nearid import identifiability as ident
from nearid.data.toy import random_orthogonal, sample_sources


def test_structural_scores_on_rotated_factors():
    rng = np.random.default_rng(0)
    U = sample_sources("uniform", 2000, 3, rng)
    s = ident.structural_scores(2 * U @ random_orthogonal(3, rng) + 1, U)
    assert s["rigid_error"] < 1e-8 and s["linear_error"] < 1e-8
    assert s["mcc_ica"] > 0.99 and s["ica_perm_error"] < 0.02
    assert s["mcc"] < s["mcc_ica"]


def test_structural_scores_on_noise_are_poor():
    rng = np.random.default_rng(1)
    U = sample_sources("uniform", 1000, 3, rng)
    s = ident.structural_scores(rng.normal(size=U.shape), U)
    assert s["mcc_ica"] < 0.2 and s["rigid_error"] > 0.2


def test_statistical_errors_pairs_and_families():
    rng = np.random.default_rng(2)
    U = sample_sources("laplace", 500, 3, rng)
    codes = [U @ random_orthogonal(3, rng) for _ in range(3)]
    df = ident.statistical_errors(codes)
    assert len(df) == 3 * 4
    assert df[df.family == "rigid"].error.max() < 1e-8
    assert df[df.family == "permutation"].error.min() > 0.01
    with pytest.raises(ValueError, match="at least 2"):
        ident.statistical_errors(codes[:1])


def test_comparisons_share_evaluation_rows_and_give_row_differences():
    rng = np.random.default_rng(3)
    U = sample_sources("laplace", 400, 3, rng)
    codes = [U @ random_orthogonal(3, rng) + 0.01 * rng.normal(size=U.shape) for _ in range(3)]
    comps = ident.statistical_comparisons(codes, seed=1, ica_components="all")
    assert set(comps) == {(0, 1), (0, 2), (1, 2)}
    assert all(res.n_eval == 200 and res.ica_components == (3, 3) for res in comps.values())
    diff = ident.row_difference(comps, "permutation", "rigid")
    assert diff.shape == (200,) and diff.mean() > 0.01
    expected = np.mean([c.row_errors["permutation"] - c.row_errors["rigid"] for c in comps.values()], axis=0)
    np.testing.assert_allclose(diff, expected)
    table = ident.pairs_table(comps)
    assert len(table) == 3 * 4 and set(table.pair) == {"0->1", "0->2", "1->2"}
    with pytest.raises(ValueError, match="no seed pairs"):
        ident.row_difference({}, "permutation", "rigid")


def test_structural_scores_report_the_whitening_rule():
    rng = np.random.default_rng(4)
    U = sample_sources("uniform", 1000, 3, rng)
    Z = U @ random_orthogonal(3, rng)
    full = ident.structural_scores(Z, U)
    two = ident.structural_scores(Z, U, ica_components=2)
    assert full["ica_components"] == 3 and two["ica_components"] == 2
    assert two["ica_perm_error"] > full["ica_perm_error"] + 0.05  # a factor ICA never sees
