"""The seed parameter has an upper bound (issue 36, item 9): -p seed=4294967296 is refused
before any work with the allowed range, and a 400-digit number is refused in one short line
instead of an OverflowError traceback."""

import pytest

from nearid.book import profiles
from nearid.book.params import MAX_SEED
from nearid.constraints import Interval, InvalidParameterError


@pytest.mark.parametrize("chapter", ["01", "02", "05"])
def test_a_seed_beyond_the_range_is_refused_with_the_range(chapter):
    with pytest.raises(InvalidParameterError, match=r"'seed' got 4294967296; allowed: an int in \[0, 2147483647\]"):
        profiles.resolve(chapter, "smoke", {"seed": 2**32})
    assert profiles.resolve(chapter, "smoke", {"seed": MAX_SEED})["seed"] == MAX_SEED
    assert MAX_SEED + 10_000 < 2**32 - 1, "seeds derived from it (seed + k) still fit numpy and scikit-learn"


def test_a_400_digit_number_is_refused_in_one_short_line():
    for kind in (int, float):
        with pytest.raises(InvalidParameterError) as info:
            Interval(kind, 0, 10).check("seed", 10**400)
        message = str(info.value)
        assert "allowed:" in message and len(message) < 200 and "(401 characters)" in message


def test_int_bounds_are_written_exactly():
    assert Interval(int, 0, 2**31 - 1).describe() == "an int in [0, 2147483647]"
    assert Interval(int, 2, 1000).describe() == "an int in [2, 1000]"
    assert Interval(float, 0, 1, closed="neither").describe() == "a number in (0, 1)"
    assert Interval(float, 0.5).describe() == "a number >= 0.5"
