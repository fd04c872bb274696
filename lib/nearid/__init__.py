"""nearid: near-identifiability of learned representations.

A small library behind the executable book that reproduces *Statistical and structural
identifiability in representation learning* (arXiv 2603.11970). The public pieces are the
alignment estimators (:mod:`nearid.align`), whitening + ICA (:mod:`nearid.ica`), metrics
(:mod:`nearid.metrics`), data sources (:mod:`nearid.data`), models and one training loop.

Importing it first pins the CPU kernels torch, MKL, oneDNN, OpenBLAS and numpy will use
(:mod:`nearid.kernels`), so that the same seed gives the same numbers on any x86-64 CPU with
AVX2; this must happen before numpy or torch load, hence before anything else here.
"""

from nearid import kernels as _kernels

_kernels.apply()

from nearid.env import pick_device, setup  # noqa: E402  (after the kernels are pinned)

__version__ = "0.1.0"
__all__ = ["pick_device", "setup", "__version__"]
