"""Known answers for the per-sample bi-Lipschitz estimator."""

import numpy as np
import pytest
import torch
from torch import nn

from nearid.lipschitz import (bilipschitz_from_singular_values, decoder_jacobian,
                              estimate_bilipschitz, jacobian_singular_values)


def _linear(W: np.ndarray) -> nn.Linear:
    layer = nn.Linear(W.shape[1], W.shape[0], bias=True)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(W, dtype=torch.float32))
        layer.bias.normal_()
    return layer


def test_jacobian_of_linear_map_is_its_matrix():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(7, 3))
    Z = rng.normal(size=(5, 3))
    J = decoder_jacobian(_linear(W), Z, batch_size=2).numpy()
    assert J.shape == (5, 7, 3)
    np.testing.assert_allclose(J, np.broadcast_to(W, J.shape), atol=1e-5)


def test_reverse_mode_when_output_is_narrow():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(2, 6))  # out 2 < in 6: jacrev path
    J = decoder_jacobian(_linear(W), rng.normal(size=(4, 6))).numpy()
    np.testing.assert_allclose(J[0], W, atol=1e-5)


def test_isometry_gives_one():
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.normal(size=(20, 4)))  # orthonormal columns: an isometric embedding
    Z = rng.normal(size=(50, 4))
    for norm in ("condition", "geometric"):
        est = estimate_bilipschitz(_linear(3.0 * Q), Z, normalisation=norm)  # scale is arbitrary
        np.testing.assert_allclose(est.B, 1.0, atol=1e-5)
        assert est.L_max < 1e-5


def test_linear_map_gives_condition_number():
    rng = np.random.default_rng(3)
    U, _ = np.linalg.qr(rng.normal(size=(10, 3)))
    V, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    s = np.array([4.0, 1.0, 0.5])
    W = U @ np.diag(s) @ V.T
    Z = rng.normal(size=(30, 3))
    est = estimate_bilipschitz(_linear(W), Z)
    np.testing.assert_allclose(est.B, 8.0, rtol=1e-4)  # condition number 4 / 0.5
    assert est.L_mean == pytest.approx(7.0, rel=1e-4)
    # geometric mean of (4, 1, 0.5) is 2**(1/3); B = max(4 / c, c / 0.5)
    geo = estimate_bilipschitz(_linear(W), Z, normalisation="geometric")
    c = 2.0 ** (1 / 3)
    assert geo.scale == pytest.approx(c, rel=1e-4)
    np.testing.assert_allclose(geo.B, max(4 / c, c / 0.5), rtol=1e-4)


def test_leaky_relu_layer_gives_known_ratio():
    alpha = 0.25
    layer = nn.LeakyReLU(alpha)
    Z = np.array([[1.0, -2.0, 3.0],     # mixed signs: J = diag(1, alpha, 1) -> ratio 1/alpha
                  [0.5, 0.2, 0.1],      # all positive: identity -> 1
                  [-1.0, -0.3, -2.0]])  # all negative: alpha * I -> 1 (pure scale)
    est = estimate_bilipschitz(layer, Z)
    np.testing.assert_allclose(est.B, [1 / alpha, 1.0, 1.0], rtol=1e-5)
    S = jacobian_singular_values(layer, Z)
    np.testing.assert_allclose(S[2], [alpha] * 3, rtol=1e-5)
    # geometric normalisation also sees the scale change between the last two samples
    geo = estimate_bilipschitz(layer, Z, normalisation="geometric")
    c = float(np.exp(np.log(S).mean()))
    np.testing.assert_allclose(geo.B[1], 1 / c, rtol=1e-5)
    np.testing.assert_allclose(geo.B[2], c / alpha, rtol=1e-5)


def test_collapsed_direction_is_infinite():
    B, _ = bilipschitz_from_singular_values(np.array([[2.0, 0.0], [1.0, 1.0]]))
    assert np.isinf(B[0]) and B[1] == 1.0


@pytest.mark.parametrize("bad", [np.zeros(3), np.full((2, 2), np.nan)])
def test_bad_codes_raise(bad):
    with pytest.raises(ValueError):
        estimate_bilipschitz(nn.Identity(), bad)


def test_bad_normalisation_raises():
    with pytest.raises(ValueError, match="valid: condition, geometric"):
        bilipschitz_from_singular_values(np.ones((2, 2)), "spectral")
