"""Tables as the book shows them: numbered, captioned, numbers formatted alike.

A chapter computes a DataFrame; :func:`table` turns it into a MyST ``{list-table}`` with a
caption and a label, which the notebook *displays* as Markdown (``nb_render_markdown_format:
myst`` renders it). Sphinx then numbers it as a table ("Table 7"), ``{numref}`` reaches it,
and the theme lays it out as text that wraps, instead of a pandas repr or a Styler's HTML
that overflows the column.

Numbers are formatted per column (:func:`column_format`): as many decimals as give the
column's typical value ``digits`` significant digits, so one column never mixes 0.0581 with
0.5 or prints six decimals; machine-zero columns switch to scientific notation.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from nearid.align.protocol import FAMILY_INFO

__all__ = ["FAMILY_LABELS", "beside_paper", "column_format", "format_number", "interval", "markdown", "mean_sd",
           "significant", "table"]

# The alignment families (nearid.align) as a reader names them, from their one record.
FAMILY_LABELS = {name: family.label for name, family in FAMILY_INFO.items()}

MISSING = "–"  # an en dash for NaN, None and cells left empty
MAX_DECIMALS = 4  # below 1e-4 a column's typical value is shown in scientific notation
# Every ASCII punctuation character may be backslash-escaped in CommonMark: escaping all of
# them keeps a cell's text literal ("*", "_", "$", "|", a leading "-" or "#").
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

Formatter = Callable[[Any], str]


def _finite(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isnan(float(x)))


def format_number(x: Any, decimals: int | None = None, signed: bool = False, sig: int = 3) -> str:
    """One value as a table shows it: fixed ``decimals`` (or ``sig`` significant digits when
    None), integers with thousands separators, "–" for missing, "inf" for infinite ends,
    "yes"/"no" for booleans; never "-0.000"."""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, np.generic):
        x = x.item()
    if _missing(x):
        return MISSING
    if not isinstance(x, numbers.Real):
        return str(x)
    if math.isinf(x):
        return ("+" if signed and x > 0 else "-" if x < 0 else "") + "inf"
    if isinstance(x, numbers.Integral):
        return f"{x:+,d}" if signed else f"{x:,d}"
    if decimals is None:
        return significant(x, sig, signed=signed)
    text = f"{x:{'+' if signed else ''},.{decimals}f}"
    if float(text.replace(",", "")) == 0:  # rounds to zero: no sign, whatever x's sign was
        text = f"{0.0:.{decimals}f}"
    return text


def significant(x: float, sig: int = 3, signed: bool = False) -> str:
    """``x`` to ``sig`` significant digits: fixed notation from 1e-4 up to 1e6, scientific
    outside (1.7e-16), so a single value reads at a glance whatever its size."""
    if _missing(x):
        return MISSING
    if not _finite(x):
        return format_number(x, signed=signed)
    if isinstance(x, numbers.Integral):
        return format_number(x, signed=signed)
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    if -MAX_DECIMALS <= magnitude < 6:
        return format_number(float(x), max(0, sig - 1 - magnitude), signed=signed)
    return f"{x:{'+' if signed else ''}.{sig - 1}e}"


def interval(estimate: float, low: float, high: float, sig: int = 2, signed: bool = True) -> str:
    """"+0.048 [+0.018, +0.082]": an estimate and its interval with one number of decimals,
    set by the interval's width (``sig`` significant digits of it), so a reader sees as many
    digits as the uncertainty allows and no more."""
    ends = [v for v in (low, high) if _finite(v)]
    width = abs(ends[1] - ends[0]) if len(ends) == 2 else 0.0
    ref = width if width > 0 else max((abs(v) for v in (estimate, *ends) if _finite(v)), default=0.0)
    decimals = 3 if ref == 0 else max(0, sig - 1 - math.floor(math.log10(ref)))
    if decimals > MAX_DECIMALS:  # a tiny interval: significant digits, in scientific notation
        est, lo, hi = (significant(v, sig, signed=signed) for v in (estimate, low, high))
    else:
        est, lo, hi = (format_number(float(v) if _finite(v) else v, decimals, signed=signed)
                       for v in (estimate, low, high))
    return f"{est} [{lo}, {hi}]"


def mean_sd(mean: float, sd: float, decimals: int = 2) -> str:
    """"0.48 ± 0.05", kept on one line (no-break spaces)."""
    return f"{format_number(mean, decimals)}\u00a0±\u00a0{format_number(sd, decimals)}"


def beside_paper(ours: str, paper: float | None, decimals: int = 2) -> str:
    """A cell that shows our number and, on a second line, the paper's, labelled."""
    return f"{ours}\npaper\u00a0{format_number(paper, decimals)}"


