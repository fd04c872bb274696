"""Named parameter sets per chapter: ``smoke`` (tests), ``quick`` (default book), ``full``.

Each chapter ``NN_slug`` has one module here, ``chNN_slug.py``, holding its three profiles
(``PROFILES``), what each parameter accepts (``CONSTRAINTS``, see :mod:`nearid.book.params`),
checks across parameters (``RULES``) and, for the summary, the chapters whose results it
reads (``READS``). A chapter reads its parameters with
:func:`resolve`, which validates the profile name, every override's name and every value
before any work starts, and says what is allowed when something is not. The runner calls the
same function, so a bad ``-p`` fails at once instead of minutes into a run.

The chapter modules are loaded by name, not imported at the top of this file: a chapter's
cache key then covers its own parameter module and not the other chapters' (see
:mod:`nearid.codehash`).

Conventions: ``seeds`` is a number of seeds (0, 1, ..., seeds-1); ``seed`` is a base seed;
``device`` is "auto", "cpu" or "cuda".
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from collections.abc import Mapping
from typing import Any

from nearid.book.params import Constraint, InvalidParameterError, Rule
from nearid.constraints import cut, shown

PROFILES = ("smoke", "quick", "full")


def module_name(chapter_key: str) -> str:
    """The module holding a chapter's parameters: "02_isometric_dgp" -> "...profiles.ch02_isometric_dgp"."""
    return f"{__name__}.ch{chapter_key}"


def _load() -> tuple[dict, dict, dict, dict, dict, dict]:
    chapters, constraints, rules, reads, read_keys, scales = {}, {}, {}, {}, {}, {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not (info.name.startswith("ch") and info.name[2:4].isdigit()):
            continue
        key = info.name[2:]
        module = importlib.import_module(module_name(key))
        chapters[key] = module.PROFILES
        constraints[key] = module.CONSTRAINTS
        rules[key] = list(getattr(module, "RULES", []))
        reads[key] = tuple(getattr(module, "READS", ()))
        read_keys[key] = getattr(module, "READ_KEYS", None)
        scales[key] = (tuple(getattr(module, "SIZES", ())), getattr(module, "STAND_IN", ""))
    return chapters, constraints, rules, reads, read_keys, scales


CHAPTERS: dict[str, dict[str, dict[str, Any]]]
CONSTRAINTS: dict[str, dict[str, Constraint]]
RULES: dict[str, list[Rule]]
READS: dict[str, tuple[str, ...]]  # chapters whose results a chapter reads (run before it)
READ_KEYS: dict[str, tuple[str, ...] | None]  # ... and the entries of those results it uses (None: all)
# the parameters that size a chapter's run and what stands in for the paper's setup
SCALES: dict[str, tuple[tuple[str, ...], str]]
CHAPTERS, CONSTRAINTS, RULES, READS, READ_KEYS, SCALES = _load()


class Params(dict):
    """A dict of resolved chapter parameters that also reads as attributes (``P.seeds``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no parameter {name!r}; have: {', '.join(sorted(self))}") from None


def chapter_key(chapter: str) -> str:
    """Resolve "02" or "02_isometric_dgp" to the full chapter key."""
    if chapter in CHAPTERS:
        return chapter
    hits = [k for k in CHAPTERS if k.split("_", 1)[0] == chapter]
    if len(hits) == 1:
        return hits[0]
    raise ValueError(f"unknown chapter {shown(chapter)}; valid: {', '.join(CHAPTERS)}")


def resolve(chapter: str, profile: str = "quick", overrides: dict[str, Any] | None = None) -> Params:
    """The chapter's parameters for ``profile`` with ``overrides`` applied, every value checked.

    Raises KeyError for an unknown parameter, ValueError for an unknown chapter or profile,
    and :class:`~nearid.book.params.InvalidParameterError` (a ValueError and a TypeError)
    for a value that is not allowed; each message says what is.
    """
    key = chapter_key(chapter)
    overrides = _overrides_mapping(overrides)
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {shown(profile)}; valid: {', '.join(PROFILES)}")
    allowed = CONSTRAINTS[key]
    params = Params(CHAPTERS[key][profile])
    for name, value in (overrides or {}).items():
        if name not in allowed:
            raise KeyError(f"unknown parameter {shown(name)} for chapter {key}; valid: "
                           f"{', '.join(sorted(allowed))}")
        params[name] = value
    try:
        for name, constraint in allowed.items():
            params[name] = constraint.check(name, params[name])
        for rule in RULES.get(key, []):
            rule.check(params)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"chapter {key}: {exc}") from None
    return params


def _overrides_mapping(overrides: Any) -> dict[str, Any]:
    """``overrides`` as papermill users pass it: a dict (``-y``/``-f`` YAML, or the runner),
    or JSON text (``-p overrides '{"seeds": 5}'``: papermill's ``-p`` passes text)."""
    if overrides is None or overrides == "":
        return {}
    if isinstance(overrides, str):
        try:
            overrides = json.loads(overrides)
        except json.JSONDecodeError as exc:
            raise InvalidParameterError(f"overrides must be a JSON object such as '{{\"seeds\": 5}}', got "
                                        f"{overrides!r:.80} ({exc.msg})") from None
    if not isinstance(overrides, Mapping):
        raise InvalidParameterError(f"overrides must be a mapping of parameter names to values, "
                                    f"got {type(overrides).__name__}: {overrides!r:.80}")
    return dict(overrides)


def parse_overrides(texts: list[str]) -> dict[str, Any]:
    """Every ``-p key=value`` of a command line (:func:`parse_override`); a parameter given
    twice is refused (which one was meant cannot be told), naming both values."""
    overrides: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for text in texts:
        key, value = parse_override(text)
        if key in overrides:
            raise ValueError(f"parameter {shown(key)} is given twice (-p {cut(seen[key])} and "
                             f"-p {cut(text.strip())}); "
                             f"give it once")
        overrides[key], seen[key] = value, text.strip()
    return overrides


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``key=value`` from the command line; the value is a Python literal (``true`` and
    ``false`` in any case count as booleans, as a shell user writes them) or a string."""
    if "=" not in text:
        raise ValueError(f"an override looks like key=value, got {shown(text)}")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    if not key:
        raise ValueError(f"empty parameter name in {shown(text)}")
    if raw.lower() in ("true", "false"):
        return key, raw.lower() == "true"
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):  # 100,000 minus signs: ast's own limits
        value = raw
    return key, value
