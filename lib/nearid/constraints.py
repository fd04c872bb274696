"""Allowed values of arguments, declared once and checked before any work.

scikit-learn's ``_parameter_constraints`` is the model: each argument names what it accepts
(an interval, a set of options, a non-empty list of such values, an existing file), and a
bad value fails at once with a message naming the argument, the bad value and what is
allowed, instead of minutes into training. The same classes serve the library's entry points
(:func:`validate_params` on a function, :func:`check_params` in an estimator's ``fit``) and
the book's chapter profiles (``nearid.book.profiles``), so a rule is written once. Checks
that involve two parameters (``resnet_train <= mnist_train``) are :class:`Rule` objects.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


class InvalidParameterError(ValueError, TypeError):
    """An argument (or a chapter parameter) has a value it does not allow (a ValueError and a
    TypeError, like scikit-learn's, so callers catching either see it)."""


class Constraint(ABC):
    """What one parameter accepts: ``check`` returns the (normalised) value or raises."""

    @abstractmethod
    def check(self, name: str, value: Any) -> Any:
        """The value, normalised (an int given for a float becomes a float), or an error."""

    @abstractmethod
    def describe(self) -> str:
        """What is allowed, in words, for error messages."""

    def fail(self, name: str, value: Any) -> None:
        raise InvalidParameterError(f"parameter {name!r} got {shown(value)}; allowed: {self.describe()}")


def shown(value: Any, limit: int = 80) -> str:
    """A value as an error message shows it: its repr, cut after ``limit`` characters (a
    400-digit number or a 100 kB string is not echoed whole)."""
    return cut(repr(value), limit)


def cut(text: str, limit: int = 80) -> str:
    """``text`` cut after ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class Interval(Constraint):
    """An int or float between ``low`` and ``high`` (None = unbounded); ``closed`` says
    which ends belong to it: "both", "left", "right" or "neither"."""

    def __init__(self, kind: type, low: float | None = None, high: float | None = None,
                 closed: str = "both"):
        if kind not in (int, float):
            raise ValueError("kind must be int or float")
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"bad closed={closed!r}")
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def check(self, name, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.fail(name, value)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(name, value)
        if self.kind is int and not isinstance(value, numbers.Integral) and not float(value).is_integer():
            self.fail(name, value)
        try:  # an int of 400 digits has no float: it is out of range, not an error of ours
            number = int(value) if self.kind is int else float(value)
        except OverflowError:
            self.fail(name, value)
        lo_ok = self.low is None or (number >= self.low if self.closed in ("both", "left") else number > self.low)
        hi_ok = self.high is None or (number <= self.high if self.closed in ("both", "right") else number < self.high)
        if not (lo_ok and hi_ok):
            self.fail(name, value)
        return number

    def describe(self) -> str:
        noun = "an int" if self.kind is int else "a number"
        low, high = _bound(self.low), _bound(self.high)
        lo_in = self.closed in ("both", "left")
        hi_in = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            return f"{noun} in {'[' if lo_in else '('}{low}, {high}{']' if hi_in else ')'}"
        if self.low is not None:
            return f"{noun} {'>=' if lo_in else '>'} {low}"
        if self.high is not None:
            return f"{noun} {'<=' if hi_in else '<'} {high}"
        return noun


def _bound(value: float | None) -> str:
    """An interval's end in words: an int exactly (2147483647, not 2.14748e+09), else ``:g``."""
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:g}"


class Options(Constraint):
    """One of a fixed set of values; ``values`` may be a callable, so that option lists that
    live in a heavy module (model pairs, datasets) are looked up only when checked. With a
    ``noun`` the error reads "unknown <noun> 'x'; valid: a, b" (also inside a :class:`ListOf`),
    the library's wording for a name looked up in a registry."""

    def __init__(self, values: Iterable[Any] | Callable[[], Iterable[Any]], noun: str | None = None):
        self._values = values
        self.noun = noun

    def fail(self, name: str, value: Any) -> None:
        if self.noun is not None:
            raise InvalidParameterError(f"unknown {self.noun} {shown(value)}; valid: {', '.join(map(str, self.values))}")
        super().fail(name, value)

    @property
    def values(self) -> tuple:
        return tuple(self._values() if callable(self._values) else self._values)

    def check(self, name, value):
        if isinstance(value, (list, dict)) or value not in self.values:
            self.fail(name, value)
        return value

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


class Boolean(Constraint):
    def check(self, name, value):
        if not isinstance(value, bool):
            self.fail(name, value)
        return value

    def describe(self) -> str:
        return "True or False"


