"""nearid: near-identifiability of learned representations.

A small library behind the executable book that reproduces *Statistical and structural
identifiability in representation learning* (arXiv 2603.11970). The public pieces are the
alignment estimators (:mod:`nearid.align`), whitening + ICA (:mod:`nearid.ica`), metrics
(:mod:`nearid.metrics`), data sources (:mod:`nearid.data`), models and one training loop.
"""

from nearid.book.env import pick_device, setup

__version__ = "0.1.0"
__all__ = ["pick_device", "setup", "__version__"]
