"""A Sphinx extension for the book's site (``sphinx.local_extensions`` in ``_config.yml``):
no page refers to a script outside the site, and wide tables can stack on a phone.

Tables of four or more columns get the class ``nearid-stack`` and each body cell a
``data-label`` naming its column, so that ``_static/nearid-phone.css`` can show them on a
narrow screen as one block per row, each value under its column's name, instead of a table
wider than the screen (:func:`label_table_cells`). A stub cell left empty under a group's name
(an outer index level is named once per group) carries that name in ``data-repeat``, which
the phone layout shows, since a block of its own no longer sits under the name.

Jupyter Book 1 always loads sphinx-thebe, whatever ``_config.yml`` says: it writes an inline
script defining ``THEBE_JS_URL = "https://unpkg.com/thebe@.../lib/index.js"`` into every page
and links ``sphinx-thebe.js`` (which loads that URL when a thebe button is pressed) and
``sphinx-thebe.css``. This book launches no kernel (execution is off; there are no thebe or
Binder buttons), so these are dropped from every page before it is written.

For ``make pdf`` (:mod:`nearid.book.pdf`), the single-page build: Sphinx gives a builder the
node handlers registered under its own name, and only when there are none those of its
format. Some extension registers handlers under "singlehtml", so the single-page build lost
every handler myst-nb and sphinx-jupyterbook-latex register for "html" (``HideCodeCellNode``,
``HiddenCellNode``, ...) and stopped on the first hidden cell. The "html" handlers are copied
under "singlehtml" (its own ones win) when that builder starts. Sphinx also adds MathJax only
to pages it saw equations on, and it sees none on the assembled page: that builder loads
every asset (``html_assets_policy = "always"``).
"""

from __future__ import annotations

import html
import re
from typing import Any

THEBE_FILES = ("sphinx-thebe.js", "sphinx-thebe.css")


def is_thebe_asset(asset: Any) -> bool:
    """A script or stylesheet entry of a page's context (Sphinx's ``_JavaScript`` /
    ``_CascadingStyleSheet``, or a plain path) that belongs to sphinx-thebe."""
    filename = str(getattr(asset, "filename", asset) or "")
    body = str((getattr(asset, "attributes", None) or {}).get("body", ""))
    return filename.rsplit("/", 1)[-1] in THEBE_FILES or "THEBE_JS_URL" in body


def drop_thebe_assets(app, pagename, templatename, context, doctree) -> None:
    """``html-page-context``: remove sphinx-thebe's scripts and stylesheet from the page."""
    for key in ("script_files", "css_files"):
        assets = context.get(key)
        if assets is not None:
            context[key] = [a for a in assets if not is_thebe_asset(a)]


def share_html_handlers(app) -> None:
    """``builder-inited``: the single-page builder gets the node handlers of "html" too."""
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    handlers["singlehtml"] = {**handlers.get("html", {}), **handlers.get("singlehtml", {})}
    app.set_html_assets_policy("always")


STACK_FROM_COLUMNS = 4  # narrower tables fit a phone's column as they are
_TABLE = re.compile(r"<table(?P<attrs>[^>]*)>(?P<body>.*?)</table>", re.S)
_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
_CELL = re.compile(r"<(t[hd])(\b[^>]*)>(.*?)</\1>", re.S)
_TAGS = re.compile(r"<[^>]+>")


def _label_one(match: re.Match) -> str:
    attrs, body = match["attrs"], match["body"]
    head = body[:body.find("</thead>")] if "</thead>" in body else ""
    header_rows = _ROW.findall(head)
    if not header_rows:
        return match[0]
    names = [html.unescape(_TAGS.sub("", c)).strip() for c in re.findall(r"<th[^>]*>(.*?)</th>", header_rows[-1], re.S)]
    if len(names) < STACK_FROM_COLUMNS:
        return match[0]

    above: dict[int, str] = {}  # the last text shown in each column, for stub cells left empty under it

    def label_row(row: re.Match) -> str:
        column = iter(range(len(names)))

        def label(c: re.Match) -> str:
            j = next(column, len(names))
            name = names[j] if j < len(names) else ""
            text = html.unescape(_TAGS.sub("", c[3])).strip()
            extra = ""
            if text:
                above[j] = text
            elif c[1] == "th" and above.get(j):  # a stub: a group's name given once above (nearid.book.tables)
                extra = f' data-repeat="{html.escape(above[j], quote=True)}"'
            return f'<{c[1]}{c[2]} data-label="{html.escape(name, quote=True)}"{extra}>{c[3]}</{c[1]}>'

        return _CELL.sub(label, row[0])

    tail = body[len(head):]
    tail = re.sub(r"<tr[^>]*>.*?</tr>", label_row, tail, flags=re.S)
    if 'class="' in attrs:
        attrs = attrs.replace('class="', 'class="nearid-stack ', 1)
    else:
        attrs += ' class="nearid-stack"'
    return f"<table{attrs}>{head}{tail}</table>"


def label_table_cells(body: str) -> str:
    """Every table of ``body`` (a page's HTML) with at least :data:`STACK_FROM_COLUMNS` header
    cells in its last header row: marked ``nearid-stack``, each body cell labelled with its
    column's header text (``data-label``), in order. Other tables are left as they are."""
    return _TABLE.sub(_label_one, body)


def stackable_tables(app, pagename, templatename, context, doctree) -> None:
    """``html-page-context``: label the page's wide tables for the phone layout."""
    if isinstance(context.get("body"), str):
        context["body"] = label_table_cells(context["body"])


def setup(app) -> dict[str, Any]:
    app.connect("html-page-context", drop_thebe_assets)
    app.connect("html-page-context", stackable_tables)
    app.connect("builder-inited", share_html_handlers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
