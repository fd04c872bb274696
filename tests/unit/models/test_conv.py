import math

import numpy as np
import pytest
import torch

from nearid.models.conv import (CONV_MODELS, ConvBetaTCVAE, ConvBioAE, make_conv_model)
from nearid.train import Recipe, fit, predict


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.mark.parametrize("name", CONV_MODELS)
@pytest.mark.parametrize("size", [16, 32])
def test_shapes_and_deterministic_encode(name, size):
    torch.manual_seed(0)
    m = make_conv_model(name, 6, image_size=size, width=8, hidden=32).eval()
    x = torch.rand(5, 3, size, size)
    z = m.encode(x)
    assert z.shape == (5, 6)
    assert torch.equal(z, m.encode(x))  # posterior mean, no sampling
    assert m.decode(z).shape == (5, 3, size, size)
    loss, logs = m.loss(x)
    assert loss.ndim == 0 and torch.isfinite(loss) and "recon" in logs


@pytest.mark.parametrize("name", CONV_MODELS)
def test_fit_lowers_the_loss_and_is_seeded(name):
    X = torch.rand(64, 3, 16, 16).round()  # binary pixels: a learnable constant mean at least
    outs = []
    for _ in range(2):
        torch.manual_seed(1)
        m = make_conv_model(name, 4, image_size=16, width=8, hidden=32)
        res = fit(m, X, Recipe(epochs=4, batch_size=16, lr=3e-3), seed=1)
        outs.append(predict(m.encode, X))
    assert res.losses[-1] < res.losses[0]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_bioae_penalties():
    m = ConvBioAE(2, image_size=16, width=8, hidden=32, nonneg_weight=2.0, activity_weight=0.5)
    z = torch.tensor([[-1.0, 2.0], [0.0, -3.0]])
    pen, logs = m.penalty(z)
    assert logs["nonneg"] == pytest.approx(1.0)  # mean relu(-z) = (1 + 3) / 4
    assert logs["activity"] == pytest.approx(14 / 4)
    assert float(pen) == pytest.approx(2.0 * 1.0 + 0.5 * 3.5)


def test_tcvae_total_correlation_mws():
    """Minibatch-weighted sampling with sharp posteriors (known answer): on a 10 x 10 product
    grid each z_d matches 10 of the M=100 means, z matches 1, so TC = log(NM) - 2 log 10 +
    log 1; with z1 == z2 (10 distinct codes, each 10 times) the joint matches 10: + log 10."""
    m = ConvBetaTCVAE(2, image_size=16, width=8, hidden=32, dataset_size=100)
    g = torch.linspace(-2, 2, 10)
    mu = torch.cartesian_prod(g, g)
    logvar = torch.full_like(mu, math.log(0.01))
    tc_indep = float(m.total_correlation(mu, mu, logvar))
    mu_corr = torch.stack([g.repeat(10), g.repeat(10)], 1)  # z1 == z2: fully dependent
    tc_corr = float(m.total_correlation(mu_corr, mu_corr, logvar))
    offset = math.log(100 * 100)
    assert tc_indep == pytest.approx(offset - 2 * math.log(10), abs=1e-3)
    assert tc_corr == pytest.approx(offset - math.log(10), abs=1e-3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown model"):
        make_conv_model("vae", 4)
    with pytest.raises(ValueError, match="power of two"):
        make_conv_model("ae", 4, image_size=24)
    with pytest.raises(TypeError):
        make_conv_model("ae", 4, beta=2.0)
    m = make_conv_model("ae", 4, image_size=16, width=8, hidden=32)
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        m.loss(torch.rand(2, 16, 16))