def column_format(values: Sequence[Any], digits: int = 3, signed: bool = False) -> Formatter:
    """A formatter for one column: decimals that give the median magnitude of its non-zero
    finite floats ``digits`` significant digits (at most :data:`MAX_DECIMALS`; a column whose
    median lies below that is shown in scientific notation), the same for every row."""
    floats = [abs(float(v)) for v in values if _finite(v) and not isinstance(v, numbers.Integral) and v != 0]
    if not floats:
        return lambda v: format_number(v, 0 if all(isinstance(u, numbers.Integral) for u in values
                                                    if _finite(u)) else digits - 1, signed=signed)
    magnitude = math.floor(math.log10(float(np.median(floats))))
    decimals = digits - 1 - magnitude
    if decimals > MAX_DECIMALS:
        return lambda v: (f"{v:{'+' if signed else ''}.{digits - 1}e}" if _finite(v) and v != 0
                          else format_number(v, 0, signed=signed))
    return lambda v: format_number(v, max(0, decimals), signed=signed)


def _pattern(pattern: str) -> Formatter:
    """A ``str.format`` pattern ("{:g}") as a formatter that shows missing values as "–"."""
    return lambda v: MISSING if _missing(v) else pattern.format(v)


def _escape(text: str) -> str:
    """A cell's text, literal in MyST (no emphasis, math, lists or headings by accident);
    a newline in it is a line break in the cell, a no-break space stays one."""
    lines = [_PUNCTUATION.sub(r"\\\1", re.sub(r"[ \t\r\f\v]+", " ", line).strip())
             for line in str(text).split("\n")]
    return "\\\n    ".join(line for line in lines if line)


def markdown(frame: pd.DataFrame, caption: str, label: str, *, digits: int = 3,
             signed: Sequence[str] = (), formats: Mapping[str, Formatter | str] | None = None,
             index: bool = True) -> str:
    """The MyST source of ``frame`` as a numbered ``{list-table}``.

    ``caption`` is MyST (math and roles allowed, one line); ``label`` is the target for
    ``{numref}``; ``formats`` maps a column to a formatter or a ``str.format`` pattern (a
    column of text is shown as it is); ``signed`` columns show "+"; ``index`` shows the
    index as the first, bold column (a MultiIndex as one column per level).
    """
    if "\n" in caption or not caption.strip():
        raise ValueError("a table caption is one non-empty line")
    if not _LABEL.fullmatch(label):
        raise ValueError(f"table label {label!r}: letters, digits, '-' and '_', starting with a letter")
    formats = dict(formats or {})
    data = frame.copy()
    if isinstance(data.columns, pd.MultiIndex):
        data.columns = [" · ".join(str(p) for p in c if str(p)) for c in data.columns]
    data.columns = [str(c) for c in data.columns]
    stubs = 0
    if index:
        names = [n if n is not None else "" for n in data.index.names]
        data = data.reset_index(names=[n or f"level_{i}" for i, n in enumerate(names)])
        data = data.rename(columns={f"level_{i}": "" for i, n in enumerate(names) if not n})
        stubs = len(names)
    cells = {}
    for pos, name in enumerate(data.columns):
        col = data.iloc[:, pos].tolist()
        fmt = formats.get(name)
        if isinstance(fmt, str):
            fmt = _pattern(fmt)
        elif fmt is None:
            fmt = column_format(col, digits, signed=name in signed)
        cells[pos] = [fmt(v) if not isinstance(v, str) else v for v in col]
    lines = [f"```{{list-table}} {caption.strip()}", f":name: {label}", ":header-rows: 1", ":widths: auto",
             ":class: nearid-table"]
    if stubs:
        lines.append(f":stub-columns: {stubs}")
    lines.append("")
    full = {p: list(cells[p]) for p in range(stubs)}
    for p in range(stubs - 1):  # an outer index level is named once per group of rows
        cells[p] = ["" if i and all(full[q][i] == full[q][i - 1] for q in range(p + 1)) else v
                    for i, v in enumerate(full[p])]
    rows = [list(data.columns)] + [[cells[p][i] for p in range(len(data.columns))] for i in range(len(data))]
    for row in rows:
        for j, text in enumerate(row):
            lines.append(f"{'* -' if j == 0 else '  -'} {_escape(text)}".rstrip())
    lines.append("```")
    return "\n".join(lines)


def table(frame: pd.DataFrame, caption: str, label: str, **kwargs: Any):
    """:func:`markdown`, as an object a notebook displays (``IPython.display.Markdown``)."""
    from IPython.display import Markdown

    return Markdown(markdown(frame, caption, label, **kwargs))
