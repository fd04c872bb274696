"""Fully connected autoencoders (chapters 02 and 03)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from nearid import gemm
from nearid.constraints import POSITIVE_INT, validate_params


def mlp(sizes: Sequence[int], negative_slope: float = 0.0, final_activation: bool = False) -> nn.Sequential:
    """Linear layers with leaky-ReLU between them (slope 0 = plain ReLU, 1 = linear); the layers
    are :class:`nearid.gemm.Linear`, which take the portable OpenBLAS path on their own."""
    if len(sizes) < 2:
        raise ValueError(f"an MLP needs at least input and output sizes, got {list(sizes)}")
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(gemm.Linear(a, b))
        if i < len(sizes) - 2 or final_activation:
            layers.append(nn.LeakyReLU(negative_slope) if negative_slope > 0 else nn.ReLU())
    return nn.Sequential(*layers)


class MLPAutoencoder(nn.Module):
    """x -> z -> x_hat, trained by mean squared reconstruction error.

    ``decoder_slope`` is the decoder's leaky-ReLU negative slope alpha (chapter 03's knob);
    the encoder uses ``encoder_slope``.
    """

    # every product of forward and loss is one of mlp()'s gemm.Linear layers: training needs no
    # products mode (nearid.gemm.portable_products(mode=False))
    products_in_modules = True

    @validate_params(in_dim=POSITIVE_INT, latent_dim=POSITIVE_INT)
    def __init__(self, in_dim: int, latent_dim: int, hidden: Sequence[int] = (64, 64),
                 encoder_slope: float = 0.0, decoder_slope: float = 0.0):
        super().__init__()
        hidden = list(hidden)
        self.in_dim, self.latent_dim = in_dim, latent_dim
        self.encoder = mlp([in_dim, *hidden, latent_dim], encoder_slope)
        self.decoder = mlp([latent_dim, *hidden[::-1], in_dim], decoder_slope)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x.flatten(1))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    def objective(self, batch) -> torch.Tensor:
        """The mean squared reconstruction error (what :func:`nearid.train.fit_group` batches)."""
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        x = x.flatten(1)
        return F.mse_loss(self(x), x)

    def loss(self, batch):
        loss = self.objective(batch)
        return loss, {"mse": float(loss.detach())}
