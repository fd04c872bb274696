"""Masked autoencoders (He et al. 2022) with two interchangeable transformer backends.

Table 1's second row compares an MAE built on timm's ViT blocks with "the original"
implementation: same hyperparameters, different code. We mirror that with one model class
and a ``backend`` switch:

* ``"timm"`` -- timm's ``PatchEmbed`` and ``vision_transformer.Block``;
* ``"original"`` -- our own, written from the paper: a strided-convolution patch embedding,
  pre-norm blocks with our own multi-head self-attention and GELU MLP.

Everything else follows He et al.: fixed 2-D sine-cosine position embeddings, per-sample
random masking by an argsort of uniform noise, an encoder that sees only the visible patches
(plus a class token), a lighter decoder that receives learned mask tokens at the masked
positions, and a mean squared error on the masked patches only, optionally against
per-patch normalised pixels (``norm_pix_loss``).

The representation used downstream, :meth:`MaskedAutoencoder.embed`, is the mean of the
encoder's patch tokens on the *unmasked* image (no patch dropped), as is usual for
evaluating MAE features.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from torch import nn

from nearid.constraints import POSITIVE_INT, Interval, Options, validate_params

BACKENDS = ("timm", "original")


# --------------------------------------------------------------------------- positions
def sincos_pos_embed(embed_dim: int, grid_h: int, grid_w: int, cls_token: bool = True) -> np.ndarray:
    """Fixed 2-D sine-cosine position embedding of MAE, shape (1 + h*w, dim) with cls row 0.

    Half the channels encode the row, half the column, each with the 1-D transformer
    frequencies omega_k = 1 / 10000^(k / (dim/4)).
    """
    if embed_dim % 4:
        raise ValueError(f"embed_dim must be divisible by 4 for 2-D sin-cos positions, got {embed_dim}")

    def one_d(dim: int, pos: np.ndarray) -> np.ndarray:
        omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
        out = np.outer(pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    rows, cols = np.meshgrid(np.arange(grid_h, dtype=np.float64),
                             np.arange(grid_w, dtype=np.float64), indexing="ij")
    emb = np.concatenate([one_d(embed_dim // 2, rows), one_d(embed_dim // 2, cols)], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros((1, embed_dim)), emb], axis=0)
    return emb.astype(np.float32)


# --------------------------------------------------------------------------- "original" blocks
class PatchEmbed(nn.Module):
    """Non-overlapping patches -> tokens by a convolution with kernel = stride = patch."""

    def __init__(self, img_size: int, patch_size: int, in_chans: int, embed_dim: int):
        super().__init__()
        self.grid_size = (img_size // patch_size, img_size // patch_size)
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)  # (N, L, D)


class Attention(nn.Module):
    """Multi-head self-attention: softmax(Q K^T / sqrt(d_head)) V, heads concatenated."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, l, d = x.shape
        qkv = self.qkv(x).reshape(n, l, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        out = attn.softmax(dim=-1) @ v  # (N, heads, L, head_dim)
        return self.proj(out.transpose(1, 2).reshape(n, l, d))


class Block(nn.Module):
    """Pre-norm transformer block: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def _make_blocks(backend: str, dim: int, depth: int, num_heads: int, mlp_ratio: float) -> nn.ModuleList:
    if backend == "timm":
        from timm.models.vision_transformer import Block as TimmBlock

        return nn.ModuleList([TimmBlock(dim, num_heads, mlp_ratio=mlp_ratio, qkv_bias=True,
                                        norm_layer=partial(nn.LayerNorm, eps=1e-6))
                              for _ in range(depth)])
    return nn.ModuleList([Block(dim, num_heads, mlp_ratio) for _ in range(depth)])


# --------------------------------------------------------------------------- the model
class MaskedAutoencoder(nn.Module):
    """MAE for small images; ``backend`` picks timm's ViT blocks or our own.

    Parameters follow He et al.'s ``MaskedAutoencoderViT``; the defaults fit 28x28 MNIST
    (16 patches of 7x7, 4 visible at mask ratio 0.75).
    """

    @validate_params(backend=Options(BACKENDS, noun="backend"), in_chans=POSITIVE_INT,
                     mask_ratio=Interval(float, 0, 1, closed="left"))
    def __init__(self, img_size: int = 28, patch_size: int = 7, in_chans: int = 1,
                 embed_dim: int = 64, depth: int = 4, num_heads: int = 4,
                 decoder_embed_dim: int = 32, decoder_depth: int = 2, decoder_num_heads: int = 4,
                 mask_ratio: float = 0.75, mlp_ratio: float = 4.0, norm_pix_loss: bool = False,
                 backend: str = "timm"):
        super().__init__()
        if patch_size < 1 or img_size % patch_size:
            raise ValueError(f"img_size ({img_size}) must be a positive multiple of "
                             f"patch_size ({patch_size})")
        self.img_size, self.patch_size, self.in_chans = img_size, patch_size, in_chans
        self.embed_dim, self.mask_ratio, self.norm_pix_loss = embed_dim, mask_ratio, norm_pix_loss
        self.backend = backend

        if backend == "timm":
            from timm.layers import PatchEmbed as TimmPatchEmbed

            self.patch_embed = TimmPatchEmbed(img_size, patch_size, in_chans, embed_dim)
        else:
            self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        grid = img_size // patch_size
        self.num_patches = grid * grid

        # encoder
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.register_buffer("pos_embed", torch.from_numpy(sincos_pos_embed(embed_dim, grid, grid))[None])
        self.blocks = _make_blocks(backend, embed_dim, depth, num_heads, mlp_ratio)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        # decoder
        self.decoder_embed = nn.Linear(embed_dim, decoder_embed_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_embed_dim))
        self.register_buffer("decoder_pos_embed",
                             torch.from_numpy(sincos_pos_embed(decoder_embed_dim, grid, grid))[None])
        self.decoder_blocks = _make_blocks(backend, decoder_embed_dim, decoder_depth,
                                           decoder_num_heads, mlp_ratio)
        self.decoder_norm = nn.LayerNorm(decoder_embed_dim, eps=1e-6)
        self.decoder_pred = nn.Linear(decoder_embed_dim, patch_size ** 2 * in_chans)
        self._init_weights()

    # ----------------------------------------------------------------- initialisation (MAE)
    def _init_weights(self) -> None:
        w = self.patch_embed.proj.weight.data
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    # ----------------------------------------------------------------- patches
    def _images(self, batch) -> torch.Tensor:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        x = x.float()
        if x.ndim == 3 and self.in_chans == 1:
            x = x[:, None]
        if x.ndim != 4 or x.shape[1:] != (self.in_chans, self.img_size, self.img_size):
            raise ValueError(f"expected images of shape (N, {self.in_chans}, {self.img_size}, "
                             f"{self.img_size}), got {tuple(x.shape)}")
        return x

    def patchify(self, imgs: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) -> (N, L, p*p*C), patches in row-major order, pixels (p, p, C)."""
        p, c = self.patch_size, self.in_chans
        h = w = self.img_size // p
        x = imgs.reshape(imgs.shape[0], c, h, p, w, p)
        return torch.einsum("nchpwq->nhwpqc", x).reshape(imgs.shape[0], h * w, p * p * c)

    def unpatchify(self, x: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`patchify`."""
        p, c = self.patch_size, self.in_chans
        h = w = self.img_size // p
        x = x.reshape(x.shape[0], h, w, p, p, c)
        return torch.einsum("nhwpqc->nchpwq", x).reshape(x.shape[0], c, h * p, w * p)

    def random_masking(self, x: torch.Tensor, mask_ratio: float,
                       generator: torch.Generator | None = None):
        """Keep a random subset of tokens per sample: argsort of uniform noise.

        Returns the kept tokens, the binary mask (1 = removed, in original order) and the
        indices that restore the original order.
        """
        n, l, d = x.shape
        len_keep = int(l * (1 - mask_ratio))
        if len_keep >= l:  # nothing to mask: keep the order, touch no random generator
            ids = torch.arange(l, device=x.device).expand(n, l)
            return x, torch.zeros(n, l, device=x.device), ids
        noise = torch.rand(n, l, generator=generator, device="cpu").to(x.device)
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :len_keep]
        kept = torch.gather(x, 1, ids_keep[..., None].expand(-1, -1, d))
        mask = torch.ones(n, l, device=x.device)
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, 1, ids_restore)
        return kept, mask, ids_restore

    # ----------------------------------------------------------------- encoder / decoder
    def forward_encoder(self, imgs: torch.Tensor, mask_ratio: float,
                        generator: torch.Generator | None = None):
        x = self.patch_embed(imgs) + self.pos_embed[:, 1:]
        x, mask, ids_restore = self.random_masking(x, mask_ratio, generator)
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x), mask, ids_restore

    def forward_decoder(self, x: torch.Tensor, ids_restore: torch.Tensor) -> torch.Tensor:
        x = self.decoder_embed(x)
        n, l = ids_restore.shape
        mask_tokens = self.mask_token.expand(n, l + 1 - x.shape[1], -1)
        x_ = torch.cat([x[:, 1:], mask_tokens], dim=1)
        x_ = torch.gather(x_, 1, ids_restore[..., None].expand(-1, -1, x.shape[2]))
        x = torch.cat([x[:, :1], x_], dim=1) + self.decoder_pos_embed
        for blk in self.decoder_blocks:
            x = blk(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]  # drop cls

    def forward_loss(self, imgs: torch.Tensor, pred: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean squared error per patch, averaged over the masked patches only."""
        target = self.patchify(imgs)
        if self.norm_pix_loss:
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1e-6) ** 0.5
        per_patch = ((pred - target) ** 2).mean(dim=-1)
        if mask.sum() == 0:  # mask_ratio 0: reconstruct everything
            return per_patch.mean()
        return (per_patch * mask).sum() / mask.sum()

    def forward(self, imgs: torch.Tensor, mask_ratio: float | None = None,
                generator: torch.Generator | None = None):
        imgs = self._images(imgs)
        ratio = self.mask_ratio if mask_ratio is None else mask_ratio
        latent, mask, ids_restore = self.forward_encoder(imgs, ratio, generator)
        pred = self.forward_decoder(latent, ids_restore)
        return self.forward_loss(imgs, pred, mask), pred, mask

    def loss(self, batch):
        """For :func:`nearid.train.fit`: batch = images or (images, labels)."""
        loss, _, mask = self(batch)
        return loss, {"mse_masked": float(loss.detach()), "mask_ratio": float(mask.mean())}

    @torch.no_grad()
    def embed(self, x) -> torch.Tensor:
        """Mean of the encoder's patch tokens (cls excluded) on the full, unmasked image."""
        imgs = self._images(x)
        latent, _, _ = self.forward_encoder(imgs, 0.0)
        return latent[:, 1:].mean(dim=1)