class InstanceOf(Constraint):
    """An instance of ``kind`` (a settings record, say): refused with the record's name."""

    def __init__(self, kind: type):
        self.kind = kind

    def check(self, name, value):
        if not isinstance(value, self.kind):
            self.fail(name, value)
        return value

    def describe(self) -> str:
        return f"a {self.kind.__name__} record"


class Text(Constraint):
    """A string; ``validator`` (raising ValueError) narrows it, ``what`` describes it."""

    def __init__(self, validator: Callable[[str], Any] | None = None, what: str = "a string",
                 empty: bool = True):
        self.validator, self.what, self.empty = validator, what, empty

    def check(self, name, value):
        if not isinstance(value, str) or (not self.empty and not value):
            self.fail(name, value)
        if self.validator is not None:
            try:
                self.validator(value)
            except ValueError:
                self.fail(name, value)
        return value

    def describe(self) -> str:
        return self.what


class FileOrEmpty(Constraint):
    """"" (not given) or the path of an existing file; ``content`` (raising ValueError with
    the reason) looks inside it, ``what`` says what it must hold. Looking costs a file's
    header, and a file of the wrong kind then fails before any work, not minutes later."""

    def __init__(self, content: Callable[[str], Any] | None = None, what: str = "a file"):
        self.content, self.what = content, what

    def check(self, name, value):
        if not isinstance(value, str) or (value and not os.path.isfile(value)):
            self.fail(name, value)
        if value and self.content is not None:
            try:
                self.content(value)
            except ValueError as exc:
                why = cut(" ".join(str(exc).split()), 300)
                raise InvalidParameterError(f"parameter {name!r} got {shown(value)}: {why}; "
                                            f"allowed: {self.describe()}") from None
        return value

    def describe(self) -> str:
        return f'"" or the path of an existing file ({self.what})' if self.content else '"" or the path of an existing file'


class ListOf(Constraint):
    """A list whose every element satisfies ``item``; ``lengths`` (a set) or ``min_len``
    bound its length, ``unique`` forbids repeats."""

    def __init__(self, item: Constraint, min_len: int = 1, lengths: Iterable[int] | None = None,
                 unique: bool = False):
        self.item, self.min_len, self.unique = item, min_len, unique
        self.lengths = None if lengths is None else tuple(sorted(lengths))

    def check(self, name, value):
        if not isinstance(value, (list, tuple)):
            self.fail(name, value)
        if self.lengths is not None and len(value) not in self.lengths:
            self.fail(name, value)
        if self.lengths is None and len(value) < self.min_len:
            self.fail(name, value)
        if self.unique and len(set(map(repr, value))) != len(value):
            self.fail(name, value)
        out = []
        for i, v in enumerate(value):
            try:
                out.append(self.item.check(f"{name}[{i}]", v))
            except InvalidParameterError:
                if getattr(self.item, "noun", None):
                    raise
                raise InvalidParameterError(f"parameter {name!r} got {shown(value)}: element {i} is {shown(v)}; "
                                            f"allowed: {self.describe()}") from None
        return out

    def describe(self) -> str:
        if self.lengths is not None:
            size = f"a list of {' or '.join(map(str, self.lengths))} elements"
        elif self.min_len > 0:
            size = f"a list of at least {self.min_len} element{'s' if self.min_len > 1 else ''}"
        else:
            size = "a list (may be empty)"
        return f"{size}{', without repeats' if self.unique else ''}, each {self.item.describe()}"


class Mapping(Constraint):
    """A dict whose keys satisfy ``keys`` and whose values are dicts (model knobs).

    ``knobs`` (a dict, or a function returning one, looked up when first used) names, for each
    key, the knobs it takes and what each accepts: an unknown knob or an out-of-range value is
    refused before any work, not when the model is built (or, for a huge value, never)."""

    def __init__(self, keys: Constraint, knobs=None):
        self.keys, self._knobs = keys, knobs

    @property
    def knobs(self) -> dict | None:
        return self._knobs() if callable(self._knobs) else self._knobs

    def check(self, name, value):
        if not isinstance(value, dict):
            self.fail(name, value)
        knobs = self.knobs
        out = {}
        for k, v in value.items():
            try:
                self.keys.check(f"{name} key", k)
            except InvalidParameterError:
                self.fail(name, value)
            if not isinstance(v, dict):
                self.fail(name, value)
            if knobs is None:
                out[k] = dict(v)
                continue
            allowed = knobs.get(k, {})
            for knob, x in v.items():
                if knob not in allowed:
                    accepted = ", ".join(allowed) or "none"
                    raise InvalidParameterError(f"parameter {name!r}: {k!r} has no knob {knob!r}; "
                                                f"allowed for {k!r}: {accepted}")
            out[k] = {knob: allowed[knob].check(f"{name}[{k!r}][{knob!r}]", x) for knob, x in v.items()}
        return out

    def describe(self) -> str:
        text = f"a dict whose keys are {self.keys.describe()} and whose values are dicts"
        knobs = self.knobs
        if knobs:
            listed = "; ".join(f"{k}: " + ", ".join(f"{n} ({c.describe()})" for n, c in ks.items())
                               for k, ks in knobs.items() if ks)
            text += f" of knobs ({listed})"
        return text


