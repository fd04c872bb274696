"""Embedding files: every format read from a file the test writes, keys, and no unpickling."""

import pickle

import h5py
import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.numpy import save_file

from nearid.data.embedding_files import (
    EmbeddingFileError,
    check_matrix,
    list_keys,
    load_embeddings,
    load_layers,
    save_embeddings,
    split_spec,
)

X = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".parquet"])
def test_roundtrip(tmp_path, suffix):
    path = save_embeddings(tmp_path / f"emb{suffix}", X)
    Y = load_embeddings(path)
    np.testing.assert_allclose(Y, X)
    assert Y.shape == (4, 3)
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary left behind


def test_npy_is_memory_mapped(tmp_path):
    np.save(tmp_path / "a.npy", X)
    Y = load_embeddings(tmp_path / "a.npy")
    assert isinstance(Y, np.memmap) and not Y.flags.writeable
    np.testing.assert_array_equal(Y, X)


def test_npz_keys(tmp_path):
    np.savez(tmp_path / "one.npz", whatever=X)
    np.testing.assert_array_equal(load_embeddings(tmp_path / "one.npz"), X)
    np.savez(tmp_path / "many.npz", a=X, b=X + 1)
    with pytest.raises(EmbeddingFileError, match="several arrays"):
        load_embeddings(tmp_path / "many.npz")
    np.testing.assert_array_equal(load_embeddings(tmp_path / "many.npz", key="b"), X + 1)
    np.testing.assert_array_equal(load_embeddings(f"{tmp_path}/many.npz:b"), X + 1)
    with pytest.raises(EmbeddingFileError, match="no array 'c'; it holds: a, b"):
        load_embeddings(f"{tmp_path}/many.npz:c")
    np.savez(tmp_path / "named.npz", embeddings=X, ids=np.arange(4))
    np.testing.assert_array_equal(load_embeddings(tmp_path / "named.npz"), X)


def test_torch_tensor_and_dict(tmp_path):
    torch.save(torch.from_numpy(X), tmp_path / "t.pt")
    np.testing.assert_array_equal(load_embeddings(tmp_path / "t.pt"), X)
    torch.save({"layer1": torch.from_numpy(X), "layer2": torch.from_numpy(X).bfloat16(), "step": 3},
               tmp_path / "d.pt")
    Y = load_embeddings(f"{tmp_path}/d.pt:layer2")
    assert Y.dtype == np.float32  # bfloat16 widened: numpy has no bfloat16
    np.testing.assert_allclose(Y, X, rtol=1e-2)
    with pytest.raises(EmbeddingFileError, match="no array 'nope'; it holds: layer1, layer2"):
        load_embeddings(f"{tmp_path}/d.pt:nope")
    assert list_keys(tmp_path / "d.pt") == ["layer1", "layer2"]  # the int is not an array


def test_safetensors_keys(tmp_path):
    save_file({"l10": X * 10, "l2": X * 2}, str(tmp_path / "s.safetensors"))
    np.testing.assert_array_equal(load_embeddings(f"{tmp_path}/s.safetensors:l2"), X * 2)
    with pytest.raises(EmbeddingFileError, match="several arrays"):
        load_embeddings(tmp_path / "s.safetensors")
    with pytest.raises(EmbeddingFileError, match="no array 'l3'; it holds: l2, l10"):
        load_embeddings(f"{tmp_path}/s.safetensors:l3")


def test_hdf5_datasets(tmp_path):
    with h5py.File(tmp_path / "h.h5", "w") as f:
        f["model/layer1"] = X
        f.create_dataset("packed", data=X * 3, compression="gzip")
    Y = load_embeddings(f"{tmp_path}/h.h5:model/layer1")
    assert isinstance(Y, np.memmap)  # contiguous and uncompressed: mapped, not read
    np.testing.assert_array_equal(Y, X)
    np.testing.assert_array_equal(load_embeddings(f"{tmp_path}/h.h5:packed"), X * 3)
    with pytest.raises(EmbeddingFileError, match="no array 'model/layer2'; it holds: model/layer1, packed"):
        load_embeddings(f"{tmp_path}/h.h5:model/layer2")


