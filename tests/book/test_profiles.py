import pytest

from nearid.book import profiles
from nearid.book.params import InvalidParameterError
from nearid.book.runner import list_chapters


def test_every_notebook_has_a_parameter_block(root):
    chapters = list_chapters(root)
    assert [c.key for c in chapters][:2] == ["01_definitions", "02_isometric_dgp"]


@pytest.mark.parametrize("key", list(profiles.CHAPTERS))
def test_profiles_share_keys_and_types(key):
    blocks = profiles.CHAPTERS[key]
    assert set(blocks) == set(profiles.PROFILES)
    names = set(blocks["quick"])
    for name in profiles.PROFILES:
        assert set(blocks[name]) == names, f"{key}/{name} keys differ from quick"
        profiles.resolve(key, name, dict(blocks[name]))  # every value passes validation


def test_resolve_accepts_number_prefix_and_overrides():
    p = profiles.resolve("02", "smoke", {"seeds": 5, "lr": 1})
    assert p.seeds == 5 and p.lr == 1.0 and isinstance(p.lr, float)


def test_unknown_profile_lists_valid():
    with pytest.raises(ValueError, match="smoke, quick, full"):
        profiles.resolve("02", "fast")


def test_unknown_parameter_lists_valid():
    with pytest.raises(KeyError, match="valid: .*seeds"):
        profiles.resolve("02", "quick", {"sedes": 3})


@pytest.mark.parametrize("override", [{"seeds": "3"}, {"seeds": 2.5}, {"deltas": 0.1},
                                      {"deltas": ["a"]}, {"seeds": True}])
def test_wrong_types_fail(override):
    with pytest.raises(TypeError):
        profiles.resolve("02", "quick", override)


def test_every_parameter_declares_what_it_accepts():
    for key, blocks in profiles.CHAPTERS.items():
        assert set(profiles.CONSTRAINTS[key]) == set(blocks["quick"]), key


# Each bad value fails in resolve(), before any work, naming the parameter, the value and
# what is allowed.
BAD_VALUES = [
    ("04", {"fit_fraction": 1.5}, "'fit_fraction' got 1.5; allowed: a number in (0, 1)"),
    ("04", {"fit_fraction": 0}, "'fit_fraction' got 0; allowed: a number in (0, 1)"),
    ("04", {"pairs": []}, "'pairs' got []; allowed: a list of at least 1 element"),
    ("04", {"resnet_train": 20000, "mnist_train": 1000}, "resnet_train must not exceed mnist_train"),
    ("02", {"seeds": 0}, "'seeds' got 0; allowed: an int in [2, 1000]"),
    ("02", {"seeds": 1}, "'seeds' got 1; allowed: an int in [2, 1000]"),
    ("02", {"seeds": 1_000_000_000}, "'seeds' got 1000000000; allowed: an int in [2, 1000]"),
    ("02", {"epochs": -3}, "'epochs' got -3; allowed: an int in [1, 100000]"),
    ("02", {"deltas": []}, "'deltas' got []; allowed: a list of at least 1 element"),
    ("02", {"deltas": [0.2, 1.0]}, "element 1 is 1.0; allowed: a list of at least 1 element, without repeats, "
             "each a number in [0, 1)"),
    ("01", {"noise_levels": []}, "'noise_levels' got []; allowed: a list of at least 1 element"),
    ("01", {"ica_sources": ["cauchy"]}, "element 0 is 'cauchy'"),
    ("03", {"alphas": []}, "'alphas' got []; allowed: a list of at least 1 element"),
    ("03", {"alphas": [0.0, 1.5]}, "element 1 is 1.5; allowed: a list of at least 1 element, without repeats, "
             "each a number in [0, 1]"),
    ("03", {"digits": [3, 11]}, "element 1 is 11"),
    ("05", {"datasets": ["nope"]}, "element 0 is 'nope'; allowed: a list of at least 1 element, without repeats, "
             "each one of 'shapes3d', "
             "'mpi3d', 'falcor3d', 'isaac3d'"),
    ("05", {"image_size": 48}, "'image_size' got 48; allowed: one of 8, 16, 32"),
    ("05", {"datasets": ["mpi3d"]}, "heatmap_dataset must be one of the datasets run"),
    ("05", {"hyper": {"vae": {}}}, "'hyper' got"),
    ("06", {"n_splits": 9}, "n_splits must not exceed n_batches"),
    ("06", {"rxrx_embeddings": "no/such/file.parquet"}, "'rxrx_embeddings' got 'no/such/file.parquet'"),
    ("02", {"device": "tpu"}, "'device' got 'tpu'; allowed: one of 'auto', 'cpu', 'cuda'"),
]


@pytest.mark.parametrize("chapter,override,message", BAD_VALUES)
def test_bad_values_name_parameter_value_and_what_is_allowed(chapter, override, message):
    with pytest.raises(InvalidParameterError) as info:
        profiles.resolve(chapter, "quick", override)
    assert message in str(info.value)


def test_values_are_normalised():
    p = profiles.resolve("04", "smoke", {"fit_fraction": 1 / 3, "lr": 1})
    assert p.lr == 1.0 and isinstance(p.lr, float)


def test_unknown_chapter():
    with pytest.raises(ValueError, match="valid"):
        profiles.resolve("99", "quick")




@pytest.mark.parametrize("text,expected", [("seeds=10", ("seeds", 10)), ("lr=1e-3", ("lr", 1e-3)),
                                           ("deltas=[0.0, 0.5]", ("deltas", [0.0, 0.5])),
                                           ("device=cpu", ("device", "cpu")),
                                           ("dry_run=true", ("dry_run", True)), ("dry_run=False", ("dry_run", False))])
def test_parse_override(text, expected):
    assert profiles.parse_override(text) == expected


def test_parse_override_needs_equals():
    with pytest.raises(ValueError, match="key=value"):
        profiles.parse_override("seeds")
