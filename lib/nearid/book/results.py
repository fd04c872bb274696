"""Machine-readable chapter results: ``book/executed/NN_slug.json``.

A chapter hands its headline numbers to :func:`save`; the runner tells it where (the
papermill parameter ``results_path``) and moves the file into place only when the whole
chapter succeeded.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from typing import Any

import numpy as np

from nearid import kernels
from nearid.fileio import atomic_write_text

__all__ = ["atomic_write_text", "glue", "glue_tally", "glue_verdict", "save", "to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """numpy scalars and arrays, tuples and non-string keys made JSON-friendly; NaN -> None."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return None if math.isnan(f) or math.isinf(f) else f
    return obj


VERDICT_KEYS = ("claim", "estimate", "low", "high", "verdict", "n", "method", "paper", "section")
COMPARISON_KEYS = ("table", "row", "column", "ours", "paper")


# The blocks of a chapter's results that hold decided claims (nearid.verdicts.claim records).
CLAIM_BLOCKS = ("verdicts", "hypotheses")


def check_payload(payload: dict[str, Any]) -> None:
    """The summary page reads every chapter's ``verdicts`` and ``paper_comparison``: refuse a
    record it could not read, naming it, instead of a page that silently drops it."""
    from nearid import claims
    from nearid.verdicts import VERDICTS

    for block in CLAIM_BLOCKS:
        for claim_id, rec in (payload.get(block) or {}).items():
            missing = [k for k in VERDICT_KEYS if k not in rec]
            if missing:
                raise ValueError(f"verdict {claim_id!r} lacks {missing} (build it with nearid.verdicts.claim)")
            if rec["verdict"] not in VERDICTS:
                raise ValueError(f"verdict {claim_id!r} is {rec['verdict']!r}; valid: {', '.join(VERDICTS)}")
            declared = claims.registry().get(claim_id)
            if declared is None:
                raise ValueError(f"verdict {claim_id!r} is not declared in {claims.REGISTRY.name}: declare it "
                                 "(kind, test, unit, min_n, protocol) before its result")
            if declared.section != rec["section"]:
                raise ValueError(f"verdict {claim_id!r} is decided in section {rec['section']!r}; "
                                 f"{claims.REGISTRY.name} declares {declared.section!r} ({declared.chapter})")
            # the test and margin a record was decided with are the registry's, never a chapter's own
            if rec.get("test") is not None and rec["test"] != declared.test:
                raise ValueError(f"verdict {claim_id!r} was decided by a {rec['test']} test; "
                                 f"{claims.REGISTRY.name} declares {declared.test!r}")
            if rec.get("margin") is not None and declared.margin is not None \
                    and abs(float(rec["margin"]) - float(declared.margin)) > 1e-12:
                raise ValueError(f"verdict {claim_id!r} was decided with margin {rec['margin']}; "
                                 f"{claims.REGISTRY.name} declares {declared.margin}")
    for i, rec in enumerate(payload.get("paper_comparison") or []):
        missing = [k for k in COMPARISON_KEYS if k not in rec]
        if missing:
            raise ValueError(f"paper_comparison[{i}] lacks {missing}")


def save(results_path: str | os.PathLike | None, payload: dict[str, Any],
         params: dict[str, Any] | None = None, profile: str | None = None) -> None:
    """Write ``payload`` (plus ``profile``, ``params`` and the CPU kernels that computed it,
    :func:`nearid.kernels.record`) as JSON; None path = no file.

    Returns nothing, so that a chapter's last cell does not print the whole payload.
    """
    check_payload(payload)
    doc = dict(payload)
    if profile is not None:
        doc.setdefault("profile", profile)
    if params is not None:
        doc.setdefault("params", dict(params))
    doc.setdefault("kernels", kernels.record())  # which CPU kernels computed these numbers
    doc = to_jsonable(doc)
    if results_path:
        atomic_write_text(results_path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def glue(name: str, value: Any) -> None:
    """``myst_nb.glue`` for prose numbers, with numpy scalars turned into Python ones.

    myst-nb formats ``{glue:text}`key:.3f``` from the value's text repr, and numpy 2's repr
    (``np.float64(0.5)``) cannot be parsed back as a number: always glue through here.
    """
    from myst_nb import glue as _glue

    if isinstance(value, np.generic):
        value = value.item()
    _glue(name, value, display=False)


# How a verdict reads in a sentence ("the claim ... holds", "... is inconclusive").
VERDICT_PHRASES = {"holds": "holds", "fails": "fails", "inconclusive": "is inconclusive"}


def interval_text(value: float, digits: int = 3, signed: bool = False) -> str:
    """One end of an interval (or an estimate) as prose shows it; infinite ends as "-inf" and
    "inf" (an interval from one unit is unbounded), a missing value as "n/a"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "-inf" if value < 0 else ("+inf" if signed else "inf")
    return f"{value:{'+' if signed else ''}.{digits}f}"


def glue_verdict(name: str, v: Any, digits: int = 3, signed: bool = False) -> None:
    """Glue one decided claim for the prose: ``{name}_estimate``, ``_low``, ``_high`` (text,
    :func:`interval_text`), ``_n`` (where ``v`` has one), ``_verdict`` (the word) and ``_reads`` (the phrase that
    completes "the claim ...": "holds", "fails", "is inconclusive").

    ``v`` is a :class:`nearid.verdicts.Verdict`, a claim record (dict) or a table row. The
    three numbers are rounded as every table of the book rounds them, to the decimal the
    interval's width sets (:func:`nearid.book.scorecard.format_estimate`); ``digits`` decimals
    only where the interval has no finite width (an interval from one unit is unbounded).
    """
    from nearid.book.scorecard import format_at, interval_decimals

    get = (lambda k: getattr(v, k)) if hasattr(v, "estimate") and not isinstance(v, dict) else v.__getitem__
    decimals = interval_decimals(float(get("low")), float(get("high")))
    for part in ("estimate", "low", "high"):
        value = float(get(part))
        if decimals is None or not math.isfinite(value):
            text = interval_text(value, digits, signed)
        else:
            text = format_at(value, decimals)
            text = f"+{text}" if signed and value > 0 and not text.startswith("-") else text
        glue(f"{name}_{part}", text)
    with contextlib.suppress(KeyError, AttributeError, TypeError):  # a table row may carry no n
        glue(f"{name}_n", int(get("n")))
    glue(f"{name}_verdict", str(get("verdict")))
    glue(f"{name}_reads", VERDICT_PHRASES[str(get("verdict"))])


def glue_tally(prefix: str, decided: dict, label=str, sep: str = ", ") -> dict[str, list[str]]:
    """Glue how many of ``decided`` hold, fail, are inconclusive, and which:
    ``{prefix}_{word}_n``, ``{prefix}_{word}_names`` ("none" when there are none) and
    ``{prefix}_{word}_text``, the two as prose reads them ("2 (a; b)", or "none" rather than
    "0 (none)"), with ``label`` turning each name into words. Returns
    :func:`nearid.verdicts.tally`'s groups."""
    from nearid.verdicts import tally

    groups = tally(decided)
    for word, names in groups.items():
        listed = sep.join(label(n) for n in names)
        glue(f"{prefix}_{word}_n", len(names))
        glue(f"{prefix}_{word}_names", listed if names else "none")
        glue(f"{prefix}_{word}_text", f"{len(names)} ({listed})" if names else "none")
    return groups
