"""Every data file reader refuses pickled objects: fed a malicious pickle, nothing in it runs.

The payload, when unpickled, creates a marker file (``open(marker, "w")``); each test feeds
it to one reader, expects an error that says what is wrong, and checks the marker is absent.
(The readers of `nearid align` have their own tests in test_embedding_files.py.)
"""

import gzip
import pickle

import numpy as np
import pandas as pd
import pytest

from nearid.data import mnist, rxrx
from nearid.data.shapes3d_mpi3d import load_mpi3d_npz, load_shapes3d_h5


class Payload:
    """Unpickling this calls open(marker, "w"): a stand-in for any code an attacker names."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "payload-ran"
    # the payload is live: unpickling it without restriction does create the marker
    pickle.loads(pickle.dumps(Payload(path))).close()
    assert path.exists()
    path.unlink()
    return path


def test_mnist_package_pickle_with_code_is_refused(tmp_path, marker, monkeypatch):
    evil = tmp_path / "mnist.pkl.gz"
    arrays = (np.zeros((2, 784), np.float32), np.zeros(2, np.int64))
    with gzip.open(evil, "wb") as fh:
        pickle.dump((arrays, arrays, (arrays[0], Payload(marker))), fh, protocol=4)
    monkeypatch.setattr(mnist, "_package_pickle", lambda: evil)
    with pytest.raises(mnist.DataError, match=r"refusing to unpickle \S*open"):
        mnist.provision_mnist(tmp_path / "data")
    assert not marker.exists()
    assert not mnist.raw_folder(tmp_path / "data").exists()


def test_mnist_unpickler_still_reads_plain_arrays():
    import io

    data = (np.arange(6, dtype=np.float32).reshape(2, 3), [np.array([1, 2])])
    back = mnist.load_array_pickle(io.BytesIO(pickle.dumps(data, protocol=4)))
    np.testing.assert_array_equal(back[0], data[0])
    np.testing.assert_array_equal(back[1][0], data[1][0])


def test_mpi3d_npz_with_object_array_is_refused(tmp_path, marker):
    path = tmp_path / "mpi3d.npz"
    np.savez(path, images=np.array([Payload(marker)], dtype=object))
    with pytest.raises(ValueError, match="not a plain array"):
        load_mpi3d_npz(path, sizes=[1, 1, 1, 1, 1, 1, 1])
    assert not marker.exists()


def test_mpi3d_pickle_named_npz_is_refused(tmp_path, marker):
    path = tmp_path / "mpi3d.npz"
    path.write_bytes(pickle.dumps({"images": Payload(marker)}))
    with pytest.raises(ValueError, match="not an .npz archive"):
        load_mpi3d_npz(path, sizes=[1, 1, 1, 1, 1, 1, 1])
    assert not marker.exists()


def test_shapes3d_pickle_named_h5_is_refused(tmp_path, marker):
    path = tmp_path / "3dshapes.h5"
    path.write_bytes(pickle.dumps({"images": Payload(marker)}))
    with pytest.raises(ValueError, match="not an HDF5 file"):
        load_shapes3d_h5(path)
    assert not marker.exists()


def _metadata(tmp_path):
    meta = pd.DataFrame({"well_id": ["w1", "w2"], "experiment_name": ["e", "e"], "plate": [1, 1],
                         "address": ["A01", "A02"], "gene": ["PLK1", ""],
                         "treatment": ["PLK1_guide_1", "CRISPR_control"],
                         "perturbation_type": ["CRISPR", "COMPOUND"]})
    path = tmp_path / "metadata.csv"
    meta.to_csv(path, index=False)
    return path


def test_rxrx_parquet_with_pickled_extension_type_is_refused(tmp_path, marker):
    import pyarrow as pa
    import pyarrow.parquet as pq

    payload = pickle.dumps(Payload(marker))

    class PickledType(pa.ExtensionType):  # writes what pyarrow's old PyExtensionType wrote
        def __init__(self):
            super().__init__(pa.float64(), "arrow.py_extension_type")

        def __arrow_ext_serialize__(self):
            return payload

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return pickle.loads(serialized)

    column = pa.ExtensionArray.from_storage(PickledType(), pa.array([0.5, 1.5]))
    path = tmp_path / "emb.parquet"
    pq.write_table(pa.table({"well_id": ["w1", "w2"], "feature_0": column}), path)
    with pytest.raises(rxrx.SchemaError, match="pickled Python objects"):
        rxrx.load_rxrx3_core(path, _metadata(tmp_path), genes=("PLK1",))
    assert not marker.exists()


def test_rxrx_pickle_named_parquet_is_refused(tmp_path, marker):
    path = tmp_path / "emb.parquet"
    path.write_bytes(pickle.dumps(pd.DataFrame({"well_id": [Payload(marker)]})))
    with pytest.raises(rxrx.SchemaError, match="not a Parquet file"):
        rxrx.load_rxrx3_core(path, _metadata(tmp_path), genes=("PLK1",))
    assert not marker.exists()
