import numpy as np
import pytest
import torch

from nearid.models import MLPAutoencoder, mlp
from nearid.train import fit, predict


def _train(seed):
    torch.manual_seed(seed)
    X = np.random.default_rng(0).normal(size=(256, 8)).astype(np.float32)
    model = MLPAutoencoder(8, 3, hidden=(16,))
    res = fit(model, X, epochs=5, batch_size=32, lr=1e-2, seed=seed)
    return model, res, X


def test_training_is_deterministic_and_learns():
    m1, r1, X = _train(0)
    m2, r2, _ = _train(0)
    assert r1.losses == r2.losses
    np.testing.assert_array_equal(predict(m1.encode, X), predict(m2.encode, X))
    assert r1.losses[-1] < r1.losses[0]
    _, r3, _ = _train(1)
    assert r3.losses != r1.losses


def test_fit_validates_arguments():
    model = MLPAutoencoder(4, 2)
    with pytest.raises(ValueError, match="epochs"):
        fit(model, np.zeros((8, 4)), epochs=-1)
    with pytest.raises(ValueError, match="length"):
        fit(model, np.zeros((8, 4)), y=np.zeros(3), epochs=1)


def test_mlp_slopes_and_shapes():
    net = mlp([4, 8, 2], negative_slope=0.3)
    assert isinstance(net[1], torch.nn.LeakyReLU) and net[1].negative_slope == 0.3
    assert isinstance(mlp([4, 8, 2])[1], torch.nn.ReLU)
    with pytest.raises(ValueError):
        mlp([4])
    ae = MLPAutoencoder(6, 2, hidden=(5, 4), decoder_slope=0.1)
    assert ae(torch.zeros(3, 6)).shape == (3, 6) and ae.encode(torch.zeros(3, 6)).shape == (3, 2)


def test_max_steps_stops_early_and_counts_steps():
    X = torch.randn(100, 6)
    full = fit(MLPAutoencoder(6, 2, hidden=(8,)), X, epochs=3, batch_size=10)
    assert full.steps == 30
    short = fit(MLPAutoencoder(6, 2, hidden=(8,)), X, epochs=3, batch_size=10, max_steps=2)
    assert short.steps == 2 and len(short.losses) == 1


def test_resolve_device():
    from nearid.train import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="'device' got 'tpu'; allowed: 'auto', 'cpu', 'cuda'"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            resolve_device("cuda")