def test_parquet_vector_column_and_text(tmp_path):
    pd.DataFrame({"emb": list(X)}).to_parquet(tmp_path / "vec.parquet")
    np.testing.assert_allclose(load_embeddings(tmp_path / "vec.parquet"), X)
    pd.DataFrame({"emb": [X[0], X[1][:2]]}).to_parquet(tmp_path / "ragged.parquet")
    with pytest.raises(EmbeddingFileError, match="differ in length"):
        load_embeddings(tmp_path / "ragged.parquet")
    pd.DataFrame({"a": [1.0, 2.0], "name": ["x", "y"]}).to_parquet(tmp_path / "mixed.parquet")
    with pytest.raises(EmbeddingFileError, match="non-numeric columns"):
        load_embeddings(tmp_path / "mixed.parquet")


def test_layers_in_file_or_natural_order(tmp_path):
    np.savez(tmp_path / "z.npz", embed=X, block0=X + 1, final=X + 2)
    assert list(load_layers(tmp_path / "z.npz")) == ["embed", "block0", "final"]  # the file's order
    save_file({"layer10": X, "layer2": X, "layer1": X}, str(tmp_path / "s.safetensors"))
    assert list(load_layers(tmp_path / "s.safetensors")) == ["layer1", "layer2", "layer10"]  # natural
    torch.save({"b": torch.from_numpy(X), "a": torch.from_numpy(X)}, tmp_path / "d.pt")
    assert list(load_layers(tmp_path / "d.pt")) == ["b", "a"]
    np.savez(tmp_path / "bad.npz", ok=X, flat=X[0])
    with pytest.raises(EmbeddingFileError, match="every layer must be a 2-D numeric array.*flat"):
        load_layers(tmp_path / "bad.npz")
    np.save(tmp_path / "one.npy", X)
    with pytest.raises(EmbeddingFileError, match="--layers needs a file of several arrays"):
        load_layers(tmp_path / "one.npy")


def test_split_spec(tmp_path):
    assert split_spec("a/b.npz:key") == (tmp_path.__class__("a/b.npz"), "key")
    assert split_spec("a/b.h5:group/ds") == (tmp_path.__class__("a/b.h5"), "group/ds")
    assert split_spec("a/b.npy") == (tmp_path.__class__("a/b.npy"), None)
    odd = tmp_path / "odd.npz:name"
    odd.write_bytes(b"")
    assert split_spec(odd) == (odd, None)  # an existing path is never split


def test_file_errors(tmp_path):
    with pytest.raises(EmbeddingFileError, match="no such file"):
        load_embeddings(tmp_path / "missing.npy")
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(EmbeddingFileError, match="unsupported file type '.csv'"):
        load_embeddings(tmp_path / "x.csv")
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(EmbeddingFileError, match="not a valid .npy file"):
        load_embeddings(tmp_path / "bad.npy")
    np.save(tmp_path / "text.npy", np.array(["a", "b"]))
    with pytest.raises(EmbeddingFileError, match="expected numbers"):
        load_embeddings(tmp_path / "text.npy")
    with pytest.raises(EmbeddingFileError, match="unsupported"):
        save_embeddings(tmp_path / "x.txt", X)


def test_links_that_lead_nowhere_are_named(tmp_path):
    (tmp_path / "a.npy").symlink_to(tmp_path / "b.npy")
    (tmp_path / "b.npy").symlink_to(tmp_path / "a.npy")
    with pytest.raises(EmbeddingFileError, match="a loop of symbolic links"):
        load_embeddings(tmp_path / "a.npy")
    (tmp_path / "dangling.npy").symlink_to(tmp_path / "gone.npy")
    with pytest.raises(EmbeddingFileError, match="a symbolic link to .*gone.npy.*does not exist"):
        load_embeddings(tmp_path / "dangling.npy")


