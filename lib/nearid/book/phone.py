"""Does a built page read on a phone? Measured in a headless Chromium at a phone's width.

Two things go wrong on a 390 px screen: a table wider than the article's column (the reader
scrolls sideways, or the theme squeezes headers letter by letter), and a figure shrunk until
its text is too small to read. :func:`measure` shows a page in a frame of that width and
reports every table's width beside its column's, and every image's shown and drawn widths;
:func:`problems` turns that into sentences. A figure's smallest text is known from when it
was drawn (:func:`nearid.book.plotting.figure_png` records it in the output's metadata), so
its size as shown is that times the image's scale on the page. Images are matched to
outputs by content: the site names each image by the SHA-256 of its bytes.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import json
import subprocess
import tempfile
from pathlib import Path

PHONE_WIDTH = 390  # CSS px: a common phone's viewport
MIN_TEXT_PX = 9.0  # as nearid.book.plotting: the smallest text a reader should have to read
_MARK = "nearid-phone-measure"
# The page is shown in an iframe of the phone's width (headless Chromium will not open a
# window narrower than 500 px), so its own media queries see a phone; the wrapper measures it.
_WRAPPER = """<!DOCTYPE html>
<html><body style="margin:0">
<iframe id="page" src="%(src)s" style="width:%(width)dpx;height:2400px;border:0"></iframe>
<script>
document.getElementById("page").addEventListener("load", () => {
  const doc = document.getElementById("page").contentDocument;
  const main = doc.querySelector("article") || doc.body;
  const column = main.getBoundingClientRect().width;
  const tables = [...main.querySelectorAll("table")].map((t, i) => ({
    index: i, width: t.getBoundingClientRect().width, column: column,
    caption: (t.querySelector("caption") || {}).textContent || ""}));
  const images = [...main.querySelectorAll("img")].map(im => ({
    src: im.getAttribute("src") || "", shown: im.getBoundingClientRect().width, drawn: im.naturalWidth}));
  const code = [...main.querySelectorAll(".cell_input pre")].map(pre => ({
    width: pre.clientWidth, scroll: pre.scrollWidth, text: pre.textContent.slice(0, 40)}));
  const out = document.createElement("pre");
  out.id = "%(mark)s";
  out.textContent = JSON.stringify({column: column, viewport: doc.defaultView.innerWidth, tables: tables,
                                    images: images, code: code});
  document.body.appendChild(out);
});
</script>
</body></html>
"""


def measure_command(browser: str, wrapper: Path) -> list[str]:
    """Headless Chromium, offline, printing the wrapper's DOM once its page has loaded (file
    pages may read each other: the wrapper reads the page in its iframe)."""
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", "--force-device-scale-factor=1", "--allow-file-access-from-files",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=15000",
            "--window-size=800,2400", "--dump-dom", wrapper.resolve().as_uri()]


def measure(browser: str, page: Path, width: int = PHONE_WIDTH, timeout: float = 120) -> dict:
    """Every table's width beside the article column's, and every image's shown and drawn
    width, on ``page`` (a built HTML file) shown ``width`` CSS px wide. The wrapper that
    frames it is written beside it and removed afterwards."""
    fd, name = tempfile.mkstemp(dir=page.parent, prefix=".phone-", suffix=".html")
    wrapper = Path(name)
    try:
        with open(fd, "w") as fh:
            fh.write(_WRAPPER % {"src": html_lib.escape(page.name), "width": width, "mark": _MARK})
        done = subprocess.run(measure_command(browser, wrapper), capture_output=True, text=True, timeout=timeout)
    finally:
        wrapper.unlink(missing_ok=True)
    start = done.stdout.find(f'id="{_MARK}">')
    if start < 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"{browser} gave no measurement of {page} (exit {done.returncode}): {tail}")
    body = done.stdout[start + len(f'id="{_MARK}">'):]
    return json.loads(html_lib.unescape(body[:body.index("</pre>")]))


def drawn_text_px(notebooks: list[Path]) -> dict[str, float]:
    """{SHA-256 of the PNG: its smallest text in drawn px} for every figure output of
    ``notebooks`` that recorded one (:func:`nearid.book.plotting.figure_png`)."""
    out = {}
    for path in notebooks:
        for cell in json.loads(Path(path).read_text()).get("cells", []):
            for output in cell.get("outputs", []):
                png = (output.get("data") or {}).get("image/png")
                smallest = ((output.get("metadata") or {}).get("image/png") or {}).get("nearid", {}).get(
                    "smallest_text_px")
                if png and smallest:
                    data = base64.b64decode("".join(png) if isinstance(png, list) else png)
                    out[hashlib.sha256(data).hexdigest()] = float(smallest)
    return out


def problems(measured: dict, text_px: dict[str, float], page: str = "") -> list[str]:
    """Sentences for what does not read at the measured width: a table wider than the column
    (more than one pixel), a shown code cell whose lines run past its box (cut off), a figure
    whose smallest text shows below :data:`MIN_TEXT_PX`."""
    said = []
    for t in measured["tables"]:
        if t["width"] > t["column"] + 1:
            said.append(f"{page}: table {t['index'] + 1} ({t['caption'][:50]!r}) is {t['width']:.0f} px wide in a "
                        f"{t['column']:.0f} px column")
    for c in measured.get("code", []):
        if c["scroll"] > c["width"] + 1:
            said.append(f"{page}: a code cell ({c['text']!r}...) runs {c['scroll'] - c['width']} px past its box")
    for im in measured["images"]:
        key = Path(im["src"]).stem
        if key in text_px and im["drawn"]:
            shown = text_px[key] * im["shown"] / im["drawn"]
            if shown < MIN_TEXT_PX:
                said.append(f"{page}: figure {Path(im['src']).name[:12]}... shows its smallest text at {shown:.1f} px "
                            f"(drawn {im['drawn']} px wide, shown {im['shown']:.0f})")
    return said
