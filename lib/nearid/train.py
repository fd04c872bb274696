"""One seeded training loop for every model in the book.

Models implement ``loss(batch) -> (loss_tensor, logs_dict)``; the loop owns batching,
the optimiser (AdamW, so weight decay is decoupled and means the same for every model),
and the device, as a :class:`Recipe` says (the runner shows progress over tasks). On
the CPU with portable kernels, the forward pass runs under :mod:`nearid.gemm`, so the matrix
products of training (forward and backward) and of :func:`predict` run in OpenBLAS.

:func:`fit_group` trains k models of one architecture as one batched model (``torch.func``:
stacked weights, ``vmap`` over the models), each with its own initialisation, data order and
optimiser state, so that one step advances all k. It pays where a step's fixed costs dominate
(a GPU and a small model); on a CPU its products run in torch's MKL, not OpenBLAS, and a
step of k models costs about k single steps (benchmarks/README.md, issue 34).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from nearid import gemm, kernels
from nearid.constraints import POSITIVE_INT, Interval, OrNone, Text, check_args, validate_params


def _device_name(name: str) -> None:
    if name not in ("auto", "cpu", "cuda") and not name.startswith("cuda:"):
        raise ValueError(name)


DEVICE_NAME = Text(_device_name, what="'auto', 'cpu', 'cuda' or 'cuda:N' (or a torch.device)")


@dataclass(frozen=True)
class Recipe:
    """How a model is trained: ``epochs`` passes over the data in shuffled batches of
    ``batch_size``, AdamW at learning rate ``lr`` with decoupled ``weight_decay``, and each
    step's gradient clipped to norm ``grad_clip`` (None: not clipped). What differs between
    runs of one recipe (the seed, the device, a cap on steps) is :func:`fit`'s to say."""

    epochs: int
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.0
    grad_clip: float | None = None

    def __post_init__(self):
        check_args(dict(epochs=Interval(int, 0), batch_size=POSITIVE_INT, lr=Interval(float, 0),
                        weight_decay=Interval(float, 0), grad_clip=OrNone(Interval(float, 0))), vars(self))


@dataclass
class TrainResult:
    """What a training run leaves behind besides the weights."""

    losses: list[float] = field(default_factory=list)  # mean loss per epoch
    seconds: float = 0.0
    steps: int = 0  # optimiser steps taken


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """"auto" = CUDA when torch sees a device, else the CPU; "cuda" without one is an error.

    Tasks call this where they run (a Dask worker may have a GPU the submitting machine
    lacks), so every experiment resolves "auto" the same way; it also routes torch's CPU
    convolutions to the portable kernels (:func:`nearid.kernels.configure_torch`).
    """
    kernels.configure_torch()
    if isinstance(device, torch.device):
        return device
    DEVICE_NAME.check("device", device)
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} was asked for but torch sees no CUDA device")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _adamw(params, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW in torch's fused kernel: one pass over each weight instead of a dozen element-wise
    ops, which took 40% of a step of chapter 03's autoencoders (issue 34); the same update."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)


def _as_tensor(X) -> torch.Tensor:
    if isinstance(X, torch.Tensor):
        return X.float()
    return torch.as_tensor(np.asarray(X), dtype=torch.float32)


