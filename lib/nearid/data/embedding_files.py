"""Embedding matrices on disk: read, validate and write them, never unpickling anything.

Rows are inputs, columns are features. A file names one matrix, or several (the layers of a
model) from which ``file:key`` picks one:

======================  ======================================================================
``.npy``                one array, memory-mapped (read block by block, never copied whole)
``.npz``                ``file.npz:key``; without a key: its only array, or ``embeddings``
``.pt`` / ``.pth``      a tensor saved with ``torch.save``, or a dict of them (``file.pt:key``),
                        loaded with ``weights_only=True`` (no arbitrary objects)
``.safetensors``        ``file.safetensors:key``; without a key: its only tensor
``.h5`` / ``.hdf5``     ``file.h5:dataset`` (a path inside the file, e.g. ``layers/3``);
                        contiguous uncompressed datasets are memory-mapped
``.parquet``            numeric columns (one per feature), or one column of equal-length vectors
======================  ======================================================================

Every reader refuses pickled Python objects: numpy with ``allow_pickle=False``, torch with
``weights_only=True``; safetensors, HDF5 and parquet hold no code. Every failure is an
:class:`EmbeddingFileError` that says what was wrong and what is accepted (for a missing key:
which keys exist), so ``nearid align`` can report it and exit 2 without writing anything.
"""

from __future__ import annotations

import errno
import os
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np

SUFFIXES = (".npy", ".npz", ".pt", ".pth", ".safetensors", ".h5", ".hdf5", ".parquet")
MULTI = (".npz", ".pt", ".pth", ".safetensors", ".h5", ".hdf5")  # may hold several arrays
WRITABLE = (".npy", ".npz", ".parquet")
NO_PICKLE = "nearid never unpickles files, since unpickling can run arbitrary code"


class EmbeddingFileError(ValueError):
    """An embedding file is missing, unreadable or not a finite 2-D numeric matrix."""


def split_spec(spec: str | os.PathLike) -> tuple[Path, str | None]:
    """``"layers.npz:block3"`` -> (Path("layers.npz"), "block3"); a plain path -> (path, None).

    A path that exists as written is never split, so a file name containing ':' still works.
    """
    text = os.fspath(spec)
    if Path(text).exists():
        return Path(text), None
    lower = text.lower()
    for suffix in SUFFIXES:
        at = lower.find(suffix + ":")
        if at > 0:
            cut = at + len(suffix)
            return Path(text[:cut]), text[cut + 1:]
    return Path(text), None


def _check_path(path: Path) -> str:
    if not path.exists():
        raise EmbeddingFileError(f"{path}: {_why_missing(path)}")
    if not path.is_file():
        raise EmbeddingFileError(f"{path}: not a file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise EmbeddingFileError(f"{path}: unsupported file type {suffix or '(none)'!r}; "
                                 f"valid: {', '.join(SUFFIXES)}")
    return suffix


def _why_missing(path: Path) -> str:
    """Say why ``exists()`` is false: a missing file, a broken link, a loop, or no access."""
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return f"a symbolic link to {os.readlink(path)!r}, which does not exist"
        return "no such file"
    except PermissionError:
        return "permission denied (a folder on the path cannot be searched)"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a loop of symbolic links (it never reaches a file)"
        return exc.strerror or str(exc)
    return "no such file"  # pragma: no cover - exists() and stat() disagree only in a race


def _dtype_words(dtype: np.dtype) -> str:
    """A dtype the aligner cannot use, in words that say what to do."""
    if dtype.kind == "c":
        return (f"complex numbers (dtype {dtype}); embeddings must be real: pass the real part, "
                "the magnitude, or real and imaginary parts as separate columns")
    return f"expected numbers, got dtype {dtype}"


def load_embeddings(path: str | os.PathLike, key: str | None = None) -> np.ndarray:
    """Read one embedding matrix (shape as stored; see :func:`check_matrix`).

    ``path`` may carry the key (``file.npz:key``); ``key`` overrides it. ``.npy`` and
    contiguous HDF5 datasets come back memory-mapped (read-only).
    """
    path, spec_key = split_spec(path)
    key = key if key is not None else spec_key
    suffix = _check_path(path)
    if suffix == ".npy":
        if key is not None:
            raise EmbeddingFileError(f"{path}: a .npy file holds one array; drop ':{key}'")
        X = _read_npy(path)
    elif suffix == ".parquet":
        X = _read_parquet(path, key)
    else:
        X = _read_one(path, suffix, key)
    if X.dtype.kind not in "biuf":
        raise EmbeddingFileError(f"{path}: {_dtype_words(X.dtype)}")
    return X