def test_complex_data_is_named_as_complex(tmp_path):
    Z = (X + 1j * X).astype(np.complex64)
    np.save(tmp_path / "z.npy", Z)
    with pytest.raises(EmbeddingFileError, match=r"complex numbers \(dtype complex64\); embeddings must be real"):
        load_embeddings(tmp_path / "z.npy")
    np.savez(tmp_path / "z.npz", real=X, imag=Z)
    with pytest.raises(EmbeddingFileError, match="z.npz:imag holds complex numbers"):
        load_layers(tmp_path / "z.npz")
    with h5py.File(tmp_path / "z.h5", "w") as f:
        f["z"] = Z
    with pytest.raises(EmbeddingFileError, match="z.h5:z holds complex numbers"):
        load_embeddings(tmp_path / "z.h5")


def test_random_bytes_npy_is_not_called_pickled(tmp_path):
    (tmp_path / "noise.npy").write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(EmbeddingFileError, match="not a valid .npy file") as err:
        load_embeddings(tmp_path / "noise.npy")
    assert "pickle" not in str(err.value)


# --------------------------------------------------------------------------- no unpickling
class _Payload:
    """Unpickling this creates a file: proof that code ran."""

    marker = None

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _payload(marker) -> bytes:
    _Payload.marker = marker
    return pickle.dumps(_Payload())


def _malicious_files(tmp_path, marker):
    _Payload.marker = marker
    raw = _payload(marker)
    files = {}
    np.save(tmp_path / "evil.npy", np.array([_Payload()], dtype=object), allow_pickle=True)
    files["evil.npy"] = "pickled Python objects"
    np.savez(tmp_path / "evil.npz", embeddings=np.array([_Payload()], dtype=object))
    files["evil.npz"] = "pickled Python objects"
    torch.save({"embeddings": _Payload()}, tmp_path / "evil.pt")
    files["evil.pt"] = "pickled Python objects other than tensors"
    (tmp_path / "raw.pt").write_bytes(raw)
    files["raw.pt"] = "pickled Python objects other than tensors"
    for suffix, what in ((".safetensors", "not a valid .safetensors file"), (".h5", "not a valid HDF5 file"),
                         (".parquet", "not a valid parquet file"), (".npy", "not a valid .npy file"),
                         (".npz", "not a valid .npz file")):
        (tmp_path / f"raw{suffix}").write_bytes(raw)
        files[f"raw{suffix}"] = what
    with h5py.File(tmp_path / "opaque.h5", "w") as f:
        f["embeddings"] = np.void(raw)
    files["opaque.h5"] = "non-numeric data"
    return files


def test_the_payload_really_runs_when_unpickled(tmp_path):
    marker = tmp_path / "ran"
    pickle.loads(_payload(marker))  # what a careless reader would do
    assert marker.exists()


@pytest.mark.parametrize("name", ["evil.npy", "evil.npz", "evil.pt", "raw.pt", "raw.safetensors", "raw.h5",
                                  "raw.parquet", "raw.npy", "raw.npz", "opaque.h5"])
def test_no_reader_unpickles(tmp_path, name):
    marker = tmp_path / "ran"
    message = _malicious_files(tmp_path, marker)[name]
    with pytest.raises(EmbeddingFileError, match=message) as err:
        load_embeddings(tmp_path / name)
    assert not marker.exists(), f"{name}: the pickled payload ran"
    assert str(tmp_path / name) in str(err.value)
    if name.startswith("evil"):
        assert "never unpickles" in str(err.value)


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


def test_an_npz_member_that_would_inflate_past_memory_is_refused_before_reading(tmp_path):
    """A compressed member can declare 8 TB in a few bytes; its header is read, not its data."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10 ** 6, 10 ** 6)})
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("embeddings.npy", header.getvalue() + b"\0" * 4096)
    with pytest.raises(EmbeddingFileError, match=r"bomb.npz:embeddings would take 7450.6 GB in memory"):
        load_embeddings(path)
    with pytest.raises(EmbeddingFileError, match="save it as .npy"):
        load_layers(path)
