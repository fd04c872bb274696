import h5py
import numpy as np
import pytest

from nearid.data.shapes3d_mpi3d import load_mpi3d_npz, load_shapes3d_h5


def _write_shapes(path, n=12, images=None, labels=None):
    rng = np.random.default_rng(0)
    if images is None:
        images = rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8)
    if labels is None:
        # real 3dshapes labels are float values (hues in [0, 1), scales 0.75..1.25, ...)
        labels = np.stack([rng.choice(np.linspace(0, 0.9, 10), n), rng.choice(np.linspace(0, 0.9, 10), n),
                           rng.choice(np.linspace(0, 0.9, 10), n), rng.choice(np.linspace(0.75, 1.25, 8), n),
                           rng.choice(np.arange(4.0), n), rng.choice(np.linspace(-30, 30, 15), n)], 1)
    with h5py.File(path, "w") as fh:
        fh["images"] = images
        fh["labels"] = labels
    return images, labels


def test_shapes3d_roundtrip(tmp_path):
    path = tmp_path / "3dshapes.h5"
    images, labels = _write_shapes(path)
    X, F, names = load_shapes3d_h5(path)
    np.testing.assert_array_equal(X, images)
    assert F.dtype == np.int64 and F.shape == (12, 6)
    assert names[0] == "floor_hue" and names[-1] == "orientation"
    for k in range(6):  # indices order like the values
        vals = np.unique(labels[:, k])
        np.testing.assert_array_equal(vals[F[:, k]], labels[:, k])
    Xs, Fs, _ = load_shapes3d_h5(path, n=5, seed=1)
    assert Xs.shape == (5, 64, 64, 3)
    rows = [int(np.flatnonzero((images == x).all(axis=(1, 2, 3)))[0]) for x in Xs]
    np.testing.assert_array_equal(Fs, F[rows])


def test_shapes3d_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_shapes3d_h5(tmp_path / "missing.h5")
    p = tmp_path / "a.h5"
    _write_shapes(p, images=np.zeros((3, 32, 32, 3), np.uint8), labels=np.zeros((3, 6)))
    with pytest.raises(ValueError, match=r"\(N, 64, 64, 3\)"):
        load_shapes3d_h5(p)
    p = tmp_path / "b.h5"
    _write_shapes(p, images=np.zeros((3, 64, 64, 3), np.float32), labels=np.zeros((3, 6)))
    with pytest.raises(ValueError, match="uint8"):
        load_shapes3d_h5(p)
    p = tmp_path / "c.h5"
    _write_shapes(p, images=np.zeros((3, 64, 64, 3), np.uint8), labels=np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"\(N, 6\)"):
        load_shapes3d_h5(p)
    p = tmp_path / "d.h5"
    with h5py.File(p, "w") as fh:
        fh["imgs"] = np.zeros((1, 64, 64, 3), np.uint8)
    with pytest.raises(ValueError, match="no dataset 'images'"):
        load_shapes3d_h5(p)


def test_mpi3d_grid_order(tmp_path):
    sizes = [2, 1, 1, 1, 1, 2, 3]
    n = int(np.prod(sizes))
    images = np.zeros((n, 64, 64, 3), np.uint8)
    images[:, 0, 0, 0] = np.arange(n)  # row id written into a pixel
    path = tmp_path / "mpi3d_toy.npz"
    np.savez(path, images=images)
    X, F, names = load_mpi3d_npz(path, sizes=sizes)
    assert names == ["object_color", "object_shape", "object_size", "camera_height",
                     "background_color", "horizontal_axis", "vertical_axis"]
    np.testing.assert_array_equal(F[:, -1], [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(F[:, 0], [0] * 6 + [1] * 6)
    X2, F2, _ = load_mpi3d_npz(path, n=4, seed=0, sizes=sizes)
    np.testing.assert_array_equal(np.ravel_multi_index(F2.T, sizes), X2[:, 0, 0, 0])


def test_mpi3d_bad_files(tmp_path):
    p = tmp_path / "wrong_count.npz"
    np.savez(p, images=np.zeros((5, 64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="460800"):
        load_mpi3d_npz(p)
    p = tmp_path / "wrong_dtype.npz"
    np.savez(p, images=np.zeros((4, 64, 64, 3), np.float64))
    with pytest.raises(ValueError, match="uint8"):
        load_mpi3d_npz(p, sizes=[2, 2, 1, 1, 1, 1, 1])
    p = tmp_path / "wrong_key.npz"
    np.savez(p, imgs=np.zeros((4, 64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="no array 'images'"):
        load_mpi3d_npz(p)
    with pytest.raises(ValueError, match="7 positive"):
        load_mpi3d_npz(tmp_path / "wrong_dtype.npz", sizes=[4])
