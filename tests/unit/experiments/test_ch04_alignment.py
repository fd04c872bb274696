"""Model pairs for Table 1 on tiny inputs: shapes, pairing, determinism, table helpers."""

import numpy as np
import pandas as pd
import pytest
import torch

from nearid.experiments import ch04_alignment
from nearid.paper import TABLE1

torch.set_num_threads(1)
TEXT = ("Now is the winter of our discontent made glorious summer by this sun of York.\n" * 60)


@pytest.fixture(scope="module")
def images():
    g = torch.Generator().manual_seed(0)
    Xtr = torch.rand(48, 1, 28, 28, generator=g).numpy()
    ytr = np.arange(48) % 10
    Xev = torch.rand(12, 1, 28, 28, generator=g).numpy()
    return Xtr, ytr, Xev, np.arange(12) % 10


def test_pair_rows_must_match():
    with pytest.raises(ValueError, match="different inputs"):
        ch04_alignment.Pair("x", np.zeros((3, 2)), np.zeros((4, 2)))


def test_mae_pair(images):
    Xtr, _, Xev, _ = images
    p = ch04_alignment.mae_pair(Xtr, Xev, embed_dim=8, depth=1, num_heads=2, epochs=1, batch_size=16)
    assert p.A.shape == p.B.shape == (12, 8)
    assert set(p.info) == {"timm", "original"} and p.info["original"]["seed"] == 1
    q = ch04_alignment.mae_pair(Xtr, Xev, embed_dim=8, depth=1, num_heads=2, epochs=1, batch_size=16)
    np.testing.assert_array_equal(p.A, q.A)  # deterministic for a seed
    assert not np.allclose(p.A, p.B)


def test_classifier_pairs(images):
    p = ch04_alignment.chexpert_pair(*images, feature_dim=8, epochs=1, batch_size=16)
    assert p.A.shape == p.B.shape == (12, 8)
    assert p.info["base"]["parameters"] > p.info["small"]["parameters"]
    assert 0 <= p.info["small"]["test_accuracy"] <= 1
    r = ch04_alignment.resnet18_pair(*images, epochs=1, batch_size=16)
    assert r.A.shape == r.B.shape == (12, 512)
    assert set(r.info) == {"seed0", "seed1"}


def test_pythia_pair_trained_and_pretrained(tmp_path):
    kw = dict(hidden=16, layers=2, heads=2, context=8, train_windows=16, epochs=1, eval_windows=20)
    p = ch04_alignment.pythia_pair(TEXT, **kw)
    assert p.A.shape == p.B.shape == (20, 16) and p.info["source"] == "trained"
    assert not np.allclose(p.A, p.B)  # different seeds

    from test_language import _word_tokenizer
    from transformers import GPTNeoXForCausalLM

    from nearid.models.language import tiny_gpt_neox_config

    folders = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        cfg = tiny_gpt_neox_config(vocab_size=6, hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, max_position_embeddings=64)
        GPTNeoXForCausalLM(cfg).save_pretrained(tmp_path / f"s{seed}")
        _word_tokenizer().save_pretrained(tmp_path / f"s{seed}")
        folders.append(str(tmp_path / f"s{seed}"))
    q = ch04_alignment.pythia_pair("to be or not to be " * 40, context=8, eval_windows=2,
                               pretrained=folders)
    assert q.A.shape == (2, 16) and q.info["source"] == "pretrained"
    with pytest.raises(ValueError, match="exactly two"):
        ch04_alignment.pythia_pair(TEXT, pretrained=folders[:1])


def test_table_helpers():
    rng = np.random.default_rng(0)
    A = rng.laplace(size=(300, 3))
    pairs = {"mae": ch04_alignment.Pair("mae", A, A @ rng.normal(size=(3, 3)) + 0.05 * rng.normal(size=(300, 3)))}
    t = ch04_alignment.table1(pairs, seed=0)
    assert list(t.index) == ["mae"] and t.loc["mae", "n_fit"] == 150
    assert t.loc["mae", "dim_a"] == 3
    long = ch04_alignment.beside_paper(t)
    assert set(long.source) == {"ours", "paper"} and len(long) == 8
    assert long[(long.source == "paper") & (long.family == "ica")].error.item() == TABLE1["mae"]["ica"]
    for row in TABLE1.values():
        assert ch04_alignment.ordering_holds(row)  # the paper's rows all satisfy it
    assert not ch04_alignment.ordering_holds({"permutation": 0.1, "ica": 0.2, "rigid": 0.05, "linear": 0.0})
    assert ch04_alignment.ordering_holds(pd.Series({"permutation": 0.3, "ica": 0.2, "rigid": 0.2, "linear": 0.1}))


def test_build_pairs_rejects_unknown():
    with pytest.raises(ValueError, match="unknown pairs"):
        ch04_alignment.build_pairs({"pairs": ["gpt4"], "seed": 0})
