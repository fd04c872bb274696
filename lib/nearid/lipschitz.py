"""Per-sample bi-Lipschitz estimates of a decoder, from its Jacobian.

Theorem 1 of the paper needs a decoder g that is (1+L)-bi-Lipschitz: distances between codes
are kept up to a factor 1+L. Locally, around a code z, g stretches a small displacement dz by
between s_min(z) and s_max(z), the extreme singular values of the Jacobian J_g(z). So

    B(z) = s_max(z) / s_min(z)          (``normalisation="condition"``, the default)

is the local distortion at z; B(z) = 1 exactly when g is a local isometry up to scale, and
L = B - 1. The ratio is scale-free on purpose: a decoder's overall scale is arbitrary (the
encoder can shrink its codes by any factor and the decoder grow by the same factor), so no
absolute singular value means anything on its own.

``normalisation="geometric"`` instead divides every singular value of every sample by one
model-level scale c (their geometric mean) and takes B(z) = max(s_max(z)/c, c/s_min(z)), the
smallest symmetric stretch bound at z in units of c. It also sees scale changes *between*
codes (which the condition number ignores) and is the closer reading of a global
bi-Lipschitz constant.

Jacobians come from :mod:`torch.func` (``jacfwd`` when the code is narrower than the output,
as for autoencoders, ``jacrev`` otherwise), vectorised over samples with ``vmap``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import jacfwd, jacrev, vmap

NORMALISATIONS = ("condition", "geometric")


def _as_codes(Z) -> torch.Tensor:
    Z = Z.detach().float() if isinstance(Z, torch.Tensor) else torch.as_tensor(np.asarray(Z), dtype=torch.float32)
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(f"codes must be a 2-D array (samples x latent dims), got shape {tuple(Z.shape)}")
    if not torch.isfinite(Z).all():
        raise ValueError("codes contain NaN or infinite values")
    return Z


def decoder_jacobian(decoder, Z, batch_size: int = 512, device: str | torch.device = "cpu") -> torch.Tensor:
    """Jacobians of ``decoder`` at each row of ``Z``: a tensor of shape (n, out_dim, latent_dim).

    ``decoder`` maps a single code of shape (d,) to an output of any shape (flattened here);
    torch ``nn.Linear``-based modules do. Forward mode costs d passes per sample, reverse mode
    out_dim passes, so we pick forward mode when d <= out_dim.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    Z = _as_codes(Z).to(device)
    d = Z.shape[1]

    def flat(z):
        return decoder(z).reshape(-1)

    with torch.no_grad():
        out_dim = flat(Z[0]).numel()
    jac = jacfwd(flat) if d <= out_dim else jacrev(flat)
    batched = vmap(jac)
    parts = []
    with warnings.catch_warnings():
        # torch's forward-mode AD loads its decompositions through the deprecated
        # torch.jit.script on first use; the warning is torch's, not ours
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=FutureWarning)
        for i in range(0, Z.shape[0], batch_size):
            parts.append(batched(Z[i:i + batch_size]).detach())
    return torch.cat(parts)


def jacobian_singular_values(decoder, Z, batch_size: int = 512,
                             device: str | torch.device = "cpu") -> np.ndarray:
    """Singular values of the decoder's Jacobian at each code, shape (n, min(out, d)), descending."""
    J = decoder_jacobian(decoder, Z, batch_size=batch_size, device=device)
    return torch.linalg.svdvals(J.double()).cpu().numpy()


def bilipschitz_from_singular_values(S, normalisation: str = "condition") -> tuple[np.ndarray, float]:
    """B(z) per row of singular values ``S`` (n, k); returns (B, scale c used).

    A zero smallest singular value (a collapsed direction) gives B = inf: the decoder is not
    injective there, and no finite bi-Lipschitz constant exists.
    """
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {normalisation!r}; valid: {', '.join(NORMALISATIONS)}")
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or S.shape[1] < 1:
        raise ValueError(f"singular values must be a 2-D array (samples x k), got shape {S.shape}")
    if (S < 0).any() or not np.isfinite(S).all():
        raise ValueError("singular values must be finite and non-negative")
    s_max, s_min = S.max(1), S.min(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if normalisation == "condition":
            B = np.where(s_min > 0, s_max / np.where(s_min > 0, s_min, 1.0), np.inf)
            B[s_max == 0] = np.inf
            return B, 1.0
        positive = S[S > 0]
        if positive.size == 0:
            return np.full(S.shape[0], np.inf), float("nan")
        c = float(np.exp(np.log(positive).mean()))
        B = np.maximum(s_max / c, np.where(s_min > 0, c / np.where(s_min > 0, s_min, 1.0), np.inf))
    return B, c


@dataclass
class BiLipschitzEstimate:
    """Per-sample B(z) and the model-level summaries of L = B - 1."""

    B: np.ndarray  # (n,) per-sample bi-Lipschitz estimate, >= 1
    singular_values: np.ndarray  # (n, k)
    scale: float  # the normalising scale c (1.0 for "condition")
    normalisation: str

    @property
    def L(self) -> np.ndarray:
        return self.B - 1.0

    @property
    def L_mean(self) -> float:
        return float(np.mean(self.L))

    @property
    def L_max(self) -> float:
        return float(np.max(self.L))

    @property
    def L_median(self) -> float:
        return float(np.median(self.L))


def estimate_bilipschitz(decoder, Z, normalisation: str = "condition", batch_size: int = 512,
                         device: str | torch.device = "cpu") -> BiLipschitzEstimate:
    """B(z) at every code in ``Z`` (e.g. the encoder's codes of held-out images), with L summaries."""
    S = jacobian_singular_values(decoder, Z, batch_size=batch_size, device=device)
    B, c = bilipschitz_from_singular_values(S, normalisation)
    return BiLipschitzEstimate(B=B, singular_values=S, scale=c, normalisation=normalisation)
