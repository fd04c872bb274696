"""Training's matrix products in OpenBLAS's pinned kernels: the portable numbers at less cost.

The portable choice (:mod:`nearid.kernels`) pins MKL, which computes torch's CPU matrix
products, to its ``COMPATIBLE`` branch: the one branch MKL runs the same on Intel and AMD,
and an SSE2 one, so it multiplies at about a fifth of what the CPU can (6-19 GFLOP/s on one
core of a Zen 3, against 20-90 for MKL's native dispatch). numpy's OpenBLAS is pinned too, to
its Haswell (AVX2 + FMA) kernels, which are the same code on every x86-64 CPU with AVX2 and
multiply 2-3.5 times faster than MKL's compatible branch on the shapes the book trains.

:class:`OpenBLASProducts` is a :class:`torch.overrides.TorchFunctionMode` that, while it is
active, computes the matrix products of linear layers, convolutions, ``matmul``/``bmm`` and
attention in numpy's OpenBLAS, forward and backward (a :class:`torch.autograd.Function` whose
backward is two more OpenBLAS products). A convolution works channels-last: its receptive
fields are gathered by one copy of an overlapping strided view (:class:`_Windows`), multiplied by the
kernel in one product for the whole batch, and a transposed convolution scatters one
product's result back by the same views (:class:`_ScatterWindows`, the exact adjoint); torch's
own path is im2col + a product per image in MKL. Everything else (element-wise ops,
reductions, the copies) stays in torch's pinned AVX2 kernels. Which path a product takes
depends on its shapes only, never on the CPU, so numbers stay portable.

Only float32 CPU tensors with portable kernels in force take the OpenBLAS path; on a GPU, with
native kernels (``NEARID_NATIVE_KERNELS=1``), with ``NEARID_MKL_PRODUCTS=1``, or inside
``torch.func`` transforms (whose tensors numpy cannot read), products run in torch as before.
:func:`active` says whether a process should use the mode at all; :func:`portable_products`
is the context manager the training loop, :func:`nearid.train.predict` and the language
models' embedding functions enter.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from nearid import kernels

# Whether products take the OpenBLAS path here and now (set by :func:`portable_products`): read
# by :class:`Linear`, which routes its own product without the mode (a context variable, so
# threads running tasks side by side each have their own).
_ROUTING: contextvars.ContextVar[bool] = contextvars.ContextVar("nearid_gemm_routing", default=False)

# Products smaller than this many multiply-adds stay in torch: below it, the cost of handing a
# product to numpy (a few microseconds) outweighs the faster kernel. A property of the shapes,
# so the choice is the same on every machine.
MIN_MACS = 1 << 20


def active() -> bool:
    """Whether training in this process takes the OpenBLAS path: portable kernels in force
    (not native, a CPU with AVX2) and not kept in MKL by ``$NEARID_MKL_PRODUCTS``."""
    return (not kernels.native_requested() and kernels.supported()[0]
            and kernels.products() == "OpenBLAS")


def _plain(*tensors: torch.Tensor) -> bool:
    """float32 CPU tensors numpy can read (not a ``torch.func`` wrapper, not a meta tensor)."""
    for t in tensors:
        if t is None:
            continue
        if (not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or t.device.type != "cpu"
                or torch._C._functorch.is_functorch_wrapped_tensor(t) or t.is_sparse or t.is_quantized):
            return False
    return True


def _np(t: torch.Tensor) -> np.ndarray:
    """The tensor's memory as an array BLAS takes as it is (row- or column-major matrices);
    any other layout is copied, since numpy multiplies those without BLAS, far slower."""
    a = t.detach().numpy()
    if a.ndim == 2:
        ok = a.strides[1] == a.itemsize or a.strides[0] == a.itemsize
    else:
        ok = a.flags.c_contiguous
    return a if ok else np.ascontiguousarray(a)


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in numpy's OpenBLAS (numpy passes transposed views to BLAS without a copy)."""
    return torch.from_numpy(np.matmul(_np(a), _np(b)))