def load_layers(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of a multi-array file (.npz, .pt, .safetensors, .h5), by name.

    The order is the file's where it keeps one (.npz, .pt), else natural (``layer2`` before
    ``layer10``). Arrays that are not 2-D numeric matrices are an error that names them.
    """
    path, key = split_spec(path)
    suffix = _check_path(path)
    if key is not None:
        raise EmbeddingFileError(f"{path}: --layers reads every array of the file; drop ':{key}'")
    if suffix not in MULTI:
        raise EmbeddingFileError(f"{path}: --layers needs a file of several arrays "
                                 f"({', '.join(MULTI)}), got {suffix}")
    if suffix == ".npz":
        with _open_npz(path) as z:
            layers = {name: _read_one(path, suffix, name) for name in z.files}
    elif suffix in (".pt", ".pth"):
        obj = _torch_load(path)
        if _is_tensor(obj):
            raise EmbeddingFileError(f"{path}: holds a single tensor, not a dict of layers")
        layers = {str(k): _tensor_to_numpy(v) for k, v in obj.items() if _is_tensor(v)}
    elif suffix == ".safetensors":
        with _safe_open(path) as f:
            layers = {name: _safetensor(path, f, name) for name in sorted(f.keys(), key=_natural)}
    else:
        layers = {name: _read_h5(path, name) for name in sorted(_h5_datasets(path), key=_natural)}
    if not layers:
        raise EmbeddingFileError(f"{path}: holds no arrays")
    complex_layers = [k for k, v in layers.items() if v.dtype.kind == "c"]
    if complex_layers:
        raise EmbeddingFileError(f"{path}:{complex_layers[0]} holds "
                                 f"{_dtype_words(layers[complex_layers[0]].dtype)}")
    bad = [f"{k} {v.shape} {v.dtype}" for k, v in layers.items() if v.ndim != 2 or v.dtype.kind not in "biuf"]
    if bad:
        raise EmbeddingFileError(f"{path}: every layer must be a 2-D numeric array (rows = inputs); "
                                 f"not so: {', '.join(bad[:5])}")
    return layers


def list_keys(path: str | os.PathLike) -> list[str]:
    """The names of the arrays in a multi-array file, in the order :func:`load_layers` uses."""
    path = Path(path)
    suffix = _check_path(path)
    if suffix == ".npz":
        with _open_npz(path) as z:
            return list(z.files)
    if suffix in (".pt", ".pth"):
        obj = _torch_load(path)
        if _is_tensor(obj):
            return []
        return [str(k) for k, v in obj.items() if _is_tensor(v)]
    if suffix == ".safetensors":
        with _safe_open(path) as f:
            return sorted(f.keys(), key=_natural)
    if suffix in (".h5", ".hdf5"):
        return sorted(_h5_datasets(path), key=_natural)
    raise EmbeddingFileError(f"{path}: {suffix} holds one matrix, not named arrays")


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _missing(path: Path, key: str, names: list[str]) -> EmbeddingFileError:
    shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
    return EmbeddingFileError(f"{path}: no array {key!r}; it holds: {shown or 'nothing'}")


def _several(path: Path, names: list[str]) -> EmbeddingFileError:
    shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
    return EmbeddingFileError(f"{path}: holds several arrays ({shown}); pick one as {path}:KEY, "
                              "or compare them all with --layers")


def _pick(path: Path, key: str | None, names: list[str], default: str | None = None) -> str:
    if key is not None:
        if key not in names:
            raise _missing(path, key, names)
        return key
    if len(names) == 1:
        return names[0]
    if default in names:
        return default
    if not names:
        raise EmbeddingFileError(f"{path}: holds no arrays")
    raise _several(path, names)


def _read_one(path: Path, suffix: str, key: str | None) -> np.ndarray:
    if suffix == ".npz":
        with _open_npz(path) as z:
            name = _pick(path, key, list(z.files), default="embeddings")
            _check_npz_member(path, z, name)
            try:
                return z[name]
            except ValueError as exc:
                if "allow_pickle" in str(exc) or "pickled" in str(exc):
                    raise EmbeddingFileError(f"{path}:{name} holds pickled Python objects, not numbers; "
                                             f"{NO_PICKLE}") from None
                raise EmbeddingFileError(f"{path}:{name} is not a valid array: {exc}") from None
    if suffix in (".pt", ".pth"):
        obj = _torch_load(path)
        if _is_tensor(obj):
            if key is not None:
                raise EmbeddingFileError(f"{path}: holds a single tensor; drop ':{key}'")
            return _tensor_to_numpy(obj)
        names = [str(k) for k, v in obj.items() if _is_tensor(v)]
        name = _pick(path, key, names, default="embeddings")
        return _tensor_to_numpy({str(k): v for k, v in obj.items()}[name])
    if suffix == ".safetensors":
        with _safe_open(path) as f:
            name = _pick(path, key, sorted(f.keys(), key=_natural), default="embeddings")
            return _safetensor(path, f, name)
    if suffix in (".h5", ".hdf5"):
        name = _pick(path, key, sorted(_h5_datasets(path), key=_natural), default="embeddings")
        return _read_h5(path, name)
    raise EmbeddingFileError(f"{path}: unsupported file type {suffix!r}")  # pragma: no cover


# --------------------------------------------------------------------------- readers
def _read_npy(path: Path) -> np.ndarray:
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
        except ValueError:
            raise EmbeddingFileError(f"{path}: not a valid .npy file (no numpy header)") from None
        try:
            if version == (1, 0):
                _, _, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                _, _, dtype = np.lib.format.read_array_header_2_0(f)
        except Exception as exc:  # noqa: BLE001 - any header failure is "not a valid file"
            raise EmbeddingFileError(f"{path}: not a valid .npy file ({exc})") from None
    if dtype.hasobject:
        raise EmbeddingFileError(f"{path}: holds pickled Python objects (dtype object), not numbers; "
                                 f"{NO_PICKLE}")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - truncated data, bad shape, ...
        raise EmbeddingFileError(f"{path}: not a valid .npy file ({exc})") from None


def _check_npz_member(path: Path, z, name: str) -> None:
    """Refuse a member that would inflate past this machine's memory, before inflating it.

    A compressed member costs nothing on disk whatever its header says (a few kB of zeros can
    declare 38 GB); its header's shape and dtype give the size it would take in memory."""
    from nearid.env import machine_memory_mb

    member = name if name.endswith(".npy") else f"{name}.npy"
    try:
        with z.zip.open(member) as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
    except Exception:  # noqa: BLE001 - numpy's own reader names what is wrong with the member
        return
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    ram = machine_memory_mb()
    if ram is not None and nbytes > ram * 2 ** 20:
        raise EmbeddingFileError(f"{path}:{name} would take {nbytes / 2 ** 30:.1f} GB in memory "
                                 f"(shape {tuple(shape)}, {dtype}), more than this machine's "
                                 f"{ram / 1024:.1f} GB; save it as .npy, which is read block by block")


