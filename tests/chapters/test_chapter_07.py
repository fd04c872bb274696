"""The summary page: computed from the chapters' results files, and re-executed when one of
them changes (so it cannot disagree with the chapters)."""

import json

import nbformat

from nearid.book.profiles import READS
from nearid.book.runner import run_chapter
from nearid.verdicts import Verdict, claim


def _fake_results(folder, verdict="holds"):
    """Every chapter's results file, empty but for one declared claim of chapter 04 (the
    summary counts a claim the registry declares as the paper's)."""
    rec = claim(Verdict(0.12, 0.05, 0.2, verdict, 40, "bootstrap"), "ICA closes part of the gap",
                section="ch04-verdict", paper=0.4)
    for key in READS["07_summary"]:
        doc = {"profile": "smoke", "verdicts": {}, "paper_comparison": []}
        if key == "04_alignment":
            doc["verdicts"]["order_mae_timm_vs_ours_ica_rigid"] = rec
            doc["paper_comparison"] = [{"table": "Table 1", "row": "mae", "column": "rigid", "ours": 0.14,
                                        "paper": 0.109}]
        (folder / f"{key}.json").write_text(json.dumps(doc))


def test_summary_reads_every_chapter_and_follows_a_changed_json(tmp_path):
    _fake_results(tmp_path)
    res = run_chapter("07", profile="smoke", out_dir=tmp_path)
    assert res["counts"] == {"holds": 1, "inconclusive": 0, "fails": 0}
    assert res["n_paper_numbers"] == 1 and res["missing"] == []
    nb = nbformat.read(tmp_path / "07_summary.ipynb", as_version=4)
    shown = "".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", []))
    assert "{ref}`holds <ch04-verdict>`" in shown and "ICA closes part of the gap" in shown
    # a chapter re-executed with the same verdicts (only its wall-clock fields differ): the
    # summary stays as it is
    doc = json.loads((tmp_path / "04_alignment.json").read_text())
    (tmp_path / "04_alignment.json").write_text(json.dumps({**doc, "seconds": 12.5}))
    run_chapter("07", profile="smoke", out_dir=tmp_path)
    assert len(json.loads((tmp_path / "timings.json").read_text())) == 1
    # a chapter's results change by hand: the summary is stale and follows
    doc["verdicts"]["order_mae_timm_vs_ours_ica_rigid"].update(verdict="fails", estimate=-0.1, low=-0.2, high=-0.05)
    (tmp_path / "04_alignment.json").write_text(json.dumps(doc))
    res = run_chapter("07", profile="smoke", out_dir=tmp_path)
    assert res["counts"] == {"holds": 0, "inconclusive": 0, "fails": 1}
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert [t["chapter"] for t in timings] == ["07_summary", "07_summary"]
