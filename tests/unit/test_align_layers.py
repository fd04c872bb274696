"""compare_layers(): every layer of A against every layer of B, one shared split."""

import numpy as np
import pandas as pd
import pytest
import torch

from nearid import align


def layer_stack(n=1200, widths=(12, 16, 10), seed=0):
    """Layers that drift from one set of factors: layer i mixes factor block i with noise."""
    rng = np.random.default_rng(seed)
    Z = np.random.default_rng(99).laplace(size=(n, 12))  # the same 4 blocks of 3 factors in every model
    layers = {}
    for i, w in enumerate(widths):
        F = Z[:, 3 * i:3 * i + 3]
        X = F @ rng.normal(size=(3, w)) + 0.05 * rng.normal(size=(n, w))
        layers[f"layer{i}"] = X.astype(np.float32)
    return layers


def test_grid_shape_labels_and_attrs():
    A = layer_stack(seed=0)
    B = layer_stack(seed=1, widths=(9, 14))
    df = align.compare_layers(A, B, metric="linear")
    assert isinstance(df, pd.DataFrame) and df.shape == (3, 2)
    assert list(df.index) == ["layer0", "layer1", "layer2"] and list(df.columns) == ["layer0", "layer1"]
    assert df.index.name == "A layer" and df.columns.name == "B layer"
    assert df.attrs["metric"] == "linear" and df.attrs["lower_is_better"] is True
    assert df.attrs["n_fit"] == 600 and df.attrs["n_eval"] == 600
    # the same factors sit in layer i of both models (through different linear maps): the
    # diagonal is where a linear map aligns them, off it there is nothing to align
    assert df.loc["layer0", "layer0"] < 0.1 < df.loc["layer0", "layer1"]
    assert df.loc["layer1", "layer1"] < 0.1 < df.loc["layer1", "layer0"]


@pytest.mark.parametrize("metric", ["permutation", "rigid", "linear", "ica", "cka"])
def test_each_cell_is_compare_of_that_pair(metric):
    A = layer_stack(seed=0, widths=(8, 12))
    B = layer_stack(seed=1, widths=(10, 8))
    df = align.compare_layers(A, B, metric=metric, seed=2)
    for a, XA in A.items():
        for b, XB in B.items():
            res = align.compare(XA, XB, seed=2, ica_max_rows=align.ICA_MAX_ROWS, ica_max_iter=align.ICA_MAX_ITER)
            want = res.cka if metric == "cka" else res.errors[metric]
            assert df.loc[a, b] == pytest.approx(want, abs=1e-6), (metric, a, b)
    if metric == "cka":
        assert df.attrs["lower_is_better"] is False and (df.to_numpy() <= 1 + 1e-9).all()


@pytest.mark.parametrize("metric", ["rigid", "ica"])
def test_same_width_layers_give_compare_to_the_last_digit(metric):
    """One code path per number: with layers of one width (the chapter's language models)
    a cell is the very number compare() gives for that pair and family."""
    A = layer_stack(seed=0, widths=(12, 12, 12))
    B = layer_stack(seed=1, widths=(12, 12))
    df = align.compare_layers(A, B, metric=metric, seed=2)
    for a, XA in A.items():
        for b, XB in B.items():
            protocol = dict(seed=2, ica_max_rows=align.ICA_MAX_ROWS, ica_max_iter=align.ICA_MAX_ITER)
            alone = align.compare(XA, XB, families=(metric,), **protocol)
            table = align.compare(XA, XB, **protocol)  # every family and CKA, as Table 1
            assert table.dtype == alone.dtype == df.attrs["dtype"] == "float32"
            assert df.loc[a, b] == alone.errors[metric] == table.errors[metric], (a, b)


def test_accepts_torch_and_reports_mismatched_rows():
    A = {k: torch.from_numpy(v) for k, v in layer_stack(seed=0).items()}
    B = layer_stack(seed=1)
    df = align.compare_layers(A, B, metric="linear")
    assert df.shape == (3, 3) and np.isfinite(df.to_numpy()).all()
    B["short"] = B["layer0"][:100]
    with pytest.raises(ValueError, match="row counts differ: .*B layer 'short': 100"):
        align.compare_layers(A, B)


def test_a_measure_per_layer_pair():
    A = layer_stack()
    df = align.compare_layers(A, A, metric="debiased_cka")
    assert np.allclose(np.diag(df.to_numpy()), 1.0) and df.attrs["lower_is_better"] is False
    assert df.attrs["measure_rows"].endswith("fit rows")
    dist = align.compare_layers(A, A, metric="procrustes")
    assert np.allclose(np.diag(dist.to_numpy()), 0.0, atol=1e-7) and dist.attrs["lower_is_better"] is True


def test_bad_arguments():
    A = layer_stack()
    with pytest.raises(ValueError, match="unknown metric 'svd'"):
        align.compare_layers(A, A, metric="svd")
    with pytest.raises(ValueError, match="non-empty mapping"):
        align.compare_layers({}, A)
    bad = dict(A)
    bad["layer1"] = np.full_like(bad["layer1"], 2.0)
    with pytest.raises(ValueError, match="^A layer 'layer1' is constant"):
        align.compare_layers(bad, A)
