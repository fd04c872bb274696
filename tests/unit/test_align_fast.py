"""compare(): the streamed fast path equals the float64 reference path, takes any array type,
validates its inputs with messages that name the side, and copies no input whole."""

import tracemalloc
import warnings

import numpy as np
import pytest
import torch

from nearid import align
from nearid.align import engine


def planted(n=3000, d=40, k=6, seed=0, dtype=np.float32, offset=0.0, spread=None, dead=0, dup=False, d_b=None):
    """Two noisy linear images of the same k Laplace factors (B possibly of another width)."""
    rng = np.random.default_rng(seed)
    Z = rng.laplace(size=(n, k))
    A = Z @ rng.normal(size=(k, d))
    B = Z @ rng.normal(size=(k, d_b or d))
    A += 0.1 * A.std() * rng.standard_normal(A.shape)
    B += 0.1 * B.std() * rng.standard_normal(B.shape)
    if spread is not None:  # anisotropic columns: variances spanning 10^spread
        A *= np.logspace(0, -spread, d)
    A += offset * A.std() * rng.normal(size=d)
    B += offset * B.std() * rng.normal(size=B.shape[1])
    if dead:
        A[:, :dead] = 0.5
        B[:, -dead:] = -2.0
    if dup:
        A[:, 5] = A[:, 7]
        B[:, 1] = B[:, 3]
    return A.astype(dtype), B.astype(dtype)


