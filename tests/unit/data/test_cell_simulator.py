"""Cell-painting simulator: determinism, layout, sparse gene effects, batch effects."""

import numpy as np
import pytest
import torch

from nearid.data.cell_simulator import (
    CHANNELS,
    CONTROL,
    FACTORS,
    GENES,
    CellPaintingSimulator,
    aggregate_wells,
    effect_matrix,
    moved_factors,
    render_cells,
    to_rgb,
)

torch.set_num_threads(1)
SMALL = dict(image_size=16, n_batches=2, controls_per_batch=3, wells_per_guide=1, cells_per_well=2)


def test_deterministic_and_seed_dependent():
    a = CellPaintingSimulator(**SMALL, seed=3).simulate()
    b = CellPaintingSimulator(**SMALL, seed=3).simulate()
    c = CellPaintingSimulator(**SMALL, seed=4).simulate()
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.cell_factors, b.cell_factors)
    assert not np.allclose(a.images, c.images)


def test_layout_mirrors_table3():
    scr = CellPaintingSimulator(**SMALL, seed=0).simulate()
    n_guides = sum(g for g, _ in GENES.values())
    assert n_guides == 15  # 3 genes x 1 guide + 2 genes x 6 guides
    assert scr.n_wells == 2 * (3 + n_guides * 1)
    assert scr.images.shape == (scr.n_wells * 2, len(CHANNELS), 16, 16) and len(CHANNELS) >= 4
    assert scr.images.dtype == np.float32 and np.isfinite(scr.images).all()
    w = scr.wells
    assert (w.groupby("batch")["is_control"].sum() == 3).all()
    assert set(w.loc[w.gene == "MTOR", "guide"]) == {f"MTOR_guide_{k}" for k in range(1, 7)}
    assert (w.loc[w.is_control, "gene"] == CONTROL).all()
    assert len(FACTORS) >= 20


def test_each_gene_moves_only_its_factors():
    pairs, eff = effect_matrix()
    for (gene, _), row in zip(pairs, eff):
        moved = set(np.flatnonzero(row))
        assert moved == set(moved_factors(gene))
        assert 0 < len(moved) <= 6  # sparse
    scr = CellPaintingSimulator(**SMALL, seed=0).simulate()
    ctrl = scr.wells.is_control.to_numpy()
    assert np.all(scr.effects[ctrl] == 0)
    for gene in GENES:
        rows = (scr.wells.gene == gene).to_numpy()
        untouched = np.setdiff1d(np.arange(len(FACTORS)), moved_factors(gene))
        assert np.all(scr.effects[rows][:, untouched] == 0)
        assert np.all(np.abs(scr.effects[rows][:, moved_factors(gene)]) > 0)


def test_gene_shift_shows_in_the_cells():
    """With many cells, PLK1 cells differ from controls on PLK1's factors, not on others."""
    sim = CellPaintingSimulator(image_size=16, n_batches=1, controls_per_batch=1, wells_per_guide=1,
                                cells_per_well=400, well_sd=0.0, seed=1)
    scr = sim.simulate()
    wf = scr.well_factors
    plk1 = np.flatnonzero(scr.wells.gene == "PLK1")
    delta = wf[plk1].mean(0) - wf[0]
    moved = moved_factors("PLK1")
    rest = np.setdiff1d(np.arange(len(FACTORS)), moved)
    assert np.abs(delta[moved]).min() > 0.3
    assert np.abs(delta[rest]).max() < 0.25


def test_batch_effects_change_pixels_not_factors():
    rng = np.random.default_rng(0)
    f = np.zeros((4, len(FACTORS)))
    none = {"gain": np.ones((2, 4)), "background": np.zeros((2, 4)),
            "gradient": np.zeros((2, 2)), "blur": np.zeros(2)}
    strong = {"gain": np.full((2, 4), 2.0), "background": np.full((2, 4), 0.1),
              "gradient": np.zeros((2, 2)), "blur": np.zeros(2)}
    a = render_cells(f, [0, 0, 1, 1], none, 16, np.random.default_rng(1), noise_sd=0.0)
    b = render_cells(f, [0, 0, 1, 1], strong, 16, np.random.default_rng(1), noise_sd=0.0)
    np.testing.assert_allclose(b, 2.0 * a + 0.1, rtol=1e-5, atol=1e-5)
    blurred = dict(none, blur=np.array([0.0, 1.5]))
    c = render_cells(f, [0, 0, 1, 1], blurred, 16, np.random.default_rng(1), noise_sd=0.0)
    np.testing.assert_allclose(c[:2], a[:2], atol=1e-6)
    assert np.abs(np.diff(c[2:], axis=-1)).mean() < np.abs(np.diff(a[2:], axis=-1)).mean()
    del rng


def test_aggregate_wells_and_rgb():
    v = np.array([[1.0, 2], [3, 4], [10, 10]])
    np.testing.assert_allclose(aggregate_wells(v, [0, 0, 1]), [[2, 3], [10, 10]])
    with pytest.raises(ValueError, match="no cells"):
        aggregate_wells(v, [0, 0, 2])
    rgb = to_rgb(np.random.default_rng(0).random((2, 4, 8, 8)))
    assert rgb.shape == (2, 8, 8, 3) and rgb.min() >= 0 and rgb.max() <= 1


def test_bad_parameters():
    with pytest.raises(ValueError, match="image_size"):
        CellPaintingSimulator(image_size=8)
    with pytest.raises(ValueError, match="well_sd"):
        CellPaintingSimulator(well_sd=-1)
    with pytest.raises(ValueError, match="unknown factors"):
        effect_matrix({"X": (1, {"not_a_factor": 1.0})})
