"""The library's constraint classes and the two ways its entry points use them."""

import pytest

from nearid.constraints import (
    ComponentRule,
    Deferred,
    Interval,
    InvalidParameterError,
    ListOf,
    Options,
    OrNone,
    check_args,
    validate_params,
)

COUNT = Interval(int, 1, 8)


@validate_params(kind=Options(("a", "b"), noun="kind"), count=COUNT, kinds=ListOf(Options(("a", "b"), noun="kind")))
def _fn(kind="a", count=2, kinds=("a",), rest=None):
    return kind, count, kinds, rest


def test_validate_params_checks_what_is_given_by_position_or_keyword():
    assert _fn("b", 3, rest=[1]) == ("b", 3, ("a",), [1])
    assert _fn.constraints["count"] is COUNT
    with pytest.raises(InvalidParameterError, match=r"^unknown kind 'c'; valid: a, b$"):
        _fn("c")
    with pytest.raises(InvalidParameterError, match=r"^unknown kind 'c'; valid: a, b$"):
        _fn(kinds=["a", "c"])  # a listed name says which element is unknown
    with pytest.raises(ValueError, match=r"'count' got 9; allowed: an int in \[1, 8\]"):
        _fn(count=9)
    with pytest.raises(TypeError):  # a call that does not fit: the function's own error
        _fn(nonsense=1)


def test_validate_params_refuses_constraints_for_parameters_that_do_not_exist():
    with pytest.raises(TypeError, match="no parameters"):
        validate_params(missing=COUNT)(lambda x: x)


def test_or_none_deferred_and_the_component_rule():
    rule = OrNone(ComponentRule())
    assert rule.check("n", None) is None and rule.check("n", 0.5) == 0.5 and rule.check("n", "all") == "all"
    for bad in (0, 1.5, True, "some"):
        with pytest.raises(InvalidParameterError, match="allowed: None or a share of the variance"):
            rule.check("n", bad)
    later = Deferred(lambda: COUNT)
    assert later.constraint is COUNT and later.check("x", 3) == 3 and later.describe() == COUNT.describe()
    check_args({"x": later, "y": COUNT}, {"x": 1})  # names without a value are not checked
    with pytest.raises(InvalidParameterError):
        check_args({"x": later}, {"x": 0})
