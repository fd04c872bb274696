"""compare()'s selection of families and measures, the rows each measure sees, its half-sample
interval and its permutation baseline (nearid.align.intervals)."""

import subprocess
import sys

import numpy as np
import pytest

from nearid import align
from nearid.align import intervals


def _rotated(n=800, d=10, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    A = rng.laplace(size=(n, d))
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return A.astype(dtype), (2.0 * A @ Q + 5.0).astype(dtype)


def test_every_measure_through_compare_on_a_rotation():
    A, B = _rotated()
    res = align.compare(A, B, families=(), measures=tuple(align.MEASURES), max_rows=300,
                        measure_params={"batch_size": 100})
    assert res.errors == {} and res.ica_components is None
    for name, spec in align.MEASURES.items():
        assert res.measures[name] == pytest.approx(spec.identical, abs=1e-7), name
    assert res.measure_rows["rsa"] == "on 300 of the 400 fit rows"
    assert res.measure_rows["debiased_cka"] == "on the 400 fit rows"
    assert res.measure_rows["cca"] == "fitted on 400 fit rows, scored on 400 held-out rows"
    d = res.to_dict()
    assert d["measures"] == list(align.MEASURES) and d["rsa"] == res.measures["rsa"]


def test_default_record_is_unchanged():
    A, B = _rotated()
    d = align.compare(A, B, families=("rigid",)).to_dict()
    assert "measures" not in d and "intervals" not in d and d["cka"] == pytest.approx(1.0)


def test_float32_cka_of_an_exact_rotation_is_at_most_1():
    rng = np.random.default_rng(5)
    A = (rng.standard_normal((4000, 64)) + 100).astype(np.float32)
    P = np.eye(64, dtype=np.float32)[rng.permutation(64)]
    res = align.compare(A, A @ P, families=())
    assert res.dtype == "float32" and res.cka <= 1.0 and res.cka == pytest.approx(1.0, abs=1e-6)


def test_intervals_and_baselines():
    rng = np.random.default_rng(1)
    A, C = rng.standard_normal((1200, 8)), rng.standard_normal((1200, 8))
    res = align.compare(A, C, families=("rigid",), measures=("cka", "debiased_cka", "cca"), intervals=True,
                        n_resamples=40, n_permutations=10)
    for name in ("cka", "debiased_cka", "cca", "rigid"):
        low, high = res.intervals[name]
        value = res.measures.get(name, res.errors.get(name))
        assert low <= value <= high and high - low < 0.2, name
    # unrelated data: the value sits inside what shuffled rows give
    mean, low, high = res.baselines["cka"]
    assert low <= res.measures["cka"] <= high and mean == pytest.approx(8 / 608, rel=0.3)
    assert abs(res.baselines["debiased_cka"][0]) < 0.01
    d = res.to_dict()
    assert set(d["intervals"]) == {"rigid", "cka", "debiased_cka", "cca"}
    assert set(d["baselines"]["cca"]) == {"mean", "low", "high"}
    assert "rows shuffled" in str(res)


def test_half_sample_interval_of_a_mean_has_the_standard_error():
    values = np.random.default_rng(2).standard_normal(4000)
    low, high = intervals.mean_interval(values, n_resamples=400)
    assert high - low == pytest.approx(2 * 1.96 / np.sqrt(4000), rel=0.15)


def test_related_data_sit_far_above_the_baseline():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((1000, 6))
    B = A + 0.5 * rng.standard_normal((1000, 6))
    res = align.compare(A, B, families=(), measures=("rsa", "mutual_knn"), intervals=True, n_resamples=20,
                        n_permutations=5)
    for name in ("rsa", "mutual_knn"):
        assert res.intervals[name][0] > res.baselines[name][2], name


def test_bad_measure_arguments():
    A, B = _rotated(n=100)
    with pytest.raises(ValueError, match="unknown measure 'nope'"):
        align.compare(A, B, measures=("nope",))
    with pytest.raises(ValueError, match="unknown measure parameter 'bogus'"):
        align.compare(A, B, measures=("rsa",), measure_params={"bogus": 1})
    with pytest.raises(ValueError, match="max_rows"):
        align.compare(A, B, measures=("rsa",), max_rows=2)


def test_import_and_cka_alone_load_no_scikit_learn():
    code = ("import sys, numpy as np; from nearid import align; "
            "A = np.random.default_rng(0).standard_normal((300, 4)); "
            "r = align.compare(A, A[:, ::-1], families=('rigid', 'permutation', 'linear'), "
            "measures=('cka', 'debiased_cka', 'rsa', 'cca')); "
            "print(round(r.cka, 6), 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1.0", "False"]


def test_grouped_cka_interval_agrees_with_row_halves():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((3000, 6))
    B = A + rng.standard_normal((3000, 6))
    value = align.linear_cka(A, B)
    grouped = intervals._cka_interval(A, B, 400, np.random.default_rng(0), value)
    rows = intervals.half_sample_interval(lambda i: align.linear_cka(A[i], B[i]), 3000, 400,
                                          np.random.default_rng(1), value)
    assert grouped[0] < value < grouped[1]
    assert grouped[1] - grouped[0] == pytest.approx(rows[1] - rows[0], rel=0.3)
    perms = [np.random.default_rng(2).permutation(3000)]
    assert intervals._cka_shuffled(A, B, perms)[0] == pytest.approx(align.linear_cka(A, B[perms[0]]), rel=1e-10)


def test_shortcut_baselines_equal_the_measure_on_shuffled_rows():
    from nearid.align import measures

    rng = np.random.default_rng(7)
    A = rng.standard_normal((500, 5)) + 3.0
    B = A @ rng.standard_normal((5, 4)) + rng.standard_normal((500, 4))
    perms = [rng.permutation(500) for _ in range(3)]
    for name, fn in (("cka", measures.linear_cka), ("debiased_cka", measures.debiased_cka)):
        assert intervals.SHUFFLED[name](A, B, perms) == pytest.approx([fn(A, B[p]) for p in perms], rel=1e-9)
