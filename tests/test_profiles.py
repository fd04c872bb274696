import pytest

from nearid import profiles
from nearid.runner import list_chapters


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


def test_unknown_chapter():
    with pytest.raises(ValueError, match="valid"):
        profiles.resolve("99", "quick")


def test_bad_device():
    with pytest.raises(ValueError, match="device"):
        profiles.resolve("02", "quick", {"device": "tpu"})


@pytest.mark.parametrize("text,expected", [("seeds=10", ("seeds", 10)), ("lr=1e-3", ("lr", 1e-3)),
                                           ("deltas=[0.0, 0.5]", ("deltas", [0.0, 0.5])),
                                           ("device=cpu", ("device", "cpu"))])
def test_parse_override(text, expected):
    assert profiles.parse_override(text) == expected


def test_parse_override_needs_equals():
    with pytest.raises(ValueError, match="key=value"):
        profiles.parse_override("seeds")