@validate_params(max_steps=OrNone(POSITIVE_INT))
def fit(model: nn.Module, X, recipe: Recipe, *, y=None, seed: int = 0, device: str | torch.device = "cpu",
        max_steps: int | None = None, callback: Callable[[int], None] | None = None) -> TrainResult:
    """Train ``model`` on ``X`` (and labels ``y``) by minimising ``model.loss(batch)``, as
    ``recipe`` says.

    Shuffling uses its own generator seeded by ``seed``, so the run is reproducible on CPU
    whatever else touched the global RNGs. ``max_steps`` stops after that many optimiser
    steps in all (a dry run exercises the `full` profile's shapes in seconds); the result's
    ``steps`` counts the steps taken. ``callback(epochs_done)``, when given, runs after every
    epoch with the model in eval mode (e.g. to score snapshots along one run: with a constant
    learning rate, the snapshot after e epochs is the model a run of e epochs would give).
    """
    kernels.configure_torch()  # portable CPU convolutions (nearid.kernels)
    device = torch.device(device)
    X = _as_tensor(X)
    Y = None if y is None else torch.as_tensor(np.asarray(y))
    if Y is not None and len(Y) != len(X):
        raise ValueError(f"X and y differ in length: {len(X)} vs {len(Y)}")
    model.to(device).train()
    needs_mode = not gemm.products_in_modules(model)
    # routed layers' weights stored as their gradients arrive (no per-step transposes; the same
    # numbers). Not with clipping, whose norms would sum the gradients in another order.
    moves = device.type == "cpu" and gemm.active() and not recipe.grad_clip
    layout = gemm.WeightsAsGradients(model, rows=recipe.batch_size) if moves else None
    try:
        return _fit_loop(model, X, Y, recipe, seed, device, max_steps, callback, needs_mode, layout)
    finally:
        if layout is not None:
            layout.restore()


