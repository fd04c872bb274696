"""Image classifiers: shapes, widths, learning, ResNet-18 stem adaptation."""

import numpy as np
import pytest
import torch

from nearid.models.classifiers import ImageClassifier, ResNet18Classifier
from nearid.train import Recipe, fit, predict

torch.set_num_threads(1)


def _toy(n=64, seed=0):
    """Two classes that differ by a bright bar: learnable in a few steps."""
    g = torch.Generator().manual_seed(seed)
    X = 0.1 * torch.rand(n, 1, 28, 28, generator=g)
    y = torch.arange(n) % 2
    X[y == 1, :, 12:16, :] += 1.0
    return X, y


@pytest.mark.parametrize("arch", ["cnn", "mlp"])
def test_widths_share_feature_dim_and_differ_in_size(arch):
    small = ImageClassifier("small", arch=arch, feature_dim=24)
    base = ImageClassifier("base", arch=arch, feature_dim=24)
    x = torch.rand(3, 1, 28, 28)
    assert small.features(x).shape == base.features(x).shape == (3, 24)
    assert small(x).shape == (3, 10)
    n_small = sum(p.numel() for p in small.parameters())
    n_base = sum(p.numel() for p in base.parameters())
    assert n_base > 1.5 * n_small
    assert (small.features(x) >= 0).all()  # ReLU features


def test_multichannel_and_2d_input():
    m = ImageClassifier("small", in_chans=3, img_size=32, feature_dim=8)
    assert m.features(torch.rand(2, 3, 32, 32)).shape == (2, 8)
    one = ImageClassifier("small", feature_dim=8)
    assert one.features(torch.rand(2, 28, 28)).shape == (2, 8)
    with pytest.raises(ValueError, match="expected images"):
        one.features(torch.rand(2, 3, 28, 28))


@pytest.mark.parametrize("model", [lambda: ImageClassifier("small", feature_dim=16),
                                   lambda: ResNet18Classifier()])
def test_learns_toy_task(model):
    torch.manual_seed(0)
    m = model()
    X, y = _toy()
    res = fit(m, X, Recipe(epochs=10, batch_size=16, lr=2e-3), y=y, seed=0)  # BN running stats need ~40 steps
    assert res.losses[-1] < res.losses[0]
    with torch.no_grad():
        acc = (m(X).argmax(1) == y).float().mean().item()
    assert acc > 0.9


def test_resnet_features_enter_fc():
    torch.manual_seed(0)
    m = ResNet18Classifier().eval()
    x = torch.rand(4, 1, 28, 28)
    f = m.features(x)
    assert f.shape == (4, 512)
    torch.testing.assert_close(m.head(f), m(x))
    assert m.net.conv1.in_channels == 1 and m.net.conv1.kernel_size == (3, 3)
    assert m.head.out_features == 10
    Z = predict(m.features, x)
    assert Z.shape == (4, 512)
    assert ResNet18Classifier(stem_stride=1).features(x).shape == (4, 512)


def test_seeds_give_different_nets():
    torch.manual_seed(0)
    a = ResNet18Classifier()
    torch.manual_seed(1)
    b = ResNet18Classifier()
    assert not torch.equal(a.net.conv1.weight, b.net.conv1.weight)


def test_loss_needs_labels():
    with pytest.raises(ValueError, match="images, labels"):
        ImageClassifier().loss(torch.rand(2, 1, 28, 28))


@pytest.mark.parametrize("kwargs", [dict(width="large"), dict(arch="vit"), dict(feature_dim=0)])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        ImageClassifier(**kwargs)
    with pytest.raises(ValueError):
        ResNet18Classifier(stem_stride=3)


def test_accuracy_logged():
    X, y = _toy(8)
    _, logs = ImageClassifier(feature_dim=4).loss((X, y))
    assert 0.0 <= logs["accuracy"] <= 1.0 and np.isfinite(logs["ce"])
