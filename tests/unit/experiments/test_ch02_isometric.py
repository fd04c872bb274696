"""Chapter 02's sweep on a tiny problem: shapes of its tables, determinism, bad input."""

import pytest

from nearid.experiments.ch02_isometric import run_isometric_sweep

TINY = dict(deltas=[0.0, 0.5], seeds=2, latent_dim=2, observed_dim=6, n_train=200, n_test=120,
            epochs=2, batch_size=64, lr=3e-3, weight_decay=1e-4, hidden=8, log=lambda _: None)


def test_sweep_tables_and_determinism():
    a = run_isometric_sweep(**TINY)
    assert len(a.models) == 4 and set(a.models.delta) == {0.0, 0.5}
    assert set(a.pairs.family) == {"permutation", "rigid", "linear", "ica"}
    assert len(a.pairs) == 2 * 4  # one seed pair per delta, four families
    b = run_isometric_sweep(**TINY)
    assert a.pairs.error.tolist() == b.pairs.error.tolist()


def test_arguments_are_keyword_only_and_need_two_seeds():
    with pytest.raises(TypeError):
        run_isometric_sweep([0.0], 2, 2, 6, 200, 120, 2, 64, 3e-3, 0.0, 8)
    with pytest.raises(ValueError, match="2 seeds"):
        run_isometric_sweep(**{**TINY, "seeds": 1})
