"""Machine-readable chapter results: ``book/executed/NN_slug.json``.

A chapter hands its headline numbers to :func:`save`; the runner tells it where (the
papermill parameter ``results_path``) and moves the file into place only when the whole
chapter succeeded.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from nearid import kernels
from nearid.fileio import atomic_write_text

__all__ = ["atomic_write_text", "glue", "save", "to_jsonable"]


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


def check_payload(payload: dict[str, Any]) -> None:
    """The summary page reads every chapter's ``verdicts`` and ``paper_comparison``: refuse a
    record it could not read, naming it, instead of a page that silently drops it."""
    from nearid.verdicts import VERDICTS

    for claim_id, rec in (payload.get("verdicts") or {}).items():
        missing = [k for k in VERDICT_KEYS if k not in rec]
        if missing:
            raise ValueError(f"verdict {claim_id!r} lacks {missing} (build it with nearid.verdicts.claim)")
        if rec["verdict"] not in VERDICTS:
            raise ValueError(f"verdict {claim_id!r} is {rec['verdict']!r}; valid: {', '.join(VERDICTS)}")
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
