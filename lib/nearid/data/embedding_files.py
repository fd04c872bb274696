"""Embedding matrices on disk: read, validate and write them.

Rows are inputs, columns are features; ``.npy`` (one array), ``.npz`` (one array, or
the one named ``embeddings``, or ``key``), ``.parquet`` (numeric columns, or one column of
equal-length vectors). Every failure is an :class:`EmbeddingFileError` that says what was
wrong and what is accepted, so ``nearid align`` can report it and exit cleanly.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SUFFIXES = (".npy", ".npz", ".parquet")


class EmbeddingFileError(ValueError):
    """An embedding file is missing, unreadable or not a finite 2-D numeric matrix."""


def load_embeddings(path: str | os.PathLike, key: str | None = None) -> np.ndarray:
    """Read an embedding file into a float array (shape as stored; see :func:`check_matrix`)."""
    path = Path(path)
    if not path.exists():
        raise EmbeddingFileError(f"{path}: no such file")
    if not path.is_file():
        raise EmbeddingFileError(f"{path}: not a file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            X = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
                if key is not None:
                    if key not in names:
                        raise EmbeddingFileError(f"{path}: no array {key!r}; it holds {names}")
                    name = key
                elif len(names) == 1:
                    name = names[0]
                elif "embeddings" in names:
                    name = "embeddings"
                else:
                    raise EmbeddingFileError(f"{path}: holds several arrays {names}; name one "
                                             "'embeddings' or pass key=")
                X = z[name]
        elif suffix == ".parquet":
            X = _parquet_matrix(path)
        else:
            raise EmbeddingFileError(f"{path}: unsupported file type {suffix or '(none)'!r}; "
                                     f"valid: {', '.join(SUFFIXES)}")
    except EmbeddingFileError:
        raise
    except Exception as exc:  # corrupt file, pickled object arrays, ...
        raise EmbeddingFileError(f"{path}: could not read it as {suffix}: {exc}") from exc
    if X.dtype.kind not in "biuf":
        raise EmbeddingFileError(f"{path}: expected numbers, got dtype {X.dtype}")
    return np.asarray(X)


def _parquet_matrix(path: Path) -> np.ndarray:
    import pandas as pd

    df = pd.read_parquet(path)
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


def check_matrix(X: np.ndarray, name: str = "embeddings") -> np.ndarray:
    """A finite 2-D float matrix, or an :class:`EmbeddingFileError` saying what is wrong."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise EmbeddingFileError(f"{name}: expected a 2-D array (rows = inputs, columns = "
                                 f"features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise EmbeddingFileError(f"{name}: empty array of shape {X.shape}")
    bad = ~np.isfinite(X)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise EmbeddingFileError(f"{name}: {int(bad.sum())} NaN or infinite values in "
                                 f"{len(rows)} rows (first row {int(rows[0])})")
    return X


def save_embeddings(path: str | os.PathLike, X) -> Path:
    """Write a 2-D matrix as .npy, .npz (key ``embeddings``) or .parquet (columns f0, f1, ...)."""
    X = check_matrix(np.asarray(X), str(path))
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise EmbeddingFileError(f"{path}: unsupported file type {suffix or '(none)'!r}; "
                                 f"valid: {', '.join(SUFFIXES)}")
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