def _open_npz(path: Path):
    if not zipfile.is_zipfile(path):
        raise EmbeddingFileError(f"{path}: not a valid .npz file (not a zip archive)")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001
        raise EmbeddingFileError(f"{path}: not a valid .npz file ({exc})") from None


def _is_tensor(obj) -> bool:
    return hasattr(obj, "detach") and hasattr(obj, "numpy")


def _tensor_to_numpy(t) -> np.ndarray:
    t = t.detach().cpu()
    if t.is_floating_point() and t.element_size() < 4:  # float16, bfloat16: numpy lacks bfloat16
        t = t.float()
    return t.numpy()


def _torch_load(path: Path):
    import pickle

    import torch

    try:
        with warnings.catch_warnings():  # torch warns about the pickle protocol of odd files
            warnings.simplefilter("ignore", UserWarning)
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as exc:
        if "mmap" not in str(exc):
            raise EmbeddingFileError(f"{path}: not a valid torch file ({exc})") from None
        obj = _torch_load_plain(path)  # an old-format (non-zip) file cannot be memory-mapped
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" in str(exc) or "Unsupported" in str(exc):
            raise EmbeddingFileError(f"{path}: holds pickled Python objects other than tensors, refused by "
                                     f"torch.load(weights_only=True); {NO_PICKLE}") from None
        raise EmbeddingFileError(f"{path}: not a valid torch file ({exc})") from None
    except Exception as exc:  # noqa: BLE001
        raise EmbeddingFileError(f"{path}: not a valid torch file ({exc})") from None
    if not (_is_tensor(obj) or isinstance(obj, dict)):
        raise EmbeddingFileError(f"{path}: expected a tensor or a dict of tensors, got {type(obj).__name__}")
    return obj


def _torch_load_plain(path: Path):
    import pickle

    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise EmbeddingFileError(f"{path}: holds pickled Python objects other than tensors, refused by "
                                 f"torch.load(weights_only=True); {NO_PICKLE}") from None
    except Exception as exc:  # noqa: BLE001
        raise EmbeddingFileError(f"{path}: not a valid torch file ({exc})") from None


