"""Loaders for the real disentanglement datasets, for readers who have the files.

Neither file ships with a package (the book renders analogues, :mod:`nearid.data.procedural`),
but the benchmark code takes any (images, factors) pair, so a reader with the originals can
run chapter 05 on them:

* ``3dshapes.h5`` (DeepMind): ``images`` (N, 64, 64, 3) uint8 and ``labels`` (N, 6) float
  factor values; ``factors`` come back as integer indices into each factor's sorted values.
* MPI3D ``.npz`` (e.g. ``real3d_complicated_shapes_ordered.npz``): ``images`` (N, 64, 64, 3)
  uint8 in the grid's C order, so the factor indices follow from the row number and the
  MPI3D-real-complex grid.

Neither reader ever unpickles: ``np.load(allow_pickle=False)`` refuses object arrays and
pickle files, and HDF5 holds plain arrays.

``n`` with ``seed`` reads a random subset (sorted, because h5py reads sorted indices fast).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nearid.data.procedural import FACTOR_GRIDS

SHAPES3D_FACTORS = list(FACTOR_GRIDS["shapes3d"])
MPI3D_FACTORS = list(FACTOR_GRIDS["mpi3d"])


def _check_images(images, source: str, n_rows: int | None = None) -> None:
    shape, dtype = tuple(images.shape), images.dtype
    if len(shape) != 4 or shape[1:] != (64, 64, 3):
        raise ValueError(f"{source}: 'images' must have shape (N, 64, 64, 3), got {shape}")
    if dtype != np.uint8:
        raise ValueError(f"{source}: 'images' must be uint8, got {dtype}")
    if n_rows is not None and shape[0] != n_rows:
        raise ValueError(f"{source}: 'images' has {shape[0]} rows but 'labels' has {n_rows}")


def _subset(total: int, n: int | None, seed: int) -> np.ndarray:
    if n is None:
        return np.arange(total)
    if not 1 <= n <= total:
        raise ValueError(f"n must lie in 1..{total}, got {n}")
    return np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))


def load_shapes3d_h5(path: str | os.PathLike, n: int | None = None,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(images uint8 (N,64,64,3), factor indices int64 (N,6), factor names) from 3dshapes.h5."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (3dshapes.h5 from DeepMind's bucket)")
    try:
        fh = h5py.File(path, "r")  # HDF5 holds arrays, never pickled objects
    except OSError as exc:
        raise ValueError(f"{path} is not an HDF5 file ({exc})") from None
    with fh:
        for key in ("images", "labels"):
            if key not in fh:
                raise ValueError(f"{path}: no dataset {key!r}; found {sorted(fh.keys())}")
        images, labels = fh["images"], fh["labels"]
        if labels.ndim != 2 or labels.shape[1] != 6:
            raise ValueError(f"{path}: 'labels' must have shape (N, 6), got {labels.shape}")
        if not np.issubdtype(labels.dtype, np.number):
            raise ValueError(f"{path}: 'labels' must be numeric, got {labels.dtype}")
        _check_images(images, str(path), labels.shape[0])
        idx = _subset(labels.shape[0], n, seed)
        X = images[idx] if n is not None else images[()]
        values = labels[()]  # small: 480000 x 6 floats; needed to index every factor's values
    factors = np.stack([np.unique(values[:, k], return_inverse=True)[1] for k in range(6)], 1)
    return np.asarray(X), factors[idx].astype(np.int64), list(SHAPES3D_FACTORS)


def load_mpi3d_npz(path: str | os.PathLike, n: int | None = None, seed: int = 0,
                   sizes: list[int] | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(images, factor indices (N,7), names) from an MPI3D .npz whose rows follow the grid.

    ``sizes`` replaces the MPI3D-real-complex grid (4, 4, 2, 3, 3, 40, 40), for the other
    MPI3D variants' files or a toy file in the same C order.
    """
    sizes = list(FACTOR_GRIDS["mpi3d"].values()) if sizes is None else [int(v) for v in sizes]
    if len(sizes) != len(MPI3D_FACTORS) or min(sizes) < 1:
        raise ValueError(f"sizes must be {len(MPI3D_FACTORS)} positive grid sizes "
                         f"({', '.join(MPI3D_FACTORS)}), got {sizes}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (an MPI3D .npz file)")
    try:  # allow_pickle=False: a downloaded file never gets to run code (object arrays refused)
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{path} is not an .npz archive of plain arrays ({exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is a single .npy array, not an .npz archive with an 'images' array")
    with data:
        if "images" not in data:
            raise ValueError(f"{path}: no array 'images'; found {sorted(data.files)}")
        try:
            images = data["images"]
        except ValueError as exc:  # an object (pickled) array
            raise ValueError(f"{path}: 'images' is not a plain array ({exc})") from None
    _check_images(images, str(path))
    total = int(np.prod(sizes))
    if len(images) != total:
        raise ValueError(f"{path}: a file in grid order with sizes {sizes} has {total} images, "
                         f"got {len(images)}")
    idx = _subset(total, n, seed)
    factors = np.stack(np.unravel_index(idx, sizes), 1).astype(np.int64)
    return images[idx], factors, list(MPI3D_FACTORS)
