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
# sha256 of the screens since exp, sin and cos are numpy's in float64 (torch's, pinned on an
# Intel Sapphire Rapids, gave other pixels on an AMD Zen 4) and the blur is sums of shifted
# copies (torch's convolution, whose NNPACK kernel blocks its sums by the CPU's cache sizes,
# had differed between AMD EPYCs and the Sapphire Rapids). One thread, portable kernels;
# pinned on an AMD EPYC Zen 4 (family 25, model 17).
CELLS = {
    "smoke": "16c0538c42803bca5edafa87f61dd88c81d8913445d30332a5e8b34c2cba8cbe",
    "quick": "44b2f172c68f0f50540d926486227958744b5f1f128fbbe533344ba5113e45b8",
    "odd": "4796a7a27db96ea3a1f20b4b063f47e91c084656d553fb6e514f806eb195f36f",
}


@pytest.fixture
def conv_kernels(monkeypatch):
    """Set torch's convolution choices (oneDNN, NNPACK) as a process might have them: the
    simulator must not depend on them, whatever nearid.kernels would set."""
    from nearid import kernels

    before = torch.backends.mkldnn.enabled, torch._C._get_nnpack_enabled()
    monkeypatch.setattr(kernels, "configure_torch", lambda: False)

    def choose(onednn: bool, nnpack: bool = True):
        torch.backends.mkldnn.enabled = onednn
        torch.backends.nnpack.set_flags(nnpack)

    yield choose
    torch.backends.mkldnn.enabled = before[0]
    torch.backends.nnpack.set_flags(before[1])


@pytest.mark.parametrize("key", list(CELLS))
def test_cell_pixels_are_the_pinned_ones(key, conv_kernels, tmp_path):
    conv_kernels(False)
    kw = {"smoke": SMOKE, "quick": QUICK, "odd": ODD}[key]
    X = cs.CellPaintingSimulator(**kw, seed=0).simulate(cache=False).images
    assert _sha(X) == CELLS[key]
    if key != "quick":
        Y = cs.CellPaintingSimulator(**kw, seed=0).simulate(cache=True, cache_dir=tmp_path).images
        assert isinstance(Y, np.memmap) and not Y.flags.writeable
        np.testing.assert_array_equal(X, Y)


@pytest.mark.parametrize("onednn, nnpack", [(True, True), (True, False), (False, False)])
def test_cell_pixels_ignore_the_convolution_kernels(onednn, nnpack, conv_kernels):
    """The blur convolves nothing, so the process's oneDNN and NNPACK settings (which pick
    kernels that sum in CPU-dependent orders) leave every bit alone."""
    conv_kernels(onednn, nnpack)
    for kw, key in ((SMOKE, "smoke"), (ODD, "odd")):
        assert _sha(cs.CellPaintingSimulator(**kw, seed=0).simulate(cache=False).images) == CELLS[key]


def test_blur_is_a_normalised_separable_gaussian():
    """Shifted sums, checked against scipy's Gaussian filter with the same truncation and
    reflection (torch's "reflect" is scipy's "mirror")."""
    from scipy import ndimage

    x = torch.from_numpy(np.random.default_rng(0).random((3, 2, 19, 19), dtype=np.float32))
    for sigma in (0.4, 1.3, 2.6):
        want = ndimage.gaussian_filter(x.numpy().astype(np.float64), sigma=(0, 0, sigma, sigma),
                                       mode="mirror", truncate=max(1, int(np.ceil(3 * sigma))) / sigma)
        np.testing.assert_allclose(cs._gaussian_blur(x, sigma).numpy(), want, atol=2e-6)
    assert cs._gaussian_blur(x, 0.01) is x


def test_cell_file_is_reused_and_keyed(tmp_path, monkeypatch, conv_kernels):
    conv_kernels(False)
    a = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=True, cache_dir=tmp_path)

    def must_not_render(*a, **k):
        raise AssertionError("rendered again")

    with monkeypatch.context() as m:  # only this patch is undone, not the fixture's
        m.setattr(cs, "render_cells_to_file", must_not_render)
        b = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=True, cache_dir=tmp_path)
        conv_kernels(True)  # torch's convolution setting does not decide the pixels: the same file
        b2 = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=True, cache_dir=tmp_path)
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.images, b2.images)
    np.testing.assert_array_equal(a.cell_factors, b.cell_factors)
    c = cs.CellPaintingSimulator(**SMOKE, seed=0, noise_sd=0.03).simulate(cache=True, cache_dir=tmp_path)
    assert not np.array_equal(a.images, c.images)
    assert len(list((tmp_path / "cells").glob("*.npy"))) == 2


@pytest.mark.parametrize("size", [16, 19])
def test_cell_workers_continue_the_noise_stream(size, tmp_path):
    """Two processes, each taking whole chunks; the second starts the noise stream where
    the first one's cells end, so the file equals the one-process render."""
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



def test_the_simulator_leaves_exp_sin_and_cos_to_numpy():
    """torch's exp, sin and cos on the CPU take a vendor-dependent library path (the same bits
    under every ATen capability on one machine, other bits on an AMD Zen 4 than on an Intel
    Sapphire Rapids): the renderer must not call them, in any form."""
    from torch.overrides import TorchFunctionMode

    banned = {torch.exp, torch.sin, torch.cos, torch.Tensor.exp, torch.Tensor.sin, torch.Tensor.cos,
              torch.Tensor.exp_, torch.Tensor.sin_, torch.Tensor.cos_}
    seen = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in banned:
                seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    with Watch():
        X = cs.CellPaintingSimulator(**SMOKE, seed=0).simulate(cache=False).images
    assert not seen and _sha(X) == CELLS["smoke"]
