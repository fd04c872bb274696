"""Generated data sets on disk (nearid.data.cache): made once, complete or absent, read-only
memory-mapped; and the generators that use it give the pixels they always gave."""

import hashlib
import socket

import numpy as np
import pytest
import torch

from nearid.data import cache as dc
from nearid.data import cell_simulator as cs
from nearid.data import procedural as pr

torch.set_num_threads(1)


def _sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _filler(value, calls):
    def fill(writer):
        calls.append(1)
        rows = np.arange(writer.shape[0])
        block = np.broadcast_to(np.asarray(value, dtype=writer.dtype), writer.shape).copy()
        block[:, 0] = rows  # rows in a scrambled order, to exercise put()
        order = np.random.default_rng(0).permutation(rows)
        writer.put(order[:3], block[order[:3]])
        writer.put(order[3:], block[order[3:]])
    return fill


# --------------------------------------------------------------------------- the cache
def test_made_once_then_reused_read_only(tmp_path):
    calls = []
    a = dc.cached_array("toy", {"v": 1}, (7, 3), np.float32, _filler(2.5, calls), version={"code": "x"}, root=tmp_path)
    b = dc.cached_array("toy", {"v": 1}, (7, 3), np.float32, _filler(9.0, calls), version={"code": "x"}, root=tmp_path)
    assert calls == [1]  # the second call read the file
    assert isinstance(b, np.memmap) and not b.flags.writeable
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(b[:, 0], np.arange(7))
    assert (b[:, 1:] == 2.5).all()
    with pytest.raises(ValueError):
        b[0, 0] = 1
    files = list((tmp_path / "toy").glob("*.npy"))
    assert len(files) == 1 and files[0].with_suffix(".json").is_file()


def test_other_parameters_code_or_environment_make_other_files(tmp_path):
    calls = []
    kw = dict(shape=(4, 2), dtype=np.uint8, root=tmp_path)
    dc.cached_array("toy", {"seed": 0}, fill=_filler(1, calls), version={"code": "x"}, **kw)
    dc.cached_array("toy", {"seed": 1}, fill=_filler(1, calls), version={"code": "x"}, **kw)
    dc.cached_array("toy", {"seed": 0}, fill=_filler(1, calls), version={"code": "y"}, **kw)
    assert len(calls) == 3 and len(list((tmp_path / "toy").glob("*.npy"))) == 3


def test_a_killed_run_leaves_no_file_that_is_read(tmp_path):
    calls = []

    def dies(writer):
        writer.write(0, np.ones((2, 2), np.uint8))
        raise KeyboardInterrupt  # killed half way

    with pytest.raises(KeyboardInterrupt):
        dc.cached_array("toy", {}, (4, 2), np.uint8, dies, version={}, root=tmp_path)
    assert not list((tmp_path / "toy").glob("*.npy")) and not list((tmp_path / "toy").glob(".*.tmp"))
    # a temporary file left by a process that was killed outright (SIGKILL): never read,
    # and removed by the next maker once its process is gone
    path = dc.array_path("toy", dc.array_key("toy", {}, (4, 2), np.uint8, {}), tmp_path)
    stale = path.with_name(f".{path.name}.{socket.gethostname()}.999999999.deadbeef.tmp")
    stale.write_bytes(b"\x93NUMPY half a file")
    out = dc.cached_array("toy", {}, (4, 2), np.uint8, _filler(5, calls), version={}, root=tmp_path)
    assert calls == [1] and (out[:, 1] == 5).all() and not stale.exists()


def test_a_file_of_another_shape_is_made_again(tmp_path):
    calls = []
    path = dc.array_path("toy", dc.array_key("toy", {}, (4, 2), np.uint8, {}), tmp_path)
    path.parent.mkdir(parents=True)
    np.save(path, np.zeros((3, 2), np.uint8))  # e.g. written by hand
    with pytest.warns(dc.DataCacheWarning, match=r"holds \(3, 2\) uint8, expected \(4, 2\) uint8; made again"):
        out = dc.cached_array("toy", {}, (4, 2), np.uint8, _filler(7, calls), version={}, root=tmp_path)
    assert calls == [1] and out.shape == (4, 2)


def test_cache_root_and_choices(tmp_path, monkeypatch):
    monkeypatch.setenv(dc.CACHE_ENV, str(tmp_path))
    assert dc.cache_root() == tmp_path
    assert dc.use_disk(None, dc.CACHE_MIN_BYTES) and not dc.use_disk(None, dc.CACHE_MIN_BYTES - 1)
    assert dc.use_disk(True, 1) and not dc.use_disk(False, 10**12)
    monkeypatch.setenv(dc.MIN_MB_ENV, "0")
    assert dc.use_disk(None, 1)
    monkeypatch.setenv(dc.MIN_MB_ENV, "lots")
    with pytest.raises(ValueError, match="megabytes"):
        dc.use_disk(None, 1)
    monkeypatch.delenv(dc.MIN_MB_ENV)
    with pytest.raises(ValueError, match="cache"):
        dc.use_disk("yes", 1)
    with pytest.raises(ValueError, match="workers"):
        dc.check_workers(0, 10, 1)
    monkeypatch.setenv(dc.WORKERS_ENV, "3")
    assert dc.check_workers(None, 10, 1) == 3 and dc.check_workers(None, 2, 1) == 2


