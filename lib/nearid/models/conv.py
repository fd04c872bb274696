"""One convolutional encoder/decoder family for the disentanglement benchmark (chapter 05).

Every model shares the same encoder and decoder (stride-2 4x4 convolutions down to a 4x4
map, a linear layer to the code, and the mirror image back) so that Table 2 compares
*objectives*, not architectures. Images are float tensors in [0, 1] of shape (N, 3, H, W)
with H = W a power of two >= 8; reconstruction is Bernoulli (binary cross-entropy with
logits, summed over pixels, averaged over the batch), as in Hsu et al. (2023).

Models (``make_conv_model(name, ...)``):

* ``ae`` -- plain autoencoder; only weight decay (AdamW, in :func:`nearid.train.fit`) regularises it.
* ``beta_vae`` -- Gaussian posterior, loss = recon + beta * KL (Higgins et al. 2017).
* ``beta_tcvae`` -- loss = recon + KL + (beta - 1) * TC, the total correlation estimated by
  minibatch-weighted sampling (Chen et al. 2018); this is their decomposition with alpha =
  gamma = 1.
* ``bioae`` -- code passed as is, penalised for negative values (mean relu(-z)) and for
  activity (mean z^2), after Whittington et al. (2023) as configured by Hsu et al.

``encode(x)`` gives the deterministic code (the posterior mean for the VAEs).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nearid.constraints import POSITIVE_INT, Interval, Options, validate_params

CONV_MODELS = ("ae", "beta_vae", "beta_tcvae", "bioae")
_WEIGHT = Interval(float, 0.0, 1e4)  # a loss weight: 0 switches the term off
# the knobs each model takes beyond the shared sizes (make_conv_model's **hyper), and what each accepts
KNOBS = {"ae": {}, "beta_vae": {"beta": _WEIGHT},
         "beta_tcvae": {"beta": _WEIGHT, "dataset_size": Interval(int, 1, 10 ** 9)},
         "bioae": {"nonneg_weight": _WEIGHT, "activity_weight": _WEIGHT}}


def _check_image_size(image_size: int) -> int:
    if image_size < 8 or image_size & (image_size - 1):
        raise ValueError(f"image_size must be a power of two >= 8, got {image_size}")
    return int(math.log2(image_size // 4))


class ConvEncoder(nn.Module):
    """(N,3,H,W) -> (N, out_dim): stride-2 convolutions down to 4x4, then two linear layers."""

    def __init__(self, out_dim: int, image_size: int = 64, width: int = 32, hidden: int = 256):
        super().__init__()
        n_down = _check_image_size(image_size)
        layers: list[nn.Module] = []
        c_in = 3
        for i in range(n_down):
            c_out = width * min(2 ** i, 2)
            layers += [nn.Conv2d(c_in, c_out, 4, stride=2, padding=1), nn.ReLU()]
            c_in = c_out
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Sequential(nn.Linear(c_in * 16, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))
        self.channels = c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ConvDecoder(nn.Module):
    """(N, latent) -> logits (N,3,H,W): the encoder's mirror image with transposed convolutions."""

    def __init__(self, latent_dim: int, image_size: int = 64, width: int = 32, hidden: int = 256):
        super().__init__()
        n_down = _check_image_size(image_size)
        chans = [width * min(2 ** i, 2) for i in range(n_down)][::-1]  # deepest first
        self.c0 = chans[0]
        self.head = nn.Sequential(nn.Linear(latent_dim, hidden), nn.ReLU(),
                                  nn.Linear(hidden, self.c0 * 16), nn.ReLU())
        layers: list[nn.Module] = []
        for i, c in enumerate(chans):
            c_out = chans[i + 1] if i + 1 < len(chans) else 3
            layers.append(nn.ConvTranspose2d(c, c_out, 4, stride=2, padding=1))
            if i + 1 < len(chans):
                layers.append(nn.ReLU())
        self.deconv = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.head(z).view(-1, self.c0, 4, 4)
        return self.deconv(h)


def _images(batch) -> torch.Tensor:
    x = batch[0] if isinstance(batch, (tuple, list)) else batch
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"expected images of shape (N, 3, H, W), got {tuple(x.shape)}")
    return x


