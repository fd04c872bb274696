"""Task functions for the tests of nearid.tasks and `nearid plan`: module-level, importable by
worker processes (pytest puts tests/ on sys.path; spawned workers inherit it)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import numpy as np


def _record(calls_dir: str | None, name: str) -> None:
    """One empty file per execution, so tests count calls across processes."""
    if calls_dir:
        Path(calls_dir).mkdir(parents=True, exist_ok=True)
        (Path(calls_dir) / f"{name}.{uuid.uuid4().hex}").touch()


def train_tiny(*, seed: int, n: int = 256, width: int = 16, epochs: int = 3, batch_size: int = 32,
               max_steps: int | None = None, calls_dir: str | None = None) -> dict:
    """Train a small MLP autoencoder with nearid.train.fit; its numbers depend on the seed only
    (and differ in float bits if thread counts or kernels differ)."""
    import torch

    from nearid.train import Recipe, fit, predict

    _record(calls_dir, f"train-{seed}")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 8)) @ rng.standard_normal((8, 8))
    torch.manual_seed(seed)

    class AE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.Tanh(), torch.nn.Linear(width, 3))
            self.dec = torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.Tanh(), torch.nn.Linear(width, 8))

        def loss(self, xb):
            return torch.nn.functional.mse_loss(self.dec(self.enc(xb)), xb), {}

    model = AE()
    result = fit(model, X, Recipe(epochs, batch_size, lr=1e-2), seed=seed, max_steps=max_steps)
    codes = predict(model.enc, X)
    return {"seed": seed, "losses": np.array(result.losses), "codes": codes, "steps": result.steps,
            "threads": torch.get_num_threads()}


def flaky(*, x: int, fail_at: int | None = None, marker_dir: str | None = None,
          calls_dir: str | None = None, sleep: float = 0.0) -> dict:
    """Fails at ``x == fail_at`` the first time only (a marker file remembers the try)."""
    if sleep:
        time.sleep(sleep)
    if fail_at is not None and x == fail_at:
        marker = Path(marker_dir) / f"tried-{x}"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            raise RuntimeError(f"planted failure at {x}")
    _record(calls_dir, f"x-{x}")
    return {"x": x, "y": np.full(3, x * x)}


def killer(*, x: int, kill_at: int, marker_dir: str, calls_dir: str) -> int:
    """SIGKILLs its own process at ``x == kill_at`` the first time: a run dies without warning."""
    marker = Path(marker_dir) / f"killed-{x}"
    if x == kill_at and not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    _record(calls_dir, f"x-{x}")
    return x * 10


def where_am_i(*, x: int) -> dict:
    """What the worker running this task granted it: Dask resource restrictions and threads."""
    import distributed
    from distributed.worker import thread_state

    worker = distributed.get_worker()
    ts = worker.state.tasks[thread_state.key]
    return {"x": x, "resources": dict(ts.resource_restrictions or {}), "worker": worker.address,
            "worker_resources": dict(worker.state.total_resources), "omp": os.environ.get("OMP_NUM_THREADS")}


def sleepy(*, seconds: float, mb: int = 0, max_steps: int | None = None, per_step: float = 0.0,
           seed: int = 0) -> float:
    """A task with a set-up cost (``seconds``), a cost per step and some memory, for `nearid plan`."""
    block = np.ones(mb * 131072) if mb else None  # mb MiB of float64
    time.sleep(seconds + per_step * (max_steps or 0))
    return float(block.sum()) if block is not None else 0.0


def evaluating(*, seconds: float, per_step: float, eval_seconds: float, max_steps: int | None = None,
               evaluate: float = 1.0) -> float:
    """A task that trains (``seconds`` + ``per_step`` a step) and then evaluates its model
    (``eval_seconds`` for all its rows, a share of it for ``evaluate`` < 1), for `nearid plan`."""
    time.sleep(seconds + per_step * (max_steps or 0) + eval_seconds * evaluate)
    return evaluate


_WARM = set()


def cold_start(*, seconds: float, first: float) -> float:
    """Sleeps ``seconds``, plus ``first`` the first time a process calls it (a lazy import)."""
    extra = 0.0 if "cold_start" in _WARM else first
    _WARM.add("cold_start")
    time.sleep(seconds + extra)
    return seconds