# --------------------------------------------------------------------------- chapter 05
# sha256 of the pixels today's generator gave before it rendered into files (commit d28d7c5):
# (n, image_size, seed, supersample) -> hash. 4000 images of 32 px is the quick profile.
OLD_PROCEDURAL = {
    ("shapes3d", 4000, 32, 0, 1): "eac512382ea442e00e331ab113a484806de57a92e9b80bcf6e6a204941bd4336",
    ("mpi3d", 4000, 32, 0, 1): "81e8c773f21a71af81e1bc6e86ffa2adefadb5077bc911fdc0c005d15d277ef5",
    ("falcor3d", 4000, 32, 0, 1): "53be34f4a9823336fb912ea7e2dec7510ccae32d40e234369d5703bd8854534f",
    ("isaac3d", 4000, 32, 0, 1): "02194c46f4a20e580b7aaa5d80930fbf1e426c6efa990ebb187838e1ca2d54ef",
    ("shapes3d", 40, 16, 3, 2): "b527540d490348cb791353efc43e038e4b1ffc2993c2e79d73b8e03c62930fe4",
    ("mpi3d", 40, 16, 3, 2): "b7f04e6eafc91408c9aac786e1494a430654b54b114dcb49f670e818ba425ec4",
    ("falcor3d", 40, 16, 3, 2): "a510b5b54729433e64df43b3554527a872f758b959dfad536a2390978b5a3f04",
    ("isaac3d", 40, 16, 3, 2): "f7daf288b34e39df7613140e5bf499989c67b05fa77f014a7650f2456300fc80",
    ("shapes3d", 24, 24, 1, 3): "a7d6221d475c93752d85f0edf0edc2718898d47275c8f1a6b4ed3dc8a3efe930",
    ("falcor3d", 24, 24, 1, 3): "e67da5a9f1aeeb44a9972cb39ca2ca7435c55bdf539b861d16968c9bcfc7c7ec",
}


@pytest.mark.parametrize("key", list(OLD_PROCEDURAL), ids=lambda k: "-".join(map(str, k)))
def test_procedural_pixels_are_those_of_the_old_generator(key, tmp_path):
    name, n, size, seed, ss = key
    X = pr.make_dataset(name, n, size, seed, ss, cache=False)[0]
    assert _sha(X) == OLD_PROCEDURAL[key]
    if n <= 40:
        Y = pr.make_dataset(name, n, size, seed, ss, cache=True, cache_dir=tmp_path)[0]
        assert isinstance(Y, np.memmap) and not Y.flags.writeable
        np.testing.assert_array_equal(X, Y)


def test_procedural_file_is_reused_and_keyed(tmp_path, monkeypatch):
    X, F, names = pr.make_dataset("isaac3d", 30, 16, 0, 1, cache=True, cache_dir=tmp_path)

    def must_not_render(*a, **k):
        raise AssertionError("rendered again")

    monkeypatch.setattr(pr, "render_to_file", must_not_render)
    X2, F2, names2 = pr.make_dataset("isaac3d", 30, 16, 0, 1, cache=True, cache_dir=tmp_path)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(F, F2)
    assert names == names2
    monkeypatch.undo()
    X3 = pr.make_dataset("isaac3d", 30, 16, 1, 1, cache=True, cache_dir=tmp_path)[0]  # another seed
    assert not np.array_equal(X, X3)
    assert len(list((tmp_path / "procedural").glob("*.npy"))) == 2


def test_procedural_workers_write_the_same_file(tmp_path):
    X = pr.make_dataset("mpi3d", 50, 16, 2, 2, cache=False)[0]
    Y = pr.make_dataset("mpi3d", 50, 16, 2, 2, cache=True, cache_dir=tmp_path, workers=2)[0]
    np.testing.assert_array_equal(X, Y)


