"""The benchmark's agreement check at a small size: the plain scipy/scikit-learn pipeline
(and cka-pytorch) against nearid.align.compare on the same planted pair."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from nearid import align

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("align_benchmark", ROOT / "benchmarks" / "align_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pair(bench):
    return bench.related_embeddings(4000, 48, 6)


def test_split_is_the_one_compare_uses(bench, pair):
    A, B = pair
    fit, ev = bench.split(len(A))
    res = align.compare(A, B, families=("linear",))
    assert res.n_fit == len(fit) and res.n_eval == len(ev)


def test_plain_pipeline_agrees_with_compare(bench, pair):
    A, B = pair
    ours = align.compare(A, B, ica_max_rows=align.ICA_MAX_ROWS, ica_max_iter=align.ICA_MAX_ITER)  # as the CLI
    plain = bench.plain_pipeline(A, B, ica_max_rows=align.ICA_MAX_ROWS, ica_max_iter=align.ICA_MAX_ITER)
    assert ours.ica_converged == (True, True)
    assert plain["ica_components"] == list(ours.ica_components)
    for key in ("permutation", "rigid", "linear", "ica"):
        assert abs(plain[key] - ours.errors[key]) < 1e-3, (key, plain[key], ours.errors[key])
    assert plain["cka"] == pytest.approx(ours.cka, abs=1e-6)


def test_cka_pytorch_differs_only_by_its_estimator(bench, pair):
    pytest.importorskip("cka_pytorch")  # the optional `bench` extra
    A, B = pair
    ours = align.compare(A, B, families=())
    theirs = bench.cka_pytorch(A, B, batch_size=2000)  # the 2000 fit rows in one batch
    # one batch: cka-pytorch's unbiased-HSIC CKA of the fit rows, which we recompute here
    fit = np.sort(bench.split(len(A))[0])
    X, Y = A[fit].astype(np.float64), B[fit].astype(np.float64)
    assert theirs == pytest.approx(_unbiased_cka(X, Y), abs=1e-4)
    # the biased (Kornblith) and unbiased estimators differ by O(1/n) here, not more
    assert abs(theirs - ours.cka) < 0.02


def _unbiased_cka(X, Y):
    """CKA from the unbiased HSIC estimator (Song et al. 2012) with linear kernels."""
    def hsic(K, L):
        n = len(K)
        K, L = K.copy(), L.copy()
        np.fill_diagonal(K, 0)
        np.fill_diagonal(L, 0)
        return (np.trace(K @ L) + K.sum() * L.sum() / ((n - 1) * (n - 2)) - 2 * (K @ L).sum() / (n - 2)) / (n * (n - 3))

    K, L = X @ X.T, Y @ Y.T
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def test_wide_case_at_a_small_size(bench, tmp_path, capsys):
    """The wide case's machinery (planted pair, the command under /usr/bin/time -v, the
    README row), at a size that takes seconds; the real size is measured by hand."""
    assert bench.CASES["wide"] == (20_000, 4_096, 256, 0.3)
    out = tmp_path / "wide.json"
    assert bench.main(["--case", "wide", "--rows", "1200", "--dim", "64", "--factors", "12",
                       "--json", str(out)]) == 0
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    res = report["cli"]["result"]
    assert report["cli"]["peak_gb"] > 0.05 and report["cli"]["wall_seconds"] > 0
    assert res["ica_max_components"] == align.ICA_MAX_COMPONENTS and res["ica_cap_bound"] == [False, False]
    # the only note allowed: a FastICA fit still moving at the cap, refitted by the stabilised step
    assert all("stabilised step" in note for note in res["fallbacks"])
    assert set(res["timings"]) >= {"cross-products", "ica"}
    assert "README row:" in text and "| `nearid align`, 1,200 x 64" in text
