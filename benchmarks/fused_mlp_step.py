"""What a hand-fused training step would save on chapter 03's MLP autoencoder.

Chapter 03 trains small MLPs (784-128-64-8-64-128-784, leaky ReLU, batch 64, fused AdamW).
Its step spends about two thirds outside matrix products, so "fuse the step" was the obvious
next idea. This script measures what fusing would buy: the usual step (``nn.Sequential``,
autograd, ``loss.backward()``) against the same step written out by hand (forward products
kept, gradients computed directly, no autograd graph), with the *same* products
(``torch.addmm``/``torch.mm``, one thread) and the same optimiser on both sides. It first
checks that the hand-written gradients equal autograd's, then times the two alternately in
one process (separate processes drift on a shared VM), and the products alone.

Run: ``.venv/bin/python benchmarks/fused_mlp_step.py`` (about a minute on one core).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

SIZES = (784, 128, 64, 8, 64, 128, 784)  # chapter 03 at quick: hidden [128, 64], latent 8
SLOPE, BATCH, LR = 0.2, 64, 2e-3


def build(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(SIZES) - 2:
            layers.append(nn.LeakyReLU(SLOPE))
    return nn.Sequential(*layers)


class HandStep:
    """The same model as plain tensors, stepped without autograd."""

    def __init__(self, net: nn.Sequential):
        linear = [m for m in net if isinstance(m, nn.Linear)]
        self.weights = [m.weight.detach().clone() for m in linear]
        self.biases = [m.bias.detach().clone() for m in linear]
        self.opt = torch.optim.AdamW([p for wb in zip(self.weights, self.biases) for p in wb], lr=LR, fused=True)

    def gradients(self, x: torch.Tensor) -> None:
        inputs, pre, h = [], [], x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            inputs.append(h)
            z = torch.addmm(b, h, w.t())
            pre.append(z)
            h = F.leaky_relu(z, SLOPE) if i < last else z
        d = (h - x).mul_(2.0 / h.numel())  # mse_loss's gradient
        for i in range(last, -1, -1):
            if i < last:
                d = d.mul_(torch.where(pre[i] > 0, 1.0, SLOPE))  # leaky ReLU's gradient
            self.weights[i].grad = d.t().mm(inputs[i])
            self.biases[i].grad = d.sum(0)
            if i:
                d = d.mm(self.weights[i])

    def step(self, x: torch.Tensor) -> None:
        self.gradients(x)
        self.opt.step()


def products_only(weights: list[torch.Tensor], biases: list[torch.Tensor], x: torch.Tensor) -> None:
    """The step's 17 products (6 forward, 6 weight gradients, 5 input gradients), nothing else."""
    inputs, h = [], x
    for w, b in zip(weights, biases):
        inputs.append(h)
        h = torch.addmm(b, h, w.t())
    d = h
    for i in range(len(weights) - 1, -1, -1):
        d.t().mm(inputs[i])
        if i:
            d = d.mm(weights[i])


def ms_per_step(step, X: torch.Tensor, batch: int, rows: torch.Generator, k: int) -> float:
    """Milliseconds a step over ``k`` steps, each on ``batch`` rows of ``X`` drawn by ``rows``."""
    start = time.perf_counter()
    for _ in range(k):
        step(X[torch.randint(0, len(X), (batch,), generator=rows)])
    return (time.perf_counter() - start) / k * 1e3


def main(steps: int = 300, rounds: int = 6) -> None:
    torch.set_num_threads(1)
    X = torch.rand(5000, SIZES[0], generator=torch.Generator().manual_seed(0))
    net = build()
    hand = HandStep(net)
    opt = torch.optim.AdamW(net.parameters(), lr=LR, fused=True)

    # the hand-written gradients are autograd's, before any step
    x0 = X[:BATCH]
    F.mse_loss(net(x0), x0).backward()
    hand.gradients(x0)
    linear = [m for m in net if isinstance(m, nn.Linear)]
    gap = max(float((m.weight.grad - w.grad).abs().max()) for m, w in zip(linear, hand.weights))
    gap = max(gap, *(float((m.bias.grad - b.grad).abs().max()) for m, b in zip(linear, hand.biases)))
    print(f"largest |hand - autograd| gradient entry: {gap:.3g}")

    def autograd_step(x):
        opt.zero_grad(set_to_none=True)
        F.mse_loss(net(x), x).backward()
        opt.step()

    rows = torch.Generator().manual_seed(1)

    def ms(step, k):
        return ms_per_step(step, X, BATCH, rows, k)

    def products(x):
        products_only(hand.weights, hand.biases, x)

    for step in (autograd_step, hand.step, products):
        ms(step, 30)  # warm-up
    usual, fused, prods = [], [], []
    for _ in range(rounds):
        usual.append(ms(autograd_step, steps))
        fused.append(ms(hand.step, steps))
        prods.append(ms(products, steps))
    u, f, p = (statistics.median(v) for v in (usual, fused, prods))
    print(f"usual step {u:.3f} ms, hand-fused {f:.3f} ms ({f / u:.2f}), products alone {p:.3f} ms")
    print(f"outside products: usual {u - p:.3f} ms, hand-fused {f - p:.3f} ms ({(f - p) / (u - p):.2f})")


if __name__ == "__main__":
    main()