class _MatMul(torch.autograd.Function):
    """a (..., m, k) @ b (..., k, n) with equal leading dimensions (or b 2-D): OpenBLAS both ways."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _product(a, b)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = _product(grad, b.transpose(-1, -2))
        if ctx.needs_input_grad[1]:
            if b.dim() == 2 and a.dim() > 2:  # b was shared by every matrix of a: sum over them
                grad_b = _product(a.reshape(-1, a.shape[-1]).t(), grad.reshape(-1, grad.shape[-1]))
            else:
                grad_b = _product(a.transpose(-1, -2), grad)
        return grad_a, grad_b


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a (..., m, k) and b (k, n) or (..., k, n) with a's leading shape, in OpenBLAS."""
    return _MatMul.apply(a, b)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` as one OpenBLAS product over every row of ``x``."""
    out = matmul(x.reshape(-1, x.shape[-1]), weight.t())
    if bias is not None:
        out.add_(bias)  # into the product's own fresh array: one pass over memory fewer, the same sums
    return out.reshape(*x.shape[:-1], weight.shape[0])


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _output_size(size: int, pad: int, k: int, s: int) -> int:
    return (size + 2 * pad - k) // s + 1


class _Windows(torch.autograd.Function):
    """Channels-last images (n, H, W, c) -> every receptive field (n, h_out, w_out, kh, kw, c).

    Forward is one copy of an overlapping strided view of the (padded) images; a window's
    (kw, c) row is contiguous there, so the copy moves runs of ``kw * c`` floats. Backward is
    :func:`_scatter_windows`, the exact adjoint."""

    @staticmethod
    def forward(ctx, x, kh: int, kw: int, stride: tuple[int, int], padding: tuple[int, int]):
        n, h, w, c = x.shape
        ph, pw = padding
        if ph or pw:
            padded = x.new_zeros(n, h + 2 * ph, w + 2 * pw, c)
            padded[:, ph:ph + h, pw:pw + w] = x
        else:
            padded = x.contiguous()
        h_out, w_out = _output_size(h, ph, kh, stride[0]), _output_size(w, pw, kw, stride[1])
        item = padded.element_size()
        s_n, s_h, s_w, s_c = (item * s for s in padded.stride())
        windows = np.lib.stride_tricks.as_strided(padded.detach().numpy(), (n, h_out, w_out, kh, kw, c),
                                                  (s_n, stride[0] * s_h, stride[1] * s_w, s_h, s_w, s_c))
        ctx.geometry = (x.shape, kh, kw, stride, padding)
        # numpy's copy of this overlapping view is the faster one (30-40% on chapter 04 and 05's
        # windows, within a training step): the same values either way
        return torch.from_numpy(np.ascontiguousarray(windows))

    @staticmethod
    def backward(ctx, grad):
        shape, kh, kw, stride, padding = ctx.geometry
        return _scatter_windows(grad, shape, kh, kw, stride, padding), None, None, None, None


def _scatter_windows(cols: torch.Tensor, shape, kh: int, kw: int, stride, padding) -> torch.Tensor:
    """The adjoint of :class:`_Windows`: add every (n, h_out, w_out, kh, kw, c) window back
    into channels-last images of ``shape`` (n, H, W, c), cropping the padding.

    The kernel is cut into blocks of stride x stride offsets: within a block no two windows
    touch the same pixel, so each block is one add of a non-overlapping view (4 adds for a 4x4
    kernel at stride 2, one for patches whose kernel equals their stride). A pixel receives its
    windows in increasing kernel offset (i, j), block after block, as if they were added one
    offset at a time: the float sums do not depend on the blocking."""
    n, h, w, c = shape
    ph, pw = padding
    sh, sw = stride
    h_out, w_out = cols.shape[1], cols.shape[2]
    # a margin of one stride keeps a last, partial block's view inside the array
    padded = cols.new_zeros(n, h + 2 * ph + sh, w + 2 * pw + sw, c)
    for i0 in range(0, kh, sh):
        bi = min(sh, kh - i0)
        for j0 in range(0, kw, sw):
            bj = min(sw, kw - j0)
            target = padded[:, i0:i0 + sh * h_out, j0:j0 + sw * w_out].view(n, h_out, sh, w_out, sw, c)
            target[:, :, :bi, :, :bj].add_(cols[:, :, :, i0:i0 + bi, j0:j0 + bj].permute(0, 1, 3, 2, 4, 5))
    return padded[:, ph:ph + h, pw:pw + w]


class _ScatterWindows(torch.autograd.Function):
    """:func:`_scatter_windows` with :class:`_Windows` as its backward (a transposed convolution)."""

    @staticmethod
    def forward(ctx, cols, shape, kh: int, kw: int, stride, padding):
        ctx.geometry = (kh, kw, stride, padding)
        return _scatter_windows(cols, shape, kh, kw, stride, padding)

    @staticmethod
    def backward(ctx, grad):
        kh, kw, stride, padding = ctx.geometry
        return _Windows.apply(grad.contiguous(), kh, kw, stride, padding), None, None, None, None, None


class _KernelMatrix(torch.autograd.Function):
    """A convolution's weights (c_out, c_in, kh, kw) as the (kh * kw * c_in, c_out) matrix its
    product takes, without transposing the whole array either way.

    Forward permutes each output channel's (c_in, kh, kw) block to (kh, kw, c_in), a small
    transpose that stays in cache, and returns the transposed view, which OpenBLAS reads as it
    is; permuting (c_out, c_in, kh, kw) to (kh, kw, c_in, c_out) in one copy instead strides
    over the whole array for every element (a ResNet-18 step spent a fifth of its time in that
    copy and its adjoint). Backward turns the product's (kh * kw * c_in, c_out) gradient back
    by a 2-d transpose and the same small per-channel one. Only copies: the products and so
    every number are what the whole-array permutation gave (a unit test compares the bits)."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor) -> torch.Tensor:
        c_out, c_in, kh, kw = weight.shape
        ctx.shape = (c_out, c_in, kh, kw)
        return weight.permute(0, 2, 3, 1).contiguous().view(c_out, -1).t()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        c_out, c_in, kh, kw = ctx.shape
        return grad.t().contiguous().view(c_out, kh, kw, c_in).permute(0, 3, 1, 2).contiguous()


def _kernel_matrix(weight: torch.Tensor) -> torch.Tensor:
    """The (kh * kw * c_in, c_out) matrix of a convolution's weights: a view when the weights
    are stored in that order (as :class:`WeightsAsGradients` keeps them while a model trains,
    so that neither direction copies), else :class:`_KernelMatrix`'s per-channel copy."""
    stored = weight.permute(2, 3, 1, 0)
    if stored.is_contiguous():
        return stored.reshape(-1, weight.shape[0])
    return _KernelMatrix.apply(weight)


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding,
           dilation) -> torch.Tensor:
    """A 2-d convolution (groups 1) as one OpenBLAS product over every output position.

    Works channels-last: the rows of the product (one per image and output position, its
    receptive field ordered (kh, kw, channel)) are gathered by :class:`_Windows`, and the
    result is returned as an (n, c, h, w) view of channels-last memory, which the next
    convolution reads without a copy. Dilated kernels go through ``F.unfold`` (im2col)."""
    n, c_in, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if dilation != (1, 1):
        cols = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
        h_out = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        w_out = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        out = matmul(cols.transpose(1, 2).reshape(n * h_out * w_out, -1), weight.reshape(c_out, -1).t())
    else:
        win = _Windows.apply(x.permute(0, 2, 3, 1), kh, kw, stride, padding)  # (n, h_out, w_out, kh, kw, c)
        h_out, w_out = win.shape[1], win.shape[2]
        out = matmul(win.reshape(n * h_out * w_out, -1), _kernel_matrix(weight))
    if bias is not None:
        out.add_(bias)  # in place, as in linear()
    return out.reshape(n, h_out, w_out, c_out).permute(0, 3, 1, 2)


def conv_transpose2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride,
                     padding, output_padding, dilation) -> torch.Tensor:
    """A transposed 2-d convolution (groups 1): one OpenBLAS product gives every input pixel's
    (kh, kw, c_out) contribution, which :class:`_ScatterWindows` adds into place (channels-last;
    returned as an (n, c, h, w) view). Dilated kernels go through ``F.fold`` (col2im)."""
    n, c_in, h, w = x.shape
    _, c_out, kh, kw = weight.shape
    stride, padding = _pair(stride), _pair(padding)
    output_padding, dilation = _pair(output_padding), _pair(dilation)
    h_out = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    w_out = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    rows = x.permute(0, 2, 3, 1).reshape(n * h * w, c_in)  # one row per input pixel
    if dilation != (1, 1):
        cols = matmul(rows, weight.reshape(c_in, -1)).reshape(n, h * w, -1)  # (n, hw, c_out*kh*kw)
        out = F.fold(cols.transpose(1, 2), (h_out, w_out), (kh, kw), dilation=dilation, padding=padding,
                     stride=stride)
        return out if bias is None else out + bias.reshape(1, c_out, 1, 1)
    cols = matmul(rows, weight.permute(0, 2, 3, 1).reshape(c_in, -1)).reshape(n, h, w, kh, kw, c_out)
    out = _ScatterWindows.apply(cols, (n, h_out, w_out, c_out), kh, kw, stride, padding)
    if bias is not None:
        out = out + bias
    return out.permute(0, 3, 1, 2)


class _Attention(torch.autograd.Function):
    """softmax(scale * q k^T, masked) v over (b, L, d) stacks, its scaling and masking done in place.

    Written out, the scores were scaled into a new array and copied again by the mask, and in
    backward their gradient was copied by the mask's adjoint and scaled into another: four
    arrays of (stacks x L x S) floats a step, the largest a small transformer makes. Here
    forward scales and masks the product's own fresh array, and backward zeroes and scales the
    softmax's gradient in place (chapter 04's GPT-NeoX step about 6% shorter). The same
    operations on the same values in the same order (products in OpenBLAS, the rest torch's
    kernels), so the same bits; a unit test compares them with the written-out steps."""

    @staticmethod
    def forward(ctx, qf, kf, vf, drop, scale: float, lead):
        scores = _product(qf, kf.transpose(-1, -2))
        scores.mul_(scale)
        grid = scores.view(*lead, *scores.shape[-2:])
        if drop is not None:
            grid.masked_fill_(drop, float("-inf"))
        weights = grid.softmax(dim=-1)
        ctx.save_for_backward(qf, kf, vf, weights, drop)
        ctx.scale = scale
        return _product(weights.view(scores.shape), vf)

    @staticmethod
    def backward(ctx, grad):
        qf, kf, vf, weights, drop = ctx.saved_tensors
        flat = weights.view(-1, *weights.shape[-2:])
        grad_v = _product(flat.transpose(-1, -2), grad) if ctx.needs_input_grad[2] else None
        grad_w = _product(grad, vf.transpose(-1, -2)).view(weights.shape)
        grad_s = torch._softmax_backward_data(grad_w, weights, -1, weights.dtype)
        if drop is not None:
            grad_s.masked_fill_(drop, 0.0)
        grad_s = grad_s.view(flat.shape).mul_(ctx.scale)
        grad_q = _product(grad_s, kf) if ctx.needs_input_grad[0] else None
        grad_k = _product(qf.transpose(-1, -2), grad_s).transpose(-1, -2) if ctx.needs_input_grad[1] else None
        return grad_q, grad_k, grad_v, None, None, None


_CAUSAL: dict[tuple[int, int], torch.Tensor] = {}  # (L, S) -> the entries a causal mask drops


def _dropped(L: int, S: int, attn_mask, is_causal: bool) -> torch.Tensor | None:
    """Where the scores become -inf (a boolean array that broadcasts against them): above the
    diagonal if causal, and where a boolean mask is False; None if nowhere."""
    drop = None
    if is_causal:
        if (L, S) not in _CAUSAL:
            _CAUSAL[(L, S)] = ~torch.ones(L, S, dtype=torch.bool).tril()
        drop = _CAUSAL[(L, S)]
    if attn_mask is not None:
        drop = ~attn_mask if drop is None else drop | ~attn_mask
    return drop


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask=None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` (no dropout) with its two products in OpenBLAS."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    lead = q.shape[:-2]
    qf, kf, vf = (t.reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    grid = (*lead, q.shape[-2], k.shape[-2])
    if attn_mask is None or attn_mask.dtype == torch.bool:
        drop = _dropped(q.shape[-2], k.shape[-2], attn_mask, is_causal)
        if drop is None or torch.broadcast_shapes(drop.shape, grid) == grid:  # masked in place
            out = _Attention.apply(qf, kf, vf, drop, scale, tuple(lead))
            return out.reshape(*lead, q.shape[-2], v.shape[-1])
    # an additive float mask, or a boolean one with more dimensions than the scores: written out
    scores = matmul(qf, kf.transpose(-1, -2)) * scale
    scores = scores.reshape(*lead, *scores.shape[-2:])
    if is_causal:
        scores = scores.masked_fill(_dropped(*scores.shape[-2:], None, True), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    weights = scores.softmax(dim=-1).reshape(-1, *scores.shape[-2:])
    return matmul(weights, vf).reshape(*lead, q.shape[-2], v.shape[-1])


def _macs(*dims: int) -> int:
    return math.prod(int(d) for d in dims)


_MATMULS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.mm, torch.Tensor.bmm,
            torch.Tensor.mm)
_ROUTABLE = frozenset({F.linear, torch._C._nn.linear, *_MATMULS, F.conv2d, torch.conv2d, F.conv_transpose2d,
                       torch.conv_transpose2d, F.scaled_dot_product_attention})


class OpenBLASProducts(TorchFunctionMode):
    """While active, float32 CPU products of at least :data:`MIN_MACS` multiply-adds run in
    numpy's OpenBLAS (see the module docstring); anything else runs in torch unchanged.
    ``counts_`` tallies how many calls took each path (for tests and profiles)."""

    def __init__(self, min_macs: int = MIN_MACS):
        super().__init__()
        self.min_macs = min_macs
        self.counts_: dict[str, int] = {}

    def _take(self, name: str) -> None:
        self.counts_[name] = self.counts_.get(name, 0) + 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _ROUTABLE:  # one set look-up for the many calls (shapes, element-wise ops) it never routes
            routed = self._route(func, args, kwargs or {})
            if routed is not None:
                return routed
        return func(*args, **(kwargs or {}))

    def _route(self, func, args, kwargs):  # noqa: C901  (one branch per torch entry point)
        if func is F.linear or func is torch._C._nn.linear:
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            if _routes_linear(x, w, b, self.min_macs):
                self._take("linear")
                return linear(x, w, b)
        elif func in _MATMULS:
            a, b = args[0], args[1]
            if (_plain(a, b) and a.dim() >= 2 and b.dim() >= 2
                    and (b.dim() == 2 or a.shape[:-2] == b.shape[:-2])
                    and _macs(a.numel(), b.shape[-1]) >= self.min_macs):
                self._take("matmul")
                if b.dim() == 2 and a.dim() > 2:
                    return matmul(a.reshape(-1, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
                return matmul(a, b)
        elif func is F.conv2d or func is torch.conv2d:
            x, w = args[0], args[1]
            p = dict(zip(("bias", "stride", "padding", "dilation", "groups"), args[2:]), **kwargs)
            if (_plain(x, w, p.get("bias")) and x.dim() == 4 and p.get("groups", 1) == 1
                    and not isinstance(p.get("padding", 0), str)
                    and _macs(x.shape[0], w.numel(), x.shape[2] * x.shape[3]) >= self.min_macs):
                self._take("conv2d")
                return conv2d(x, w, p.get("bias"), p.get("stride", 1), p.get("padding", 0),
                              p.get("dilation", 1))
        elif func is F.conv_transpose2d or func is torch.conv_transpose2d:
            x, w = args[0], args[1]
            p = dict(zip(("bias", "stride", "padding", "output_padding", "groups", "dilation"), args[2:]),
                     **kwargs)
            if (_plain(x, w, p.get("bias")) and x.dim() == 4 and p.get("groups", 1) == 1
                    and _macs(x.shape[0], w.numel(), x.shape[2] * x.shape[3]) >= self.min_macs):
                self._take("conv_transpose2d")
                return conv_transpose2d(x, w, p.get("bias"), p.get("stride", 1), p.get("padding", 0),
                                        p.get("output_padding", 0), p.get("dilation", 1))
        elif func is F.scaled_dot_product_attention:
            q, k, v = args[:3]
            p = dict(zip(("attn_mask", "dropout_p", "is_causal", "scale"), args[3:]), **kwargs)
            if (_plain(q, k, v) and p.get("dropout_p", 0.0) == 0.0 and not p.get("enable_gqa", False)
                    and q.dim() >= 3 and k.shape[:-2] == q.shape[:-2] and v.shape[:-2] == q.shape[:-2]
                    and _macs(q.numel(), k.shape[-2]) >= self.min_macs):
                self._take("attention")
                return attention(q, k, v, p.get("attn_mask"), 0.0, bool(p.get("is_causal", False)),
                                 p.get("scale"))
        return None


def _routes_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, min_macs: int) -> bool:
    """The mode's rule for ``F.linear``: plain float32 CPU tensors and enough multiply-adds."""
    return _plain(x, weight, bias) and x.dim() >= 1 and _macs(x.numel(), weight.shape[0]) >= min_macs


class Linear(nn.Linear):
    """``nn.Linear`` whose product takes the OpenBLAS path by itself inside
    :func:`portable_products`, by the mode's own rule, so that a model whose only products are
    such layers can train without :class:`OpenBLASProducts` (whose Python hook on every torch
    call cost 15-20% of a step of chapters 02 and 03's small MLPs). Same parameters, same state
    dict, and outside :func:`portable_products` exactly ``nn.Linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _ROUTING.get() and _routes_linear(x, self.weight, self.bias, MIN_MACS):
            return linear(x, self.weight, self.bias)
        # torch's own product reads the weight in its usual layout (see WeightsAsGradients)
        weight = self.weight if self.weight.is_contiguous() else self.weight.contiguous()
        return F.linear(x, weight, self.bias)


def _product_order(module: nn.Module, rows: int) -> tuple[int, ...] | None:
    """The order of dimensions in which a layer's OpenBLAS product reads its weight and the
    product's weight gradient arrives: (in, out) for :class:`Linear`, (kh, kw, c_in, c_out) for
    a convolution. None for a layer whose product does not route at ``rows`` rows whatever its
    input's size, or never routes (groups, dilation, padding by name or by anything but zeros),
    and for transposed convolutions: torch's own kernel, which takes a batch too small to
    route, reads strided weights as they are and sums in another order."""
    if isinstance(module, Linear):
        return (1, 0) if _macs(rows, module.in_features, module.out_features) >= MIN_MACS else None
    if (not isinstance(module, nn.Conv2d) or module.groups != 1 or module.dilation != (1, 1)
            or isinstance(module.padding, str) or module.padding_mode != "zeros"
            or _macs(rows, module.weight.numel()) < MIN_MACS):
        return None
    return (2, 3, 1, 0)


class WeightsAsGradients:
    """While a model trains, the weights of its layers whose products route live in the
    memory order their OpenBLAS gradient arrives in, and the optimiser steps contiguous views
    of them.

    A routed linear layer's weight gradient is ``x^T @ grad``, an (in, out) array; seen as the
    (out, in) weight it is a transposed view, which autograd copied into the weight's own
    layout every step (a strided transpose of the largest arrays of chapters 02 and 03's
    MLPs). A convolution's is a (kh * kw * c_in, c_out) array, which went back to (c_out, c_in,
    kh, kw) by a transpose and a per-channel permutation, after the forward pass had made the
    reverse copy (:class:`_KernelMatrix`; ResNet-18's 3x3 kernels). With each weight stored in
    its product's order (:func:`_product_order`) the product reads it as it is and its
    gradient is taken as it comes. torch's fused AdamW makes a contiguous copy of a
    non-contiguous gradient (and then does not use it), so the optimiser gets :meth:`params`:
    each such weight as its contiguous view in that order, whose gradient :meth:`hand_over`
    sets to the same memory after backward. Only layouts change: the products are the same
    OpenBLAS calls on the same values (a transposed operand is packed into the same panels),
    AdamW acts element by element, and torch's own kernels for a batch too small to route read
    a contiguous copy, so every number is the same (unit tests train both ways). Layers whose
    products do not route at ``rows`` rows (a training batch) keep their layout, so that small
    layers, which stay in torch, copy nothing. :meth:`restore` gives every weight its usual
    layout back."""

    def __init__(self, model: nn.Module, rows: int):
        orders = {id(m.weight): order for m in model.modules() if (order := _product_order(m, rows))}
        self.steps: list[torch.Tensor] = []  # what the optimiser steps, in the model's parameter order
        self.moved: list[tuple[nn.Parameter, nn.Parameter, tuple[int, ...]]] = []  # (weight, view, order)
        for p in model.parameters():
            order = orders.get(id(p))
            if order is None or not p.is_contiguous():
                self.steps.append(p)
                continue
            p.data = p.data.permute(order).contiguous().permute(*np.argsort(order).tolist())
            view = nn.Parameter(p.data.permute(order))
            self.moved.append((p, view, order))
            self.steps.append(view)

    def params(self) -> list[torch.Tensor]:
        """What the optimiser should step, in the model's parameter order."""
        return list(self.steps)

    def hand_over(self) -> None:
        """After backward: each moved weight's gradient, as its contiguous view's gradient."""
        for p, view, order in self.moved:
            view.grad = None if p.grad is None else p.grad.permute(order)
            p.grad = None

    def restore(self) -> None:
        """Every moved weight back in its usual layout, with no gradient."""
        for p, _, _ in self.moved:
            p.grad = None
            p.data = p.data.contiguous()


def products_in_modules(model) -> bool:
    """Whether ``model`` (an ``nn.Module``, or a bound method of one) declares that every
    product of its forward pass and loss is one of its :class:`Linear` layers (a class
    attribute ``products_in_modules = True``), so that it needs no mode."""
    owner = getattr(model, "__self__", model)
    return bool(getattr(owner, "products_in_modules", False))


@contextlib.contextmanager
def portable_products(device: str | torch.device | None = "cpu", *,
                      mode: bool = True) -> Iterator[OpenBLASProducts | None]:
    """Take the OpenBLAS path for products on ``device`` where they should (the CPU, with
    :func:`active`): :class:`Linear` layers route themselves, and with ``mode`` (for models that
    call products outside such layers) :class:`OpenBLASProducts` routes the rest. Yields the
    mode, or None when there is none (``mode=False``, a GPU, native kernels,
    ``$NEARID_MKL_PRODUCTS``; ``device=None`` too)."""
    if device is None or torch.device(device).type != "cpu" or not active():
        yield None
        return
    token = _ROUTING.set(True)
    try:
        if not mode:
            yield None
            return
        with OpenBLASProducts() as products:
            yield products
    finally:
        _ROUTING.reset(token)
