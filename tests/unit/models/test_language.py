"""Tiny GPT-NeoX language models: tokenisation, training, representations, local loading."""

import numpy as np
import pytest
import torch

from nearid.models.language import (ByteTokenizer, TinyLM, embed_texts, embed_windows,
                                    eval_windows, load_pretrained, mean_hidden_state,
                                    middle_layer, split_text, tiny_gpt_neox_config,
                                    train_windows)
from nearid.train import Recipe, fit

torch.set_num_threads(1)
TINY = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64)


def test_byte_tokenizer_roundtrip():
    tok = ByteTokenizer()
    text = "To be, or not to be: that is the question. — café"
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and ids.max() < 256
    assert len(ids) == len(text.encode("utf-8"))
    assert tok.decode(ids) == text


def test_windows():
    ids = np.arange(100)
    w = train_windows(ids, context=8, n=5, seed=0)
    assert w.shape == (5, 9)
    assert (np.diff(w, axis=1) == 1).all()  # contiguous
    np.testing.assert_array_equal(w, train_windows(ids, 8, 5, seed=0))
    e = eval_windows(ids, context=10, n=3)
    np.testing.assert_array_equal(e[1], np.arange(10, 20))
    with pytest.raises(ValueError):
        eval_windows(ids, context=10, n=11)
    with pytest.raises(ValueError):
        train_windows(np.arange(5), context=8, n=1)
    a, b = split_text("abcdefghij", 0.2)
    assert a == "abcdefgh" and b == "ij"


def test_seeds_and_determinism():
    a, b, c = TinyLM(seed=0, **TINY), TinyLM(seed=0, **TINY), TinyLM(seed=1, **TINY)
    ids = torch.randint(0, 256, (3, 12), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(a.embed(ids), b.embed(ids))
    assert not torch.allclose(a.embed(ids), c.embed(ids))
    assert a.embed(ids).shape == (3, 16)
    assert middle_layer(a.model) == 1


def test_training_lowers_loss_on_text():
    text = "to be or not to be that is the question " * 40
    ids = ByteTokenizer().encode(text)
    X = train_windows(ids, context=16, n=64, seed=0)
    m = TinyLM(seed=0, **TINY)
    res = fit(m, X, Recipe(epochs=8, batch_size=16, lr=3e-3), seed=0)
    assert res.losses[0] > np.log(256) - 1.0  # starts near uniform over bytes
    assert res.losses[-1] < 0.6 * res.losses[0]
    Z = embed_windows(m, eval_windows(ids, 16, 10))
    assert Z.shape == (10, 16) and np.isfinite(Z).all()


def test_mean_hidden_state_layers_and_mask():
    m = TinyLM(seed=0, **TINY).model
    ids = torch.randint(0, 256, (2, 6), generator=torch.Generator().manual_seed(0))
    h0 = mean_hidden_state(m, ids, layer=0)
    emb = m.gpt_neox.embed_in(ids).mean(1)  # layer 0 = token embeddings
    torch.testing.assert_close(h0, emb)
    # padding at the end, masked out, must not change a causal model's mean state
    padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 6), torch.zeros(2, 3)], dim=1).long()
    torch.testing.assert_close(mean_hidden_state(m, padded, mask), mean_hidden_state(m, ids),
                               atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="layer"):
        mean_hidden_state(m, ids, layer=5)


def _word_tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<|endoftext|>", "[UNK]", "to", "be", "or", "not"])}
    core = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|endoftext|>",
                                   unk_token="[UNK]")


def test_load_pretrained_roundtrip(tmp_path):
    """A random tiny GPT-NeoX saved with save_pretrained loads back with the same states."""
    from transformers import GPTNeoXForCausalLM

    torch.manual_seed(0)
    cfg = tiny_gpt_neox_config(vocab_size=6, **TINY)
    original = GPTNeoXForCausalLM(cfg).eval()
    original.save_pretrained(tmp_path / "ckpt")
    model, tok = load_pretrained(tmp_path / "ckpt")
    assert tok is None
    ids = np.array([[2, 3, 4, 5, 2, 3]])
    np.testing.assert_allclose(embed_windows(model, ids), embed_windows(original, ids), atol=1e-6)

    _word_tokenizer().save_pretrained(tmp_path / "ckpt")
    model, tok = load_pretrained(tmp_path / "ckpt")
    assert tok is not None
    Z = embed_texts(model, tok, ["to be", "or not to be"], max_length=8)
    assert Z.shape == (2, 16)
    # padding-aware: the short text's embedding equals its unpadded one
    np.testing.assert_allclose(Z[0], embed_windows(original, np.array([[2, 3]]))[0], atol=1e-5)


def test_load_pretrained_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(tmp_path / "nothing")


def test_bad_config():
    with pytest.raises(ValueError, match="divisible"):
        tiny_gpt_neox_config(hidden_size=10, num_attention_heads=4)


def test_embed_windows_by_layer_covers_every_layer_and_matches_the_middle_one():
    from nearid.models.language import embed_windows_by_layer

    m = TinyLM(seed=0, **TINY)
    windows = np.random.default_rng(0).integers(0, 256, size=(70, 12))
    by_layer = embed_windows_by_layer(m, windows, batch_size=32)
    assert list(by_layer) == ["layer 0", "layer 1", "layer 2"]  # embeddings + 2 blocks
    assert all(v.shape == (70, 16) for v in by_layer.values())
    np.testing.assert_allclose(by_layer["layer 1"], embed_windows(m, windows, layer=1, batch_size=32), atol=1e-6)
