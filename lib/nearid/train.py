"""One seeded training loop for every model in the book.

Models implement ``loss(batch) -> (loss_tensor, logs_dict)``; the loop owns batching,
the optimiser (AdamW, so weight decay is decoupled and means the same for every model),
the device, and an optional tqdm bar (off inside notebooks: the runner shows progress).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from nearid import kernels
from nearid.constraints import POSITIVE_INT, Interval, OrNone, Text, validate_params


def _device_name(name: str) -> None:
    if name not in ("auto", "cpu", "cuda") and not name.startswith("cuda:"):
        raise ValueError(name)


DEVICE_NAME = Text(_device_name, what="'auto', 'cpu', 'cuda' or 'cuda:N' (or a torch.device)")


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


def _as_tensor(X) -> torch.Tensor:
    if isinstance(X, torch.Tensor):
        return X.float()
    return torch.as_tensor(np.asarray(X), dtype=torch.float32)


@validate_params(epochs=Interval(int, 0), batch_size=POSITIVE_INT, max_steps=OrNone(POSITIVE_INT))
def fit(model: nn.Module, X, *, epochs: int, batch_size: int = 128, lr: float = 1e-3,
        weight_decay: float = 0.0, seed: int = 0, device: str | torch.device = "cpu",
        y=None, progress: bool = False, grad_clip: float | None = None,
        max_steps: int | None = None, callback: Callable[[int], None] | None = None) -> TrainResult:
    """Train ``model`` on ``X`` (and labels ``y``) by minimising ``model.loss(batch)``.

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
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    result = TrainResult()
    start = time.perf_counter()
    epoch_iter = range(epochs)
    if progress:
        from tqdm.auto import tqdm
        epoch_iter = tqdm(epoch_iter, desc=type(model).__name__, leave=False)
    n = len(X)
    for _ in epoch_iter:
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
            loss, _ = model.loss(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
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


@torch.no_grad()
def predict(fn, X, batch_size: int = 1024, device: str | torch.device = "cpu") -> np.ndarray:
    """Apply ``fn`` (e.g. ``model.encode``) in batches without gradients; returns numpy."""
    kernels.configure_torch()  # portable CPU convolutions (nearid.kernels)
    X = _as_tensor(X)
    outs = [fn(X[i:i + batch_size].to(device)).detach().cpu() for i in range(0, len(X), batch_size)]
    return torch.cat(outs).numpy().astype(np.float64)
