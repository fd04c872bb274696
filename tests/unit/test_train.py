import numpy as np
import pytest
import torch

from nearid.models import MLPAutoencoder, mlp
from nearid.train import Recipe, fit, predict


def _train(seed):
    torch.manual_seed(seed)
    X = np.random.default_rng(0).normal(size=(256, 8)).astype(np.float32)
    model = MLPAutoencoder(8, 3, hidden=(16,))
    res = fit(model, X, Recipe(epochs=5, batch_size=32, lr=1e-2), seed=seed)
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
        fit(model, np.zeros((8, 4)), Recipe(epochs=-1))
    with pytest.raises(ValueError, match="length"):
        fit(model, np.zeros((8, 4)), Recipe(epochs=1), y=np.zeros(3))


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
    full = fit(MLPAutoencoder(6, 2, hidden=(8,)), X, Recipe(epochs=3, batch_size=10))
    assert full.steps == 30
    short = fit(MLPAutoencoder(6, 2, hidden=(8,)), X, Recipe(epochs=3, batch_size=10), max_steps=2)
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


# ----------------------------------------------------------------- models trained as one group
def _mlp(seed):
    from nearid.models.autoencoder import MLPAutoencoder

    torch.manual_seed(seed)
    return MLPAutoencoder(30, 4, hidden=(32, 16), decoder_slope=0.2)


@pytest.mark.parametrize("products", ["MKL", "OpenBLAS"])
def test_a_model_trained_in_a_group_matches_the_model_trained_alone(monkeypatch, products):
    """Each model of fit_group follows the loss curve fit() gives it alone, to float32 accuracy.

    The group's products run in torch (MKL, batched) and the lone model's in MKL or OpenBLAS,
    so sums run in other orders: the curves agree to 1e-4 relative over 4 epochs (120 steps),
    the weights to 1e-3, not bit for bit."""
    from nearid.train import Recipe, fit, fit_group

    if products == "MKL":
        monkeypatch.setenv("NEARID_MKL_PRODUCTS", "1")
    X = torch.rand(900, 30)
    seeds = [3, 11, 42]
    alone = []
    for s in seeds:
        m = _mlp(s)
        alone.append((m, fit(m, X, Recipe(epochs=4, batch_size=32, lr=3e-3, weight_decay=1e-3), seed=s)))
    group = [_mlp(s) for s in seeds]
    results = fit_group(group, X, Recipe(epochs=4, batch_size=32, lr=3e-3, weight_decay=1e-3), seeds=seeds)
    for (m_alone, r_alone), m_group, r_group in zip(alone, group, results):
        assert r_group.steps == r_alone.steps == 4 * 29
        np.testing.assert_allclose(r_group.losses, r_alone.losses, rtol=1e-4)
        for a, b in zip(m_alone.parameters(), m_group.parameters()):
            torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4)
    # the seeds matter: different models, different curves
    assert not np.allclose(results[0].losses, results[1].losses)


def test_fit_group_checks_its_models():
    from nearid.models.conv import make_conv_model
    from nearid.train import Recipe, fit_group

    X = torch.rand(64, 30)
    with pytest.raises(ValueError, match="one architecture"):
        fit_group([_mlp(0), __import__("nearid.models.autoencoder", fromlist=["x"]).MLPAutoencoder(30, 5)],
                  X, Recipe(epochs=1), seeds=[0, 1])
    with pytest.raises(ValueError, match="2 models but 1 seeds"):
        fit_group([_mlp(0), _mlp(1)], X, Recipe(epochs=1), seeds=[0])
    with pytest.raises(TypeError, match="objective"):
        fit_group([make_conv_model("beta_vae", 4, 8, 4, 8)], torch.rand(8, 3, 8, 8), Recipe(epochs=1), seeds=[0])



@pytest.mark.skipif(not __import__("nearid.gemm").gemm.active(), reason="needs the OpenBLAS path")
def test_weights_stored_as_their_gradients_arrive_train_to_the_same_bits(monkeypatch):
    """fit() keeps routed Linear weights in the (in, out) order of their OpenBLAS gradient and
    steps contiguous views of them: every weight, bias and loss is what the usual layout gives,
    and the weights have their usual layout again afterwards."""

    X = np.random.default_rng(0).random((300, 784)).astype(np.float32)  # a partial last batch
    _train_moved_and_unmoved(monkeypatch, lambda: MLPAutoencoder(784, 8, hidden=(128, 64), decoder_slope=0.2), X,
                             Recipe(epochs=2, batch_size=64, lr=2e-3, weight_decay=0.01))


