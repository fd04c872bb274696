"""RxRx3-core OpenPhenom embeddings + metadata: the paper's real data, for users who have it.

Recursion publishes ``OpenPhenom_rxrx3_core_embeddings.parquet`` (one row per well: a
``well_id`` column and 384 columns ``feature_0`` ... ``feature_383``) and
``metadata_rxrx3_core.csv`` (columns ``well_id, experiment_name, plate, address, gene,
treatment, SMILES, concentration, perturbation_type, cell_type``; a guide is a treatment
``<gene>_guide_<k>``). Neither ships with this book; :func:`load_rxrx3_core` turns them into
the same (embeddings, well table) pair the simulator gives, so :func:`nearid.experiments.ch06_cell_microscopy.evaluate`
runs on either.

Controls: the paper's Table 3 uses "the same 22,062 controls" for every gene; 22,062 is the
number of wells whose ``treatment`` is ``CRISPR_control`` in the metadata, so that is the
default. Batches: ``experiment_name`` by default (``plate`` is the other natural choice).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

METADATA_COLUMNS = ("well_id", "experiment_name", "plate", "address", "gene", "treatment",
                    "SMILES", "concentration", "perturbation_type", "cell_type")
REQUIRED_METADATA = ("well_id", "experiment_name", "plate", "address", "gene", "treatment",
                     "perturbation_type")
FEATURE_PREFIX = "feature_"
EMBEDDING_DIM = 384
TABLE3_GENES = ("CYP11B1", "EIF3H", "HCK", "MTOR", "PLK1")


class SchemaError(ValueError):
    """A file does not have the RxRx3-core layout; the message says what differs."""


def _exists(path) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist. RxRx3-core is not shipped with this "
                                "book: download metadata_rxrx3_core.csv and "
                                "OpenPhenom_rxrx3_core_embeddings.parquet from Hugging Face "
                                "(recursionpharma/rxrx3-core) and pass their paths")


PICKLED_EXTENSION = b"arrow.py_extension_type"  # pyarrow's old extension type: a pickled Python object


def refuse_pickled_columns(path: str | os.PathLike) -> None:
    """Raise :class:`SchemaError` if a Parquet file declares a column of pyarrow's pickle-based
    extension type, before anything reads its values.

    pyarrow before 14.0.1 unpickled such a column's type on read (CVE-2023-47248), running
    whatever the file's author put there. The lock pins a pyarrow that never unpickles it
    (it hands back the raw column with the pickle as metadata); this check then refuses the
    file outright instead of reading half of it.
    """
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # not Parquet at all: say so plainly
        raise SchemaError(f"{path} is not a Parquet file ({type(exc).__name__}: {exc})") from None
    for fld in schema:
        if (fld.metadata or {}).get(b"ARROW:extension:name") == PICKLED_EXTENSION:
            raise SchemaError(f"{path}: column {fld.name!r} holds pickled Python objects "
                              f"({PICKLED_EXTENSION.decode()}); refusing to read it")


def check_embeddings_file(path: str | os.PathLike) -> None:
    """Raise :class:`SchemaError` naming ``path`` unless its Parquet schema (the footer only,
    no values read) has a ``well_id`` column and numeric ``feature_<k>`` columns, none pickled:
    a wrong file is refused before the chapter starts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    refuse_pickled_columns(path)
    schema = pq.read_schema(path)
    names = list(schema.names)
    feats = [f for f in schema if f.name.startswith(FEATURE_PREFIX)]
    if "well_id" not in names or not feats:
        raise SchemaError(f"{path} has no 'well_id' and '{FEATURE_PREFIX}<k>' columns (OpenPhenom writes well_id, "
                          f"feature_0 ... feature_{EMBEDDING_DIM - 1}); found {names[:8]}")
    bad = [f.name for f in feats if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))]
    if bad:
        raise SchemaError(f"{path}: feature columns must be numeric; not numeric: {bad[:5]}")


