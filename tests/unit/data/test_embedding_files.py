"""Embedding files (npy/npz/parquet): read, validate, write."""

import numpy as np
import pandas as pd
import pytest

from nearid.data.embedding_files import EmbeddingFileError, check_matrix, load_embeddings, save_embeddings

X = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".parquet"])
def test_roundtrip(tmp_path, suffix):
    path = save_embeddings(tmp_path / f"emb{suffix}", X)
    Y = load_embeddings(path)
    np.testing.assert_allclose(Y, X)
    assert Y.shape == (4, 3)
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary left behind


def test_npz_keys(tmp_path):
    np.savez(tmp_path / "one.npz", whatever=X)
    np.testing.assert_array_equal(load_embeddings(tmp_path / "one.npz"), X)
    np.savez(tmp_path / "many.npz", a=X, b=X + 1)
    with pytest.raises(EmbeddingFileError, match="several arrays"):
        load_embeddings(tmp_path / "many.npz")
    np.testing.assert_array_equal(load_embeddings(tmp_path / "many.npz", key="b"), X + 1)
    with pytest.raises(EmbeddingFileError, match="no array 'c'"):
        load_embeddings(tmp_path / "many.npz", key="c")
    np.savez(tmp_path / "named.npz", embeddings=X, ids=np.arange(4))
    np.testing.assert_array_equal(load_embeddings(tmp_path / "named.npz"), X)


def test_parquet_vector_column_and_text(tmp_path):
    pd.DataFrame({"emb": list(X)}).to_parquet(tmp_path / "vec.parquet")
    np.testing.assert_allclose(load_embeddings(tmp_path / "vec.parquet"), X)
    pd.DataFrame({"emb": [X[0], X[1][:2]]}).to_parquet(tmp_path / "ragged.parquet")
    with pytest.raises(EmbeddingFileError, match="differ in length"):
        load_embeddings(tmp_path / "ragged.parquet")
    pd.DataFrame({"a": [1.0, 2.0], "name": ["x", "y"]}).to_parquet(tmp_path / "mixed.parquet")
    with pytest.raises(EmbeddingFileError, match="non-numeric columns"):
        load_embeddings(tmp_path / "mixed.parquet")


def test_file_errors(tmp_path):
    with pytest.raises(EmbeddingFileError, match="no such file"):
        load_embeddings(tmp_path / "missing.npy")
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(EmbeddingFileError, match="unsupported file type"):
        load_embeddings(tmp_path / "x.csv")
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(EmbeddingFileError, match="could not read"):
        load_embeddings(tmp_path / "bad.npy")
    np.save(tmp_path / "obj.npy", np.array(["a", "b"]))
    with pytest.raises(EmbeddingFileError, match="expected numbers"):
        load_embeddings(tmp_path / "obj.npy")
    with pytest.raises(EmbeddingFileError, match="unsupported"):
        save_embeddings(tmp_path / "x.txt", X)


def test_check_matrix():
    assert check_matrix(X) is not None
    with pytest.raises(EmbeddingFileError, match="2-D"):
        check_matrix(np.zeros(3))
    with pytest.raises(EmbeddingFileError, match="empty"):
        check_matrix(np.zeros((0, 3)))
    Y = X.copy()
    Y[2, 1] = np.nan
    with pytest.raises(EmbeddingFileError, match="1 NaN or infinite values in 1 rows"):
        check_matrix(Y)
