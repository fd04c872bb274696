import numpy as np
import pytest

from nearid.data.procedural import (FACTOR_GRIDS, check_factors, grid_size, make_dataset,
                                    render, sample_factors, traversal)

PAPER_GRIDS = {  # DESIGN.md / the datasets' own documentation
    "shapes3d": [10, 10, 10, 8, 4, 15],
    "mpi3d": [4, 4, 2, 3, 3, 40, 40],
    "falcor3d": [5, 6, 6, 6, 6, 6, 6],
    "isaac3d": [3, 8, 5, 4, 4, 4, 6, 4, 4],
}


@pytest.mark.parametrize("name", list(PAPER_GRIDS))
def test_factor_grids_match_the_real_datasets(name):
    assert list(FACTOR_GRIDS[name].values()) == PAPER_GRIDS[name]


def test_grid_sizes():
    assert grid_size("shapes3d") == 480_000
    assert grid_size("mpi3d") == 460_800
    assert grid_size("falcor3d") == 233_280
    assert grid_size("isaac3d") == 737_280


@pytest.mark.parametrize("name", list(PAPER_GRIDS))
def test_make_dataset_shapes_dtypes_and_determinism(name):
    X, F, names = make_dataset(name, 12, image_size=16, seed=3)
    assert X.shape == (12, 16, 16, 3) and X.dtype == np.uint8
    assert F.shape == (12, len(PAPER_GRIDS[name])) and F.dtype == np.int64
    assert names == list(FACTOR_GRIDS[name])
    assert (F >= 0).all() and (F < np.array(PAPER_GRIDS[name])).all()
    assert len({tuple(r) for r in F}) == 12  # distinct grid points
    X2, F2, _ = make_dataset(name, 12, image_size=16, seed=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(F, F2)
    X3, F3, _ = make_dataset(name, 12, image_size=16, seed=4)
    assert not np.array_equal(F, F3)


@pytest.mark.parametrize("name", list(PAPER_GRIDS))
def test_every_factor_changes_the_image(name):
    """Along each factor, with the others fixed, consecutive images differ, and the extremes
    differ visibly (mean absolute pixel change > 0.5 grey levels)."""
    for k, factor in enumerate(FACTOR_GRIDS[name]):
        imgs = traversal(name, factor, image_size=32).astype(float)
        assert len(imgs) == PAPER_GRIDS[name][k]
        steps = np.abs(np.diff(imgs, axis=0)).mean(axis=(1, 2, 3))
        assert (steps > 0).all(), f"{name}.{factor}: some neighbouring values render identically"
        assert np.abs(imgs[-1] - imgs[0]).mean() > 0.5, f"{name}.{factor} barely changes the image"


def test_render_is_a_function_of_the_factors_only():
    F = sample_factors("isaac3d", 5, seed=0)
    a = render("isaac3d", F, 16)
    b = render("isaac3d", F[::-1], 16)[::-1]  # batch order and neighbours do not matter
    np.testing.assert_array_equal(a, b)


def test_bad_inputs_are_clear():
    with pytest.raises(ValueError, match="unknown dataset"):
        make_dataset("dsprites", 4)
    with pytest.raises(ValueError, match="shape"):
        check_factors("shapes3d", np.zeros((2, 5), int))
    with pytest.raises(ValueError, match="0..3"):
        check_factors("shapes3d", np.array([[0, 0, 0, 0, 4, 0]]))
    with pytest.raises(ValueError, match="integer"):
        check_factors("shapes3d", np.zeros((1, 6)))
    with pytest.raises(ValueError, match="n must lie"):
        sample_factors("isaac3d", 0)
    with pytest.raises(ValueError, match="image_size"):
        render("mpi3d", np.zeros((1, 7), int), 4)
    with pytest.raises(ValueError, match="unknown factor"):
        traversal("mpi3d", "colour")
