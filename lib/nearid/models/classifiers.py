"""Supervised image classifiers whose penultimate features Table 1 compares.

* :class:`ImageClassifier` -- a small CNN (or MLP) in two widths, ``"small"`` and ``"base"``,
  our analogue of the paper's CheXpert small/base pair: same recipe, different capacity.
  Both widths end in a feature layer of the same size ``feature_dim``, so the two
  representations live in spaces of equal dimension and every alignment family applies
  without padding.
* :class:`ResNet18Classifier` -- torchvision's ``resnet18(weights=None)`` with its stem
  adapted to single-channel 28x28 inputs; its representation is the 512-d vector that
  enters ``fc``, as in the paper's "ResNet-18-fc" row.

All expose ``loss(batch) -> (loss, logs)`` for :func:`nearid.train.fit` with
``batch = (images, labels)``, ``features(x)`` for the representation, and ``forward(x)``
for logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nearid.constraints import POSITIVE_INT, Options, validate_params

WIDTHS = {"small": 1, "base": 2}  # channel multiplier of "base" relative to "small"
ARCHS = ("cnn", "mlp")


def _images(x: torch.Tensor, in_chans: int) -> torch.Tensor:
    x = x.float()
    if x.ndim == 3 and in_chans == 1:
        x = x[:, None]
    if x.ndim != 4 or x.shape[1] != in_chans:
        raise ValueError(f"expected images of shape (N, {in_chans}, H, W), got {tuple(x.shape)}")
    return x


def _split(batch):
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError("a classifier's batch is (images, labels); train with fit(..., y=labels)")
    return batch[0], batch[1].long()


class _Classifier(nn.Module):
    in_chans = 1

    def features(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    def loss(self, batch):
        x, y = _split(batch)
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        return loss, {"ce": float(loss.detach()), "accuracy": float(acc)}


class ImageClassifier(_Classifier):
    """CNN (two conv blocks + a feature layer) or MLP, in width ``"small"`` or ``"base"``.

    ``cnn``: conv(c)-ReLU-pool, conv(2c)-ReLU-pool, flatten, linear -> ``feature_dim``,
    ReLU, linear -> classes, with c = ``channels`` x the width multiplier.
    ``mlp``: hidden layers of ``hidden`` x multiplier units, then ``feature_dim``.
    The representation is the ReLU output of the feature layer (the penultimate layer).
    """

    @validate_params(width=Options(WIDTHS, noun="width"), arch=Options(ARCHS, noun="arch"),
                     img_size=POSITIVE_INT, in_chans=POSITIVE_INT, n_classes=POSITIVE_INT,
                     feature_dim=POSITIVE_INT, channels=POSITIVE_INT, hidden=POSITIVE_INT)
    def __init__(self, width: str = "small", arch: str = "cnn", img_size: int = 28,
                 in_chans: int = 1, n_classes: int = 10, feature_dim: int = 64,
                 channels: int = 16, hidden: int = 128):
        super().__init__()
        k = WIDTHS[width]
        self.width, self.arch, self.in_chans, self.feature_dim = width, arch, in_chans, feature_dim
        if arch == "cnn":
            c = channels * k
            side = img_size // 4
            self.body = nn.Sequential(
                nn.Conv2d(in_chans, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(2 * c * side * side, feature_dim), nn.ReLU())
        else:
            h = hidden * k
            self.body = nn.Sequential(
                nn.Flatten(), nn.Linear(in_chans * img_size * img_size, h), nn.ReLU(),
                nn.Linear(h, h), nn.ReLU(), nn.Linear(h, feature_dim), nn.ReLU())
        self.head = nn.Linear(feature_dim, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(_images(x, self.in_chans))


class ResNet18Classifier(_Classifier):
    """torchvision ResNet-18 (random init) for small single-channel images.

    The 7x7 stride-2 RGB stem becomes a 3x3 convolution on ``in_chans`` channels with
    stride ``stem_stride``; the max-pool stays. ``stem_stride=2`` (quick) maps 28x28 to 7x7
    before ``layer1`` and keeps CPU training cheap; ``stem_stride=1`` keeps more resolution.
    """

    @validate_params(stem_stride=Options((1, 2)))
    def __init__(self, in_chans: int = 1, n_classes: int = 10, stem_stride: int = 2):
        super().__init__()
        from torchvision.models import resnet18

        self.in_chans = in_chans
        net = resnet18(weights=None, num_classes=n_classes)
        net.conv1 = nn.Conv2d(in_chans, 64, kernel_size=3, stride=stem_stride, padding=1, bias=False)
        self.head = net.fc
        net.fc = nn.Identity()
        self.net = net
        self.feature_dim = self.head.in_features  # 512

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The 512-d average-pooled vector that enters ``fc``."""
        return self.net(_images(x, self.in_chans))