# --------------------------------------------------------------------------- chapter 06
SMOKE = dict(image_size=16, n_batches=3, controls_per_batch=10, wells_per_guide=1, cells_per_well=2)
QUICK = dict(image_size=32, n_batches=6, controls_per_batch=48, wells_per_guide=3, cells_per_well=12)
ODD = dict(image_size=19, n_batches=2, controls_per_batch=3, wells_per_guide=1, cells_per_well=2)
# sha256 of the screens today's simulator gave (commit d28d7c5), one thread, with torch's
# convolutions in oneDNN (on) or not (off, as the book runs: nearid.setup turns it off)
OLD_CELLS = {
    ("smoke", False): "9ed4d1408d46c1a156c55c18f1f4ed099c97d731918965e0f63fc7f2c0a16dd0",
    ("quick", False): "bfb9dfded201ed33f45c381db7725eb987ec32464583f27621b76e0afed3deca",
    ("odd", False): "76a637d854e286327298a7f5a84bd315f05bc9e9ac2123e324dbac1b68968a29",
    ("smoke", True): "c1c487ecaadab6578affeaaa424d1dcf38c007766add34e668d360563429dbeb",
    ("odd", True): "74e34ff765988f299ccd86a27de49326d5538d081087b989c614abe71097efbc",
}


@pytest.fixture
def onednn(monkeypatch):
    """Choose torch's convolution kernels as native kernels let a process do: the simulator
    then follows the process's setting (under portable kernels it always runs oneDNN off)."""
    from nearid import kernels

    before = torch.backends.mkldnn.enabled
    monkeypatch.setattr(kernels, "configure_torch", lambda: False)
    yield lambda on: setattr(torch.backends.mkldnn, "enabled", on)
    torch.backends.mkldnn.enabled = before


def test_under_portable_kernels_the_pixels_ignore_the_process_setting():
    """A process that has not trained yet still has oneDNN on; the screen must be the one a
    chapter (oneDNN off, nearid.kernels) renders, or a task would change its own inputs."""
    from nearid import kernels

    if kernels.native_requested() or not kernels.supported()[0]:
        pytest.skip("native kernels: the process's setting is the policy")
    before = torch.backends.mkldnn.enabled
    try:
        torch.backends.mkldnn.enabled = True
        X = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=False).images
        assert _sha(X) == OLD_CELLS[("smoke", False)]
    finally:
        torch.backends.mkldnn.enabled = before


@pytest.mark.parametrize("key", list(OLD_CELLS), ids=lambda k: f"{k[0]}-onednn_{'on' if k[1] else 'off'}")
def test_cell_pixels_are_those_of_the_old_simulator(key, onednn, tmp_path):
    onednn(key[1])
    kw = {"smoke": SMOKE, "quick": QUICK, "odd": ODD}[key[0]]
    X = cs.CellPaintingSimulator(**kw, seed=0).simulate(cache=False).images
    assert _sha(X) == OLD_CELLS[key]
    if key[0] != "quick":
        Y = cs.CellPaintingSimulator(**kw, seed=0).simulate(cache=True, cache_dir=tmp_path).images
        assert isinstance(Y, np.memmap) and not Y.flags.writeable
        np.testing.assert_array_equal(X, Y)


def test_cell_file_is_reused_and_keyed(tmp_path, monkeypatch, onednn):
    onednn(False)
    a = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=True, cache_dir=tmp_path)

    def must_not_render(*a, **k):
        raise AssertionError("rendered again")

    with monkeypatch.context() as m:  # only this patch is undone, not the fixture's
        m.setattr(cs, "render_cells_to_file", must_not_render)
        b = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=True, cache_dir=tmp_path)
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.cell_factors, b.cell_factors)
    c = cs.CellPaintingSimulator(**SMOKE, seed=0, noise_sd=0.03).simulate(cache=True, cache_dir=tmp_path)
    assert not np.array_equal(a.images, c.images)
    onednn(True)  # torch's other convolution kernels: another file
    cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=True, cache_dir=tmp_path)
    assert len(list((tmp_path / "cells").glob("*.npy"))) == 3


@pytest.mark.parametrize("size", [16, 19])
def test_cell_workers_continue_the_noise_stream(size, tmp_path, onednn):
    """Two processes, each taking whole chunks; the second starts the noise stream where
    the first one's cells end, so the file equals the one-process render."""
    onednn(False)
    scr = cs.CellPaintingSimulator(image_size=size, n_batches=2, controls_per_batch=3, wells_per_guide=1,
                                   cells_per_well=3)
    wells, _ = scr.layout()
    n = len(wells) * 3
    rng = np.random.default_rng(1)
    factors = rng.normal(size=(n, len(cs.FACTORS)))
    batch = np.repeat(wells["batch"].to_numpy(), 3)
    fx = scr.sample_batch_effects(rng)
    job = cs._plan(factors, batch, fx, size, np.random.default_rng(2), 0.02, None, chunk=32)
    whole = cs._render_all(job)
    np.testing.assert_array_equal(whole, cs.render_cells(factors, batch, fx, size, np.random.default_rng(2),
                                                         chunk=32))
    job = cs._plan(factors, batch, fx, size, np.random.default_rng(2), 0.02, None, chunk=32)
    out = dc.cached_array("cells-test", {"size": size}, whole.shape, np.float32,
                          lambda w: cs.render_cells_to_file(job, w, workers=2), version={}, root=tmp_path)
    np.testing.assert_array_equal(whole, out)