class _safe_open:
    """safetensors.safe_open with our error for a file that is not a safetensors file."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        from safetensors import safe_open

        try:
            self.cm = safe_open(str(self.path), framework="numpy")
            return self.cm.__enter__()
        except Exception as exc:  # noqa: BLE001
            raise EmbeddingFileError(f"{self.path}: not a valid .safetensors file ({exc})") from None

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)


def _safetensor(path: Path, f, name: str) -> np.ndarray:
    try:
        return f.get_tensor(name)
    except Exception as exc:  # noqa: BLE001 - bfloat16 has no numpy dtype: read it through torch
        if "bf16" not in str(exc).lower() and "bfloat16" not in str(exc).lower():
            raise EmbeddingFileError(f"{path}:{name} could not be read ({exc})") from None
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as g:
        return _tensor_to_numpy(g.get_tensor(name))


def _h5_file(path: Path):
    import h5py

    try:
        return h5py.File(path, "r")
    except Exception as exc:  # noqa: BLE001
        raise EmbeddingFileError(f"{path}: not a valid HDF5 file ({exc})") from None


def _h5_datasets(path: Path) -> list[str]:
    import h5py

    names: list[str] = []
    with _h5_file(path) as f:
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def _read_h5(path: Path, name: str) -> np.ndarray:
    with _h5_file(path) as f:
        ds = f[name]
        if ds.dtype.kind not in "biuf":
            what = _dtype_words(ds.dtype) if ds.dtype.kind == "c" else \
                f"non-numeric data (dtype {ds.dtype}); expected a numeric matrix"
            raise EmbeddingFileError(f"{path}:{name} holds {what}")
        offset = ds.id.get_offset() if ds.chunks is None and ds.compression is None else None
        shape, dtype = ds.shape, ds.dtype
        if offset is None or ds.size == 0:
            return ds[()]
    # a contiguous, uncompressed dataset is plain bytes at a fixed offset: map it
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _read_parquet(path: Path, key: str | None) -> np.ndarray:
    import pandas as pd

    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001
        raise EmbeddingFileError(f"{path}: not a valid parquet file ({exc})") from None
    if key is not None:
        if key not in df.columns:
            raise _missing(path, key, [str(c) for c in df.columns])
        df = df[[key]]
    if df.shape[1] == 0:
        raise EmbeddingFileError(f"{path}: the table has no columns")
    numeric = df.select_dtypes(include="number")
    if numeric.shape[1] == df.shape[1]:
        return numeric.to_numpy()
    if df.shape[1] == 1:  # one column of vectors
        col = df.iloc[:, 0]
        try:
            lengths = {len(v) for v in col}
        except TypeError:
            raise EmbeddingFileError(f"{path}: column {df.columns[0]!r} holds neither numbers "
                                     "nor vectors") from None
        if len(lengths) > 1:
            raise EmbeddingFileError(f"{path}: vectors in column {df.columns[0]!r} differ in "
                                     f"length ({sorted(lengths)[:5]}...)")
        return np.stack([np.asarray(v, dtype=np.float64) for v in col]) if len(col) else np.empty((0, 0))
    bad = [c for c in df.columns if c not in numeric.columns]
    raise EmbeddingFileError(f"{path}: non-numeric columns {bad[:5]}; give only numeric "
                             "columns (one per feature) or a single column of vectors")


# --------------------------------------------------------------------------- checks, writing
def check_matrix(X: np.ndarray, name: str = "embeddings") -> np.ndarray:
    """A finite 2-D float matrix, or an :class:`EmbeddingFileError` saying what is wrong.

    Finiteness is checked block by block, so a memory-mapped matrix is not copied."""
    X = np.asarray(X) if not isinstance(X, np.ndarray) else X
    if X.ndim != 2:
        raise EmbeddingFileError(f"{name}: expected a 2-D array (rows = inputs, columns = "
                                 f"features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise EmbeddingFileError(f"{name}: empty array of shape {X.shape}")
    if X.dtype.kind != "f":
        return X
    step = max(1, (1 << 22) // X.shape[1])
    count, rows, first = 0, 0, None
    for start in range(0, X.shape[0], step):
        bad = ~np.isfinite(X[start:start + step])
        if bad.any():
            r = np.flatnonzero(bad.any(1))
            count, rows = count + int(bad.sum()), rows + r.size
            first = start + int(r[0]) if first is None else first
    if count:
        raise EmbeddingFileError(f"{name}: {count} NaN or infinite values in {rows} rows (first row {first})")
    return X


def save_embeddings(path: str | os.PathLike, X) -> Path:
    """Write a 2-D matrix as .npy, .npz (key ``embeddings``) or .parquet (columns f0, f1, ...)."""
    X = check_matrix(np.asarray(X), str(path))
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in WRITABLE:
        raise EmbeddingFileError(f"{path}: unsupported file type {suffix or '(none)'!r} for writing; "
                                 f"valid: {', '.join(WRITABLE)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{suffix}")
    try:
        if suffix == ".npy":
            np.save(tmp, X)
        elif suffix == ".npz":
            np.savez(tmp, embeddings=X)
        else:
            import pandas as pd

            pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).to_parquet(tmp, index=False)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