class _ConvNet(torch.nn.Module):
    """Convolutions that move (one whose last batch of one image stays in torch), one that does
    not, and a transposed one (never moved)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(4, 64, 3, padding=1), torch.nn.ReLU(),  # 64 x 2,304 multiply-adds: stays
            torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),  # moves; 1 x 36,864 x 16 does not route
            torch.nn.Conv2d(64, 256, 1, stride=2), torch.nn.ReLU(),  # moves; routes at any batch here
            torch.nn.ConvTranspose2d(256, 4, 2, stride=2))

    def loss(self, batch):
        loss = torch.nn.functional.mse_loss(self.body(batch), batch)
        return loss, {}


@pytest.mark.skipif(not __import__("nearid.gemm").gemm.active(), reason="needs the OpenBLAS path")
def test_conv_weights_stored_as_their_gradients_arrive_train_to_the_same_bits(monkeypatch):
    X = np.random.default_rng(1).random((129, 4, 4, 4)).astype(np.float32)  # a last batch of one image
    _train_moved_and_unmoved(monkeypatch, _ConvNet, X, Recipe(epochs=2, batch_size=64, lr=2e-3, weight_decay=0.01))


def _train_moved_and_unmoved(monkeypatch, make_model, X, recipe):
    """Train a model with and without WeightsAsGradients: the same losses and parameters to the
    bit, and the weights back in their usual layout afterwards."""
    from nearid import gemm

    class Unmoved(gemm.WeightsAsGradients):
        def __init__(self, model, rows):
            self.steps, self.moved = list(model.parameters()), []

    runs = []
    for moved in (True, False):
        if not moved:
            monkeypatch.setattr(gemm, "WeightsAsGradients", Unmoved)
        torch.manual_seed(0)
        model = make_model()
        if moved:
            assert gemm.WeightsAsGradients(make_model(), recipe.batch_size).moved, "nothing would move"
        res = fit(model, X, recipe, seed=1)
        runs.append((res.losses, [p.detach().clone() for p in model.parameters()]))
        assert all(p.is_contiguous() for p in model.parameters())
    (losses_a, params_a), (losses_b, params_b) = runs
    assert losses_a == losses_b
    assert all(torch.equal(a, b) for a, b in zip(params_a, params_b))


def test_weights_as_gradients_moves_only_routed_weights_and_puts_them_back():
    from nearid import gemm

    conv = _ConvNet()
    layout = gemm.WeightsAsGradients(conv, rows=64)
    assert [p.shape for p, _, _ in layout.moved] == [(64, 64, 3, 3), (256, 64, 1, 1)]
    assert conv.body[2].weight.permute(2, 3, 1, 0).is_contiguous()
    assert all(v.is_contiguous() for v in layout.params())
    layout.restore()
    assert all(p.is_contiguous() for p in conv.parameters())

    torch.manual_seed(0)
    model = torch.nn.Sequential(gemm.Linear(600, 400), torch.nn.ReLU(), gemm.Linear(400, 3),
                                torch.nn.Linear(3, 400))
    before = [p.detach().clone() for p in model.parameters()]
    layout = gemm.WeightsAsGradients(model, rows=8)  # 8 x 600 x 400 multiply-adds route; 8 x 400 x 3 do not
    views = layout.params()
    assert model[0].weight.stride() == (1, 400) and views[0].shape == (600, 400) and views[0].is_contiguous()
    assert views[1] is model[0].bias and views[2] is model[2].weight and views[4] is model[3].weight
    with gemm.portable_products("cpu", mode=False):
        model(torch.randn(8, 600)).sum().backward()
    layout.hand_over()
    assert model[0].weight.grad is None and views[0].grad.is_contiguous() and views[0].grad.shape == (600, 400)
    layout.restore()
    assert all(p.is_contiguous() and torch.equal(p, b) for p, b in zip(model.parameters(), before))
