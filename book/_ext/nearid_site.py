"""A Sphinx extension for the book's site (``sphinx.local_extensions`` in ``_config.yml``):
no page refers to a script outside the site.

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


def setup(app) -> dict[str, Any]:
    app.connect("html-page-context", drop_thebe_assets)
    app.connect("builder-inited", share_html_handlers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
