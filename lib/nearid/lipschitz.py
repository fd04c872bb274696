"""Per-sample bi-Lipschitz estimates of a decoder, from its Jacobian.

Theorem 1 of the paper needs a decoder g that is (1+L)-bi-Lipschitz: after fixing its overall
scale c (the encoder can shrink its codes by any factor and the decoder grow by the same
factor, so no absolute stretch means anything), g stretches no distance by more than 1+L and
shrinks none by more than 1+L:

    |z - z'| / (1+L)  <=  |g(z) - g(z')| / c  <=  (1+L) |z - z'|.

Around a code z, g stretches a small displacement by between s_min(z) and s_max(z), the
extreme singular values of its Jacobian J_g(z). At scale c the local constant is

    B_c(z) = 1 + L_c(z) = max(s_max(z) / c, c / s_min(z)).

``normalisation="model"`` (the default, the definition above) fixes ONE scale per model, the
one that makes the largest B_c(z) over the given codes smallest,
c = sqrt(max_z s_max(z) * min_z s_min(z)); then max_z B(z) = sqrt(max s_max / min s_min),
the smallest constant any single scale achieves on these Jacobians. For a linear map
g(z) = Wz + b this is sqrt(cond(W)) at every z, its exact constant.

``normalisation="local"`` lets every code choose its own best scale c(z) = sqrt(s_max s_min),
B(z) = sqrt(s_max(z) / s_min(z)): the distortion of the neighbourhood of z alone, blind to
scale changes *between* codes. It is never larger than the model normalisation.

Jacobians come from :mod:`torch.func` (``jacfwd`` when the code is narrower than the output,
as for autoencoders, ``jacrev`` otherwise), vectorised over samples with ``vmap``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import jacfwd, jacrev, vmap

from nearid.constraints import POSITIVE_INT, Options, validate_params

NORMALISATIONS = ("model", "local")
NORMALISATION = Options(NORMALISATIONS, noun="normalisation")


def _as_codes(Z) -> torch.Tensor:
    Z = Z.detach().float() if isinstance(Z, torch.Tensor) else torch.as_tensor(np.asarray(Z), dtype=torch.float32)
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(f"codes must be a 2-D array (samples x latent dims), got shape {tuple(Z.shape)}")
    if not torch.isfinite(Z).all():
        raise ValueError("codes contain NaN or infinite values")
    return Z


@validate_params(batch_size=POSITIVE_INT)
def decoder_jacobian(decoder, Z, batch_size: int = 512, device: str | torch.device = "cpu") -> torch.Tensor:
    """Jacobians of ``decoder`` at each row of ``Z``: a tensor of shape (n, out_dim, latent_dim).

    ``decoder`` maps a single code of shape (d,) to an output of any shape (flattened here);
    torch ``nn.Linear``-based modules do. Forward mode costs d passes per sample, reverse mode
    out_dim passes, so we pick forward mode when d <= out_dim.
    """
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


@validate_params(normalisation=NORMALISATION)
def bilipschitz_from_singular_values(S, normalisation: str = "model") -> tuple[np.ndarray, float]:
    """B(z) = 1 + L(z) per row of Jacobian singular values ``S`` (n, k); returns (B, scale c).

    "model": one scale c for all rows, the one that minimises the largest B;
    "local": each row its own scale (c is then NaN). A zero smallest singular value (a
    collapsed direction) gives B = inf at that row: the decoder is not injective there.
    """
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] < 1 or S.shape[1] < 1:
        raise ValueError(f"singular values must be a 2-D array (samples x k), got shape {S.shape}")
    if (S < 0).any() or not np.isfinite(S).all():
        raise ValueError("singular values must be finite and non-negative")
    s_max, s_min = S.max(1), S.min(1)
    ok = s_min > 0  # rows without a collapsed direction
    B = np.full(len(S), np.inf)
    if not ok.any():
        return B, float("nan")
    if normalisation == "local":
        B[ok] = np.sqrt(s_max[ok] / s_min[ok])
        return B, float("nan")
    c = float(np.sqrt(s_max[ok].max() * s_min[ok].min()))  # the minimax scale
    B[ok] = np.maximum(s_max[ok] / c, c / s_min[ok])
    return B, c


@dataclass
class BiLipschitzEstimate:
    """Per-sample B(z) and the model-level summaries of L = B - 1."""

    B: np.ndarray  # (n,) per-sample bi-Lipschitz estimate, >= 1
    singular_values: np.ndarray  # (n, k)
    scale: float  # the model's scale c ("model"; NaN for "local")
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


def estimate_bilipschitz(decoder, Z, normalisation: str = "model", batch_size: int = 512,
                         device: str | torch.device = "cpu") -> BiLipschitzEstimate:
    """B(z) at every code in ``Z`` (e.g. the encoder's codes of held-out images), with L summaries."""
    S = jacobian_singular_values(decoder, Z, batch_size=batch_size, device=device)
    B, c = bilipschitz_from_singular_values(S, normalisation)
    return BiLipschitzEstimate(B=B, singular_values=S, scale=c, normalisation=normalisation)