CASES = {
    "float32": dict(),
    "float64": dict(dtype=np.float64),
    "large offset": dict(offset=300.0),
    "dead and duplicate columns": dict(dead=3, dup=True),
    "different widths": dict(d_b=25),
    "ill-conditioned": dict(spread=5.0),
    "integers": dict(dtype=np.int16),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_path_equals_reference(case):
    kw = dict(CASES[case])
    A, B = planted(**kw)
    if case == "integers":
        A, B = planted(dtype=np.float64)
        A, B = (100 * A).astype(np.int16), (100 * B).astype(np.int16)
    fast = align.compare(A, B, seed=1)
    ref = align.compare(A, B, seed=1, reference=True)
    assert fast.ica_converged == (True, True) and ref.ica_converged == (True, True)
    assert fast.ica_components == ref.ica_components
    for fam in align.FAMILIES:
        assert abs(fast.errors[fam] - ref.errors[fam]) < 1e-3, (case, fam, fast.errors, ref.errors)
        gap = np.abs(fast.row_errors[fam] - ref.row_errors[fam])
        if fam == "ica":  # two FastICA runs from differently signed whitened axes stop within
            # FastICA's tolerance of the same rotation, not at the same point
            assert np.mean(gap > 1e-3) < 0.01 and gap.max() < 0.02, (case, np.sort(gap)[-5:])
        else:
            assert gap.max() < 1e-3, (case, fam, gap.max())
    assert fast.cka == pytest.approx(ref.cka, abs=1e-5)
    # the efficiency is a ratio of error differences: errors within 1e-3 bound it this much
    gap = ref.errors["permutation"] - ref.errors["rigid"]
    assert fast.ica_efficiency == pytest.approx(ref.ica_efficiency, abs=2e-3 * (1 + abs(ref.ica_efficiency)) / gap)
    assert fast.n_fit == ref.n_fit and fast.n_eval == ref.n_eval


def test_precision_is_chosen_from_the_data():
    A, B = planted()
    assert align.compare(A, B).dtype == "float32"  # float32 in, well conditioned: float32 sums
    assert align.compare(A, B, dtype="float64").dtype == "float64"
    assert align.compare(A.astype(np.float64), B).dtype == "float64"
    A, B = planted(spread=5.0)
    assert align.compare(A, B).dtype == "float64"  # float32 sums cannot resolve A: redone in float64
    assert align.compare(A, B, families=("rigid", "permutation"), cka=False).dtype == "float32"


def test_float32_values_near_1e30_switch_to_float64_and_say_so():
    # finite float32 values whose float32 sums of products overflow (issue 36, item 8): the
    # comparison is computed in float64 instead of failing with a message blaming the input
    A, B = planted(n=600, d=8)
    A, B = (A.astype(np.float64) * 1e30).astype(np.float32), (B.astype(np.float64) * 1e30).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = align.compare(A, B, seed=1)
    ref = align.compare(A.astype(np.float64) / 1e30, B.astype(np.float64) / 1e30, seed=1)
    assert res.dtype == "float64" and any("overflow float32" in note for note in res.fallbacks)
    for fam in ("permutation", "rigid", "linear"):
        assert res.errors[fam] == pytest.approx(ref.errors[fam], rel=1e-6)
    assert res.cka == pytest.approx(ref.cka, rel=1e-6)


def test_ordinary_float32_data_keep_the_float32_path():
    A, B = planted()
    res = align.compare(A, B)
    assert res.dtype == "float32" and not any("overflow" in note for note in res.fallbacks)
    assert not engine._float32_overflows(1e6, engine.BLOCK_ELEMENTS, 4096)
    assert engine._float32_overflows(1e30, engine.MIN_BLOCK_ROWS, 8)


def test_ica_subsample_matches_reference():
    A, B = planted(n=6000)
    fast = align.compare(A, B, ica_max_rows=1000)
    ref = align.compare(A, B, ica_max_rows=1000, reference=True)
    assert fast.ica_converged == (True, True)
    assert abs(fast.errors["ica"] - ref.errors["ica"]) < 1e-3
    assert fast.ica_components == ref.ica_components


def test_accepts_torch_tensors_of_any_dtype():
    A, B = planted()
    base = align.compare(A, B)
    for tA, tB in [(torch.from_numpy(A), torch.from_numpy(B)),
                   (torch.from_numpy(A).requires_grad_(), torch.from_numpy(B)),
                   (torch.from_numpy(A).double(), torch.from_numpy(B).double())]:
        res = align.compare(tA, tB)
        for fam in align.FAMILIES:
            assert res.errors[fam] == pytest.approx(base.errors[fam], abs=1e-4)
    half = align.compare(torch.from_numpy(A).bfloat16(), torch.from_numpy(B).half())
    assert half.dtype == "float32" and half.errors["linear"] == pytest.approx(base.errors["linear"], abs=0.02)


def test_memory_mapped_input_is_never_copied_whole(tmp_path, monkeypatch):
    A, B = planted(n=80_000, d=200, k=8)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    Am = np.load(tmp_path / "a.npy", mmap_mode="r")
    Bm = np.load(tmp_path / "b.npy", mmap_mode="r")
    expected = align.compare(A, B)
    monkeypatch.setattr(engine, "BLOCK_ELEMENTS", 1 << 18)
    tracemalloc.start()
    res = align.compare(Am, Bm)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.5 * A.nbytes, f"compare allocated {peak / 1e6:.0f} MB for a {A.nbytes / 1e6:.0f} MB input"
    for fam in align.FAMILIES:
        assert res.errors[fam] == pytest.approx(expected.errors[fam], abs=1e-6)


def test_result_repr_and_dict():
    A, B = planted()
    res = align.compare(A, B)
    text = repr(res)
    assert text.startswith("AlignmentResult(A 40-d -> B 40-d; 1500 fit rows, 1500 held-out rows; float32)")
    assert "rigid=" in text and "cka=" in text and "row_errors" not in text and "array(" not in text
    d = res.to_dict()
    assert set(d) == {"permutation", "rigid", "linear", "ica", "ica_efficiency", "cka", "n_fit", "n_eval",
                      "dim_a", "dim_b", "ica_components", "ica_variance"}
    assert d["ica_components"] == list(res.ica_components)
    assert str(res).startswith("A: 40-d, B: 40-d; fitted on 1500 rows")
    assert res.seconds is not None and res.seconds > 0


def test_families_subset_and_cka_only():
    A, B = planted()
    res = align.compare(A, B, families=("rigid",))
    assert list(res.errors) == ["rigid"] and np.isnan(res.ica_efficiency) and res.ica_components is None
    only = align.compare(A, B, families=())
    assert only.errors == {} and only.cka == pytest.approx(res.cka)
    assert "linear CKA" in str(only) and "rigid" not in str(only)
    with pytest.raises(ValueError, match="unknown family 'affine'"):
        align.compare(A, B, families=("affine",))


@pytest.mark.parametrize("side", ["A", "B"])
def test_constant_input_names_its_side(side):
    A, B = planted(n=200, d=5)
    if side == "A":
        A = np.full_like(A, 3.0)
    else:
        B = np.full_like(B, -1.0)
    for reference in (False, True):
        with pytest.raises(ValueError, match=f"^{side} is constant"):
            align.compare(A, B, reference=reference)


@pytest.mark.parametrize("side", ["A", "B"])
def test_nan_names_its_side_and_rows(side):
    A, B = planted(n=200, d=5)
    X = A if side == "A" else B
    X[17, 2] = np.nan
    X[40, 0] = np.inf
    with pytest.raises(ValueError, match=f"^{side} contains 2 NaN or infinite values in 2 rows \\(first row 17\\)"):
        align.compare(A, B)


def test_bad_shapes_and_rows():
    A, B = planted(n=200, d=5)
    with pytest.raises(ValueError, match="same number of rows"):
        align.compare(A, B[:150])
    with pytest.raises(ValueError, match="B must be a 2-D array"):
        align.compare(A, B[:, 0])
    with pytest.raises(ValueError, match="too few rows"):
        align.compare(A[:8], B[:8])
    with pytest.raises(ValueError, match="real numbers"):
        align.compare(A, B.astype(complex))
    with pytest.raises(ValueError, match="'dtype' got 'float16'; allowed: one of None, 'float64'"):
        align.compare(A, B, dtype="float16")


def test_progress_bar_only_when_asked(capsys, monkeypatch):
    A, B = planted(n=400, d=8)
    align.compare(A, B, progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(engine, "PROGRESS_DELAY", 0.0)
    align.compare(A, B, progress=True)
    err = capsys.readouterr().err
    assert "%" in err and "left" in err


def test_progress_counts_the_planned_work(monkeypatch):
    """The bar advances by estimated work (blocks, decompositions, FastICA iterations), and
    what the pieces add up to is the plan (corrected once each side's number of components
    is known), so its remaining time is not a guess from block counts."""
    seen = {}

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.n = total, 0.0

        def update(self, n):
            self.n += n

        def set_description_str(self, text, **kwargs):
            seen.setdefault("descriptions", []).append(text)

        def refresh(self):
            pass

        def close(self):
            seen["closed"] = (self.n, self.total)

    replan = engine._Progress.replan

    def spy(self, remaining):
        if remaining == 0.0:
            seen["before_end"] = (self.bar.n, self.bar.total)
        replan(self, remaining)

    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr(engine._Progress, "replan", spy)
    A, B = planted(n=3000, d=24)
    align.compare(A, B, progress=True, ica_max_rows=align.ICA_MAX_ROWS, ica_max_iter=align.ICA_MAX_ITER)
    done, total = seen["before_end"]
    assert done == pytest.approx(total, rel=0.05)
    assert seen["closed"][0] == pytest.approx(seen["closed"][1])  # 100% at the end
    assert any("FastICA" in d and "iteration" in d for d in seen["descriptions"])


def test_latent_diameter_equals_pdist():
    from scipy.spatial.distance import pdist

    Z = np.random.default_rng(3).normal(size=(500, 7)) + 1e3
    assert align.latent_diameter(Z) == pytest.approx(np.quantile(pdist(Z), 0.99), rel=1e-9)