def bernoulli_recon(logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy summed over pixels, averaged over the batch."""
    return F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.shape[0]


class ConvAE(nn.Module):
    """Deterministic autoencoder x -> z -> x_hat with Bernoulli reconstruction loss."""

    kind = "ae"

    @validate_params(latent_dim=POSITIVE_INT)
    def __init__(self, latent_dim: int, image_size: int = 64, width: int = 32, hidden: int = 256):
        super().__init__()
        self.latent_dim, self.image_size = latent_dim, image_size
        self.encoder = ConvEncoder(self._encoder_out(latent_dim), image_size, width, hidden)
        self.decoder = ConvDecoder(latent_dim, image_size, width, hidden)

    def _encoder_out(self, latent_dim: int) -> int:
        return latent_dim

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Logits of the pixel intensities; apply sigmoid to get an image."""
        return self.decoder(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.decode(self.encode(x)))

    def penalty(self, z: torch.Tensor) -> tuple[torch.Tensor, dict]:
        return z.new_zeros(()), {}

    def loss(self, batch):
        x = _images(batch)
        z = self.encode(x)
        recon = bernoulli_recon(self.decode(z), x)
        pen, logs = self.penalty(z)
        loss = recon + pen
        return loss, {"recon": float(recon.detach()), **logs}


class ConvBioAE(ConvAE):
    """Non-negativity + activity penalties on the code (Whittington et al. 2023)."""

    kind = "bioae"

    def __init__(self, latent_dim: int, image_size: int = 64, width: int = 32, hidden: int = 256,
                 nonneg_weight: float = 1.0, activity_weight: float = 0.1):
        super().__init__(latent_dim, image_size, width, hidden)
        self.nonneg_weight, self.activity_weight = nonneg_weight, activity_weight

    def penalty(self, z):
        nonneg = F.relu(-z).mean()
        activity = z.pow(2).mean()
        pen = self.nonneg_weight * nonneg + self.activity_weight * activity
        return pen, {"nonneg": float(nonneg.detach()), "activity": float(activity.detach())}


class ConvBetaVAE(ConvAE):
    """Diagonal Gaussian posterior, standard normal prior, loss = recon + beta * KL."""

    kind = "beta_vae"

    def __init__(self, latent_dim: int, image_size: int = 64, width: int = 32, hidden: int = 256,
                 beta: float = 4.0):
        super().__init__(latent_dim, image_size, width, hidden)
        self.beta = beta

    def _encoder_out(self, latent_dim: int) -> int:
        return 2 * latent_dim

    def posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        mu, logvar = h.chunk(2, dim=1)
        return mu, logvar.clamp(-10.0, 10.0)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The posterior mean: the deterministic code that metrics score."""
        return self.posterior(x)[0]

    def regulariser(self, z, mu, logvar) -> tuple[torch.Tensor, dict]:
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(1).mean()
        return self.beta * kl, {"kl": float(kl.detach())}

    def loss(self, batch):
        x = _images(batch)
        mu, logvar = self.posterior(x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        recon = bernoulli_recon(self.decode(z), x)
        reg, logs = self.regulariser(z, mu, logvar)
        return recon + reg, {"recon": float(recon.detach()), **logs}


def _gaussian_log_density(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    return -0.5 * (math.log(2 * math.pi) + logvar + (z - mu).pow(2) * torch.exp(-logvar))


class ConvBetaTCVAE(ConvBetaVAE):
    """loss = recon + KL + (beta - 1) * TC, TC by minibatch-weighted sampling.

    ``dataset_size`` (N) enters the MWS estimator log q(z) ~ logsumexp_j log q(z|x_j) - log(N M);
    it shifts TC by the constant (D - 1) log(N M), which has no gradient: it only matters for
    the logged value.
    """

    kind = "beta_tcvae"

    def __init__(self, latent_dim: int, image_size: int = 64, width: int = 32, hidden: int = 256,
                 beta: float = 6.0, dataset_size: int = 10_000):
        super().__init__(latent_dim, image_size, width, hidden, beta=beta)
        self.dataset_size = dataset_size

    def total_correlation(self, z, mu, logvar) -> torch.Tensor:
        m = z.shape[0]
        # (M, M, D): log q(z_i,d | x_j)
        logq = _gaussian_log_density(z[:, None, :], mu[None, :, :], logvar[None, :, :])
        const = math.log(m * self.dataset_size)
        log_qz = torch.logsumexp(logq.sum(2), dim=1) - const
        log_prod_qzd = (torch.logsumexp(logq, dim=1) - const).sum(1)
        return (log_qz - log_prod_qzd).mean()

    def regulariser(self, z, mu, logvar):
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(1).mean()
        tc = self.total_correlation(z, mu, logvar)
        return kl + (self.beta - 1.0) * tc, {"kl": float(kl.detach()), "tc": float(tc.detach())}


@validate_params(name=Options(CONV_MODELS, noun="model"))
def make_conv_model(name: str, latent_dim: int, image_size: int = 64, width: int = 32,
                    hidden: int = 256, **hyper) -> ConvAE:
    """A fresh model of one of :data:`CONV_MODELS`; ``hyper`` holds its own knobs
    (``beta`` for the VAEs, ``nonneg_weight``/``activity_weight`` for BioAE,
    ``dataset_size`` for beta-TCVAE); unknown knobs are an error."""
    classes = {"ae": ConvAE, "beta_vae": ConvBetaVAE, "beta_tcvae": ConvBetaTCVAE, "bioae": ConvBioAE}
    return classes[name](latent_dim, image_size, width, hidden, **hyper)