class ComponentRule(Constraint):
    """How many whitened components to keep (:func:`nearid.ica.choose_components`): a share
    of the fit rows' variance in (0, 1] (a float), a count >= 1 (an int) or "all"."""

    def check(self, name, value):
        if isinstance(value, str) and value == "all":
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.fail(name, value)
        if isinstance(value, numbers.Integral):
            if value < 1:
                self.fail(name, value)
            return int(value)
        if not 0 < float(value) <= 1:
            self.fail(name, value)
        return float(value)

    def describe(self) -> str:
        return 'a share of the variance in (0, 1] (a float), a count >= 1 (an int), or "all"'


class OrNone(Constraint):
    """None (the argument's "not set": no cap, automatic) or what ``inner`` allows."""

    def __init__(self, inner: Constraint):
        self.inner = inner

    def check(self, name, value):
        if value is None:
            return None
        try:
            return self.inner.check(name, value)
        except InvalidParameterError:
            if getattr(self.inner, "noun", None):
                raise
            self.fail(name, value)

    def describe(self) -> str:
        return f"None or {self.inner.describe()}"


class Deferred(Constraint):
    """The constraint ``lookup()`` returns, looked up when first used: a chapter profile
    names a rule its experiment module declares without importing that module (and torch)
    when the profile loads."""

    def __init__(self, lookup: Callable[[], Constraint]):
        self._lookup = lookup

    @property
    def constraint(self) -> Constraint:
        return self._lookup()

    def check(self, name, value):
        return self.constraint.check(name, value)

    def describe(self) -> str:
        return self.constraint.describe()


@dataclass(frozen=True)
class Rule:
    """A check across parameters: ``holds(params)`` must be true; ``message`` says what is needed."""

    names: tuple[str, ...]
    holds: Callable[[dict], bool]
    message: str

    def check(self, params: dict) -> None:
        if not self.holds(params):
            got = ", ".join(f"{n}={params[n]!r}" for n in self.names)
            raise InvalidParameterError(f"parameters {got}: {self.message}")


def validate_params(**constraints: Constraint) -> Callable:
    """Decorator: every call checks the arguments it is given (by position or keyword) against
    ``constraints`` (argument name -> :class:`Constraint`) before the function runs; defaults
    are not checked. The values are checked, not replaced, so the function sees exactly what
    it was given. The declared constraints are kept as ``fn.constraints``."""

    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)
        unknown = sorted(set(constraints) - set(signature.parameters))
        if unknown:
            raise TypeError(f"{fn.__qualname__} has no parameters {unknown}")

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            try:
                given = signature.bind(*args, **kwargs).arguments
            except TypeError:
                return fn(*args, **kwargs)  # a call that does not fit: the function says so
            check_args(constraints, given)
            return fn(*args, **kwargs)

        checked.constraints = dict(constraints)
        return checked

    return decorate


def check_args(constraints: dict[str, Constraint], values: dict[str, Any]) -> None:
    """Check ``values`` (name -> value) against ``constraints`` (name -> :class:`Constraint`);
    a name without a value is not checked."""
    for name, constraint in constraints.items():
        if name in values:
            constraint.check(name, values[name])


def check_params(estimator: Any) -> None:
    """Check an estimator's parameters (its attributes of the same names, as scikit-learn's
    ``get_params`` reads them) against its class's ``_constraints``; ``fit`` calls it."""
    check_args(type(estimator)._constraints, vars(estimator))


# Shared constraints.
POSITIVE_INT = Interval(int, 1)
POSITIVE = Interval(float, 0, closed="neither")
NON_NEGATIVE = Interval(float, 0)
FRACTION = Interval(float, 0, 1, closed="neither")  # a share strictly between 0 and 1
DEVICE = Options(("auto", "cpu", "cuda"))