def _fit_loop(model, X, Y, recipe, seed, device, max_steps, callback, needs_mode, layout) -> TrainResult:
    opt = _adamw(model.parameters() if layout is None else layout.params(), lr=recipe.lr,
                 weight_decay=recipe.weight_decay)
    gen = torch.Generator().manual_seed(seed)
    result = TrainResult()
    start = time.perf_counter()
    n, batch_size, grad_clip = len(X), recipe.batch_size, recipe.grad_clip
    for _ in range(recipe.epochs):
        if max_steps is not None and result.steps >= max_steps:
            break
        order = torch.randperm(n, generator=gen)
        total, count = 0.0, 0
        for i in range(0, n, batch_size):
            if max_steps is not None and result.steps >= max_steps:
                break
            idx = order[i:i + batch_size]
            xb = X[idx].to(device)
            batch = xb if Y is None else (xb, Y[idx].to(device))
            # the forward pass's products in OpenBLAS (and so its backward)
            with gemm.portable_products(device, mode=needs_mode):
                loss, _ = model.loss(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if layout is not None:
                layout.hand_over()
            opt.step()
            result.steps += 1
            total += float(loss.detach()) * len(idx)
            count += len(idx)
        result.losses.append(total / max(count, 1))
        if callback is not None:
            model.eval()
            callback(len(result.losses))
            model.train()
    result.seconds = time.perf_counter() - start
    model.eval()
    return result


class _Objective(nn.Module):
    """``model.objective`` as a module's forward, so that ``torch.func.functional_call`` can run it."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch):
        return self.model.objective(batch)


def _check_group(models: Sequence[nn.Module]) -> None:
    if not models:
        raise ValueError("fit_group needs at least one model")
    first = models[0]
    if not hasattr(first, "objective"):
        raise TypeError(f"{type(first).__name__} has no objective(batch) (a loss without logs, which "
                        "vmap can batch): train it with fit()")
    shapes = [(n, p.shape) for n, p in first.named_parameters()]
    for m in models[1:]:
        if type(m) is not type(first) or [(n, p.shape) for n, p in m.named_parameters()] != shapes:
            raise ValueError("fit_group trains models of one architecture: "
                             f"{type(m).__name__} differs from {type(first).__name__} in its parameters")


@validate_params(max_steps=OrNone(POSITIVE_INT))
def fit_group(models: Sequence[nn.Module], X, recipe: Recipe, *, seeds: Sequence[int], y=None,
              device: str | torch.device = "cpu", max_steps: int | None = None,
              callback: Callable[[int], None] | None = None) -> list[TrainResult]:
    """Train ``models`` (one architecture, each initialised by its caller) together on ``X``.

    Model i sees the batches ``fit(models[i], X, recipe, seed=seeds[i], ...)`` would give it and keeps
    its own AdamW moments; one optimiser step over the stacked weights advances every model,
    since the gradient of the summed losses with respect to model i's weights is the gradient
    of model i's own loss, and AdamW acts element by element. The models need
    ``objective(batch) -> loss`` (no logs: vmap cannot turn a tensor into a float) and no
    randomness of their own. Their weights are written back after every epoch (before
    ``callback(epochs_done)``) and at the end; returns one :class:`TrainResult` per model.
    """
    from torch.func import functional_call, stack_module_state, vmap

    models = list(models)
    _check_group(models)
    if len(seeds) != len(models):
        raise ValueError(f"{len(models)} models but {len(seeds)} seeds")
    kernels.configure_torch()
    device = torch.device(device)
    X = _as_tensor(X).to(device)
    Y = None if y is None else torch.as_tensor(np.asarray(y)).to(device)
    if Y is not None and len(Y) != len(X):
        raise ValueError(f"X and y differ in length: {len(X)} vs {len(Y)}")
    for m in models:
        m.to(device).train()
    params, buffers = stack_module_state(models)
    params = {f"model.{k}": v for k, v in params.items()}
    buffers = {f"model.{k}": v for k, v in buffers.items()}
    template = _Objective(copy.deepcopy(models[0]).to("meta"))

    def objective(p, b, xb, yb):
        return functional_call(template, (p, b), ((xb,) if yb is None else ((xb, yb),)))

    batched = vmap(objective, in_dims=(0, 0, 0, None if Y is None else 0))
    opt = _adamw(list(params.values()), lr=recipe.lr, weight_decay=recipe.weight_decay)
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    results = [TrainResult() for _ in models]
    start = time.perf_counter()
    n, k, steps = len(X), len(models), 0
    batch_size, grad_clip = recipe.batch_size, recipe.grad_clip

    def write_back() -> None:
        with torch.no_grad():
            for i, m in enumerate(models):
                for name, t in m.named_parameters():
                    t.copy_(params[f"model.{name}"][i])

    for _ in range(recipe.epochs):
        if max_steps is not None and steps >= max_steps:
            break
        orders = [torch.randperm(n, generator=g) for g in gens]
        totals, count = torch.zeros(k, dtype=torch.float64), 0
        for i in range(0, n, batch_size):
            if max_steps is not None and steps >= max_steps:
                break
            idx = torch.stack([o[i:i + batch_size] for o in orders]).to(device)  # (k, B)
            losses = batched(params, buffers, X[idx], None if Y is None else Y[idx])
            opt.zero_grad(set_to_none=True)
            losses.sum().backward()
            if grad_clip:  # each model's own norm, as fit clips it
                grads = [g.grad for g in params.values()]
                norms = torch.stack([g.reshape(k, -1).norm(dim=1) for g in grads]).norm(dim=0)
                scale = (grad_clip / (norms + 1e-6)).clamp(max=1.0)
                for g in grads:
                    g.mul_(scale.reshape(k, *([1] * (g.dim() - 1))))
            opt.step()
            steps += 1
            totals += losses.detach().double().cpu() * idx.shape[1]
            count += idx.shape[1]
        for r, total in zip(results, totals.tolist()):
            r.losses.append(total / max(count, 1))
        write_back()
        if callback is not None:
            for m in models:
                m.eval()
            callback(len(results[0].losses))
            for m in models:
                m.train()
    write_back()
    seconds = time.perf_counter() - start
    for r, m in zip(results, models):
        r.steps, r.seconds = steps, seconds
        m.eval()
    return results


@torch.no_grad()
def predict(fn, X, batch_size: int = 1024, device: str | torch.device = "cpu") -> np.ndarray:
    """Apply ``fn`` (e.g. ``model.encode``) in batches without gradients; returns numpy."""
    kernels.configure_torch()  # portable CPU convolutions (nearid.kernels)
    X = _as_tensor(X)
    with gemm.portable_products(device, mode=not gemm.products_in_modules(fn)):
        outs = [fn(X[i:i + batch_size].to(device)).detach().cpu() for i in range(0, len(X), batch_size)]
    return torch.cat(outs).numpy().astype(np.float64)