def check_metadata_file(path: str | os.PathLike) -> None:
    """Raise :class:`SchemaError` naming ``path`` unless its first line (a CSV header) holds
    the RxRx3-core metadata columns; reads that line only."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            head = fh.readline(1 << 16)
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path} cannot be read as a CSV file ({type(exc).__name__})") from None
    import csv

    columns = next(csv.reader([head]), [])
    missing = [c for c in REQUIRED_METADATA if c not in columns]
    if missing:
        raise SchemaError(f"{path} is not RxRx3-core metadata: its header lacks {missing}")


def check_metadata(meta: pd.DataFrame) -> pd.DataFrame:
    """Raise :class:`SchemaError` unless ``meta`` has the RxRx3-core metadata columns."""
    missing = [c for c in REQUIRED_METADATA if c not in meta.columns]
    if missing:
        raise SchemaError(f"metadata lacks columns {missing}; RxRx3-core metadata has "
                          f"{list(METADATA_COLUMNS)}; found {list(meta.columns)}")
    if meta["well_id"].isna().any():
        raise SchemaError("metadata has wells without a well_id")
    if meta["well_id"].duplicated().any():
        dup = meta.loc[meta["well_id"].duplicated(), "well_id"].iloc[0]
        raise SchemaError(f"metadata lists well_id {dup!r} more than once")
    return meta


def check_embeddings(emb: pd.DataFrame, dim: int | None = None) -> list[str]:
    """Raise :class:`SchemaError` unless ``emb`` has ``well_id`` and numeric ``feature_*``."""
    if "well_id" not in emb.columns:
        raise SchemaError(f"embeddings lack a 'well_id' column; found {list(emb.columns)[:8]}...")
    feats = [c for c in emb.columns if str(c).startswith(FEATURE_PREFIX)]
    if not feats:
        raise SchemaError(f"embeddings have no '{FEATURE_PREFIX}<k>' columns (OpenPhenom "
                          f"writes feature_0 ... feature_{EMBEDDING_DIM - 1}); found "
                          f"{list(emb.columns)[:8]}...")
    def index(c) -> int:
        tail = str(c)[len(FEATURE_PREFIX):]
        return int(tail) if tail.isdigit() else 10**9

    feats = sorted(feats, key=index)
    if dim is not None and len(feats) != dim:
        raise SchemaError(f"expected {dim} feature columns, found {len(feats)}")
    bad = [c for c in feats if not pd.api.types.is_numeric_dtype(emb[c])]
    if bad:
        raise SchemaError(f"feature columns must be numeric; not numeric: {bad[:5]}")
    if not np.isfinite(emb[feats].to_numpy(dtype=np.float64)).all():
        raise SchemaError("embeddings contain NaN or infinite values")
    return feats


def load_rxrx3_core(embeddings_path: str | os.PathLike, metadata_path: str | os.PathLike,
                    genes: Sequence[str] = TABLE3_GENES,
                    control_treatments: Sequence[str] = ("CRISPR_control",),
                    batch_column: str = "experiment_name", dim: int | None = None
                    ) -> tuple[np.ndarray, pd.DataFrame]:
    """Well embeddings and a well table (``well_id, batch, gene, guide, is_control``).

    Keeps the wells of ``genes`` (CRISPR, one guide = one ``treatment``) and the wells
    whose treatment is in ``control_treatments``. Rows of the embeddings file that share a
    ``well_id`` are averaged (as Recursion's EFAAR benchmarks do).
    """
    _exists(embeddings_path)
    _exists(metadata_path)
    meta = check_metadata(pd.read_csv(metadata_path, low_memory=False))
    if batch_column not in meta.columns:
        raise SchemaError(f"batch_column {batch_column!r} is not a metadata column; "
                          f"valid: {list(meta.columns)}")
    refuse_pickled_columns(embeddings_path)
    emb = pd.read_parquet(embeddings_path)
    feats = check_embeddings(emb, dim)
    emb = emb.groupby("well_id", sort=False)[feats].mean()
    is_ctrl = meta["treatment"].isin(list(control_treatments))
    is_gene = meta["gene"].isin(list(genes)) & (meta["perturbation_type"] == "CRISPR")
    absent = sorted(set(genes) - set(meta.loc[is_gene, "gene"]))
    if absent:
        raise ValueError(f"genes {absent} have no CRISPR wells in the metadata")
    if not is_ctrl.any():
        raise ValueError(f"no control wells: no treatment equals any of {list(control_treatments)}")
    keep = meta[is_ctrl | is_gene]
    keep = keep[keep["well_id"].isin(emb.index)]
    if keep.empty:
        raise SchemaError("no well_id of the selected metadata rows appears in the embeddings")
    ctrl = keep["treatment"].isin(list(control_treatments)).to_numpy()
    wells = pd.DataFrame({
        "well_id": keep["well_id"].to_numpy(),
        "batch": keep[batch_column].astype(str).to_numpy(),
        "gene": np.where(ctrl, "control", keep["gene"].astype(str)),
        "guide": np.where(ctrl, "control", keep["treatment"].astype(str)),
        "is_control": ctrl,
    })
    X = emb.loc[wells["well_id"]].to_numpy(dtype=np.float64)
    return X, wells
