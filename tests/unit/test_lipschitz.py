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


def test_isometry_gives_zero():
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.normal(size=(20, 4)))  # orthonormal columns: an isometric embedding
    Z = rng.normal(size=(50, 4))
    for norm in ("model", "local"):
        est = estimate_bilipschitz(_linear(3.0 * Q), Z, normalisation=norm)  # the scale is free
        np.testing.assert_allclose(est.B, 1.0, atol=1e-5)
        assert est.L_max < 1e-5 and est.L_mean < 1e-5
    assert estimate_bilipschitz(_linear(3.0 * Q), Z).scale == pytest.approx(3.0, rel=1e-5)


def test_linear_map_gives_its_exact_symmetric_constant():
    rng = np.random.default_rng(3)
    U, _ = np.linalg.qr(rng.normal(size=(10, 3)))
    V, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    s = np.array([4.0, 1.0, 0.5])
    W = U @ np.diag(s) @ V.T
    Z = rng.normal(size=(30, 3))
    # at scale c = sqrt(4 * 0.5) = sqrt(2), W stretches by at most 4/c = sqrt(8) and shrinks
    # by at most c/0.5 = sqrt(8): 1 + L = sqrt(8), and no other scale does better
    for norm in ("model", "local"):
        est = estimate_bilipschitz(_linear(W), Z, normalisation=norm)
        np.testing.assert_allclose(est.B, np.sqrt(8.0), rtol=1e-4)
        assert est.L_mean == pytest.approx(np.sqrt(8.0) - 1, rel=1e-4)
    assert estimate_bilipschitz(_linear(W), Z).scale == pytest.approx(np.sqrt(2.0), rel=1e-4)


def test_symmetric_constant_bounds_every_pair_of_points():
    """The estimate is a real bi-Lipschitz constant of a linear map: every pair of points
    obeys the definition at the returned scale, and a pair along the singular vectors is tight."""
    rng = np.random.default_rng(4)
    W = rng.normal(size=(12, 4))
    Z = rng.normal(size=(200, 4))
    est = estimate_bilipschitz(_linear(W), Z)
    i, j = rng.integers(0, 200, size=(2, 500))
    i, j = i[i != j], j[i != j]
    ratio = np.linalg.norm((Z[i] - Z[j]) @ W.T, axis=1) / np.linalg.norm(Z[i] - Z[j], axis=1) / est.scale
    bound = 1 + est.L_max
    assert (ratio <= bound * (1 + 1e-4)).all() and (ratio >= (1 - 1e-4) / bound).all()
    s = np.linalg.svd(W, compute_uv=False)
    assert s[0] / est.scale == pytest.approx(bound, rel=1e-4)
    assert est.scale / s[-1] == pytest.approx(bound, rel=1e-4)


def test_leaky_relu_layer_gives_known_constant():
    alpha = 0.25
    layer = nn.LeakyReLU(alpha)
    Z = np.array([[1.0, -2.0, 3.0],     # mixed signs: J = diag(1, alpha, 1)
                  [0.5, 0.2, 0.1],      # all positive: J = I
                  [-1.0, -0.3, -2.0]])  # all negative: J = alpha * I
    S = jacobian_singular_values(layer, Z)
    np.testing.assert_allclose(S[2], [alpha] * 3, rtol=1e-5)
    # one scale for the whole map: c = sqrt(1 * alpha), and every sample needs 1/sqrt(alpha);
    # this is the exact constant of LeakyReLU_alpha, which stretches by 1 and shrinks by alpha
    est = estimate_bilipschitz(layer, Z)
    assert est.scale == pytest.approx(np.sqrt(alpha), rel=1e-5)
    np.testing.assert_allclose(est.B, 1 / np.sqrt(alpha), rtol=1e-5)
    # each sample on its own: only the mixed-sign one is distorted; pure scales are isometries
    local = estimate_bilipschitz(layer, Z, normalisation="local")
    np.testing.assert_allclose(local.B, [1 / np.sqrt(alpha), 1.0, 1.0], rtol=1e-5)
    # on positive inputs only, the layer is the identity
    assert estimate_bilipschitz(layer, np.abs(Z) + 0.1).L_max == pytest.approx(0.0, abs=1e-6)


def test_local_never_exceeds_model():
    rng = np.random.default_rng(5)
    S = np.sort(rng.uniform(0.1, 5.0, size=(40, 3)), axis=1)[:, ::-1]
    B_model, c = bilipschitz_from_singular_values(S, "model")
    B_local, _ = bilipschitz_from_singular_values(S, "local")
    assert (B_local <= B_model + 1e-12).all() and (B_local >= 1).all()
    assert B_model.max() == pytest.approx(np.sqrt(S.max() / S.min()))
    assert c == pytest.approx(np.sqrt(S.max() * S.min()))


def test_collapsed_direction_is_infinite():
    B, c = bilipschitz_from_singular_values(np.array([[2.0, 0.0], [1.0, 1.0], [4.0, 1.0]]))
    assert np.isinf(B[0])
    assert c == pytest.approx(np.sqrt(4.0 * 1.0))  # rows with a collapsed direction do not set the scale
    np.testing.assert_allclose(B[1:], [2.0, 2.0])
    B, c = bilipschitz_from_singular_values(np.zeros((2, 2)))
    assert np.isinf(B).all() and np.isnan(c)


@pytest.mark.parametrize("bad", [np.zeros(3), np.full((2, 2), np.nan)])
def test_bad_codes_raise(bad):
    with pytest.raises(ValueError):
        estimate_bilipschitz(nn.Identity(), bad)


def test_bad_normalisation_raises():
    with pytest.raises(ValueError, match="valid: model, local"):
        bilipschitz_from_singular_values(np.ones((2, 2)), "spectral")
