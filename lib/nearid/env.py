"""Run-time environment: device choice, seeding, thread budget (``nearid.setup``,
``nearid.pick_device``).

Every chapter calls :func:`setup` first, so the same seed and profile give the same numbers
on CPU, and parallel chapters share the cores instead of oversubscribing them. Library
level, so that ``import nearid`` needs nothing from the book machinery.
"""

from __future__ import annotations

import os
import random

import numpy as np

from nearid import kernels

THREADS_ENV = kernels.THREADS_ENV


def machine_memory_mb() -> float | None:
    """Physical memory of this machine (MB); None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 20
    except (ValueError, OSError, AttributeError):
        return None


def pick_device(preference: str = "auto") -> "torch.device":  # noqa: F821
    """CUDA when present (or asked for), else CPU; an unknown preference is an error
    (:func:`nearid.train.resolve_device`, which the experiments' tasks use too)."""
    from nearid.train import resolve_device

    return resolve_device(preference)


def setup(seed: int = 0, threads: int | None = None, deterministic: bool = True) -> "torch.device":  # noqa: F821
    """Seed python, numpy and torch; set the torch thread count; return the device.

    ``threads`` defaults to ``$NEARID_NUM_THREADS`` (set by the runner when chapters run in
    parallel), else 1: the book's models are small, and a torch thread that must wait for a
    core another process holds makes training ten times slower, not faster (measured here on
    2 cores). Raise it for large models on an otherwise idle machine.
    """
    import warnings

    import torch

    # tqdm.auto (imported lazily by timm/transformers) warns inside notebooks without
    # ipywidgets; progress bars belong to the runner, not to the book's pages.
    warnings.filterwarnings("ignore", message="IProgress not found")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    kernels.configure_torch()  # convolutions through MKL, portable between CPUs
    for problem in kernels.problems():  # results say so too (their JSON's "kernels" record)
        warnings.warn(f"results of this run are not portable between CPUs: {problem}", stacklevel=2)
    threads = threads or int(os.environ.get(THREADS_ENV, "0") or 0) or 1
    torch.set_num_threads(threads)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return pick_device()


def device_description() -> str:
    """A short human description of the compute device, for timings and the book."""
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    threads = int(os.environ.get(THREADS_ENV, "0") or 0) or 1  # what setup() gives a chapter
    return f"cpu ({os.cpu_count()} cores, {threads} torch thread{'s' if threads > 1 else ''})"
