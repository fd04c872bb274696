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
