"""Issue 36, items 1, 5, 6 and 7: outputs that cannot be redirected by a planted symbolic link,
a damaged timings.json kept (moved aside, never overwritten), a summary that never shows one
profile's numbers under another's name, and `nearid verify` that only passes (and `--update`
only records) what the current code produced."""

import json
import os
import time

import pytest
from test_runner import TINY

from nearid.book import pages, profiles, reference, runner, scorecard
from nearid.book import cachekey
from nearid.book.params import Boolean, Interval
from nearid.fileio import UnsafePath, atomic_write_text, open_no_follow

PRECIOUS = "the user's file, never to be written by the runner\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A fake checkout with one tiny chapter, 98_tiny, as in test_runner.py."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks" / "98_tiny.py").write_text(TINY)
    lib = tmp_path / "fake_lib"
    for rel in ("__init__.py", "book/__init__.py", "book/results.py", "cli/__init__.py", "cli/main.py"):
        (lib / rel).parent.mkdir(parents=True, exist_ok=True)
        (lib / rel).write_text("x = 1\n")
    block = {"value": 1, "fail": False}
    monkeypatch.setitem(profiles.CHAPTERS, "98_tiny", {p: dict(block) for p in profiles.PROFILES})
    monkeypatch.setitem(profiles.CONSTRAINTS, "98_tiny", {"value": Interval(int), "fail": Boolean()})
    monkeypatch.setattr(runner, "LIB_DIR", lib)
    monkeypatch.setattr(cachekey, "LIB_DIR", lib)  # the key hashes the code under it
    monkeypatch.delenv("NEARID_NUM_THREADS", raising=False)
    return tmp_path


@pytest.fixture
def cli_project(project, monkeypatch):
    monkeypatch.setenv("NEARID_ROOT", str(project))
    from nearid.cli import main as cli

    return cli


@pytest.fixture
def victim(tmp_path):
    """A file outside the checkout that a planted link points at."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_text(PRECIOUS)
    return path


def _plant(link, target):
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


# ----------------------------------------------------------------------------- 1. symbolic links
PLANTED = ["book/executed/.98_tiny.lock", "book/executed/98_tiny.ipynb", "book/executed/98_tiny.json",
           "book/executed/98_tiny.key", "book/executed/98_tiny.failed.ipynb", "book/executed/timings.json",
           "book/executed/.timings.lock", "book/executed/how_this_book_was_run.md",
           "book/pages/98_tiny.ipynb", "book/pages/.98_tiny.ipynb.tmp"]


@pytest.mark.parametrize("planted", PLANTED)
def test_a_link_where_an_output_belongs_is_refused_before_any_work(cli_project, project, victim, planted, capsys):
    """Each kind of output: exit 2 at once, one line naming the link, its target untouched."""
    _plant(project / planted, victim)
    start = time.monotonic()
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nearid run: error: refusing to run: ") and err.count("\n") == 1, err
    assert str(project / planted) in err and "symbolic link" in err
    assert victim.read_text() == PRECIOUS and time.monotonic() - start < 20
    assert not [p for p in (project / "book" / "executed").glob("98_tiny.*") if not p.is_symlink()], "nothing ran"


def test_a_fifo_where_timings_json_belongs_is_refused_not_waited_on(cli_project, project, capsys):
    """A FIFO at timings.json would hang every reader (the pricing, the report page)."""
    out = project / "book" / "executed"
    out.mkdir(parents=True)
    os.mkfifo(out / "timings.json")
    start = time.monotonic()
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'timings.json'} is not a regular file" in err and err.count("\n") == 1, err
    assert time.monotonic() - start < 20


def test_the_book_refuses_a_link_too(cli_project, project, victim, capsys):
    _plant(project / "book/executed/98_tiny.json", victim)
    assert cli_project.main(["book", "--profile", "smoke", "--no-build", "--jobs", "1"]) == 2
    assert "98_tiny.json is a symbolic link" in capsys.readouterr().err
    assert victim.read_text() == PRECIOUS


def test_a_link_planted_while_the_chapter_runs_is_refused_at_commit(cli_project, project, victim, capsys):
    """The chapter itself plants a link at its JSON: the outputs are not moved through it."""
    out = project / "book" / "executed"
    (project / "notebooks" / "98_tiny.py").write_text(TINY + f'\nimport os\nos.symlink({str(victim)!r}, '
                                                      f'{str(out / "98_tiny.json")!r})\n')
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "refusing to write" in err and "98_tiny.json" in err and err.count("\n") == 1, err
    assert victim.read_text() == PRECIOUS
    assert (out / "98_tiny.json").is_symlink() and not (out / "98_tiny.key").exists()
    assert not list(out.glob(".98_tiny.running.*")), "no hidden file of the run is left"


def test_the_lock_is_never_opened_through_a_link(project, victim):
    out = project / "book" / "executed"
    _plant(out / ".98_tiny.lock", victim)
    ch = runner.get_chapter("98", project)
    for exclusive in (True, False):
        with pytest.raises(UnsafePath, match=r"\.98_tiny\.lock: it is a symbolic link"):
            with runner.chapter_lock(out, ch, exclusive=exclusive):
                pass
    os.unlink(out / ".98_tiny.lock")
    os.mkfifo(out / ".98_tiny.lock")  # a FIFO would block the reader for good
    with pytest.raises(UnsafePath, match="not a regular file"):
        with runner.chapter_lock(out, ch, exclusive=False):
            pass
    _plant(out / ".timings.lock", victim)
    with pytest.raises(UnsafePath):
        runner._append_timing(out, {"chapter": "98_tiny", "status": "ok", "profile": "smoke", "wall_s": 1.0})
    assert victim.read_text() == PRECIOUS


def test_writers_refuse_links_and_use_unique_temporary_names(tmp_path, victim):
    """atomic_write_text (runner, reference, results), the report page, timings.json and the
    page writer: a link at the output is refused; a link at the page writer's old fixed
    temporary name is never used (mkstemp makes a fresh name)."""
    link = tmp_path / "out.json"
    _plant(link, victim)
    with pytest.raises(UnsafePath, match="out.json: it is a symbolic link to .*victim.txt"):
        atomic_write_text(link, "{}")
    out = tmp_path / "book" / "executed"
    _plant(out / "timings.json", victim)
    with pytest.raises(UnsafePath, match="timings.json"):
        runner._append_timing(out, {"chapter": "98_tiny", "status": "ok", "profile": "smoke", "wall_s": 1.0})
    os.unlink(out / "timings.json")
    _plant(out / runner.REPORT_NAME, victim)
    with pytest.raises(UnsafePath, match=runner.REPORT_NAME):
        runner.write_run_report(out, tmp_path)
    assert victim.read_text() == PRECIOUS
    with pytest.raises(UnsafePath):
        open_no_follow(link, os.O_RDWR | os.O_CREAT, "r+")


def _executed_chapter(folder, key="98_tiny"):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Tiny"), nbformat.v4.new_markdown_cell(
        "## More", metadata={"tags": ["new-page:more"]})]
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{key}.ipynb")


def test_the_page_writer_never_writes_through_a_link(tmp_path, victim):
    executed, pages_dir = tmp_path / "executed", tmp_path / "pages"
    _executed_chapter(executed)
    _plant(pages_dir / ".98_tiny.ipynb.tmp", victim)  # the old fixed temporary name
    written = pages.write_pages(executed, pages_dir)
    assert sorted(p.name for p in written) == ["98_tiny-more.ipynb", "98_tiny.ipynb"]
    assert all(p.is_file() and not p.is_symlink() for p in written)
    assert victim.read_text() == PRECIOUS
    (pages_dir / "98_tiny.ipynb").unlink()
    _plant(pages_dir / "98_tiny.ipynb", victim)  # the page itself
    with pytest.raises(UnsafePath, match=r"98_tiny\.ipynb: it is a symbolic link"):
        pages.write_pages(executed, pages_dir)
    assert victim.read_text() == PRECIOUS
    assert not [p for p in pages_dir.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


# ----------------------------------------------------------------------------- 5. timings.json
ENTRY = {"chapter": "98_tiny", "status": "ok", "profile": "smoke", "wall_s": 1.5, "device": "cpu",
         "finished": "2026-12-04T00:00:00+00:00"}


@pytest.mark.parametrize("damaged", ["[1, 2", "{}", "[1, 2]", '[{"chapter": "01", "status": "ok"}]', "\xff\xfe"])
def test_a_damaged_timings_file_is_moved_aside_never_overwritten(tmp_path, damaged, capsys):
    out = tmp_path / "executed"
    out.mkdir()
    (out / "timings.json").write_bytes(damaged.encode("latin-1"))
    runner._append_timing(out, ENTRY)
    aside = list(out.glob("timings.json.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged.encode("latin-1")
    assert json.loads((out / "timings.json").read_text()) == [ENTRY]
    err = capsys.readouterr().err
    assert f"{out / 'timings.json'} was damaged" in err and aside[0].name in err and err.count("\n") == 1
    # the report page and the longest-first order read it without a traceback
    (out / "timings.json").write_text("{}")
    assert runner._expected_seconds(out, "quick") == runner.REFERENCE_SECONDS["quick"]
    runner.write_run_report(out, tmp_path)
    assert len(list(out.glob("timings.json.damaged-*"))) == 2 and not (out / "timings.json").exists()


def test_pricing_reads_a_damaged_timings_file_without_failing(tmp_path):
    from nearid.book import pricing

    for damaged in ("{}", "[1, 2", '[{"chapter": "98_tiny", "status": "ok", "wall_s": "x"}]'):
        (tmp_path / "timings.json").write_text(damaged)
        assert pricing._known_runs(tmp_path, "98_tiny") == []


def test_a_run_beside_a_damaged_timings_file_keeps_it_and_succeeds(cli_project, project, capsys):
    out = project / "book" / "executed"
    out.mkdir(parents=True)
    (out / "timings.json").write_text("{}")  # once: outputs committed, then an AttributeError
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 0
    err = capsys.readouterr().err
    assert "timings.json was damaged" in err and "Traceback" not in err
    assert [r["chapter"] for r in json.loads((out / "timings.json").read_text())] == ["98_tiny"]
    assert [p.read_text() for p in out.glob("timings.json.damaged-*")] == ["{}"]


# ----------------------------------------------------------------------------- 6. one profile per summary
def test_the_summary_leaves_out_chapters_of_another_profile():
    results = {"01_definitions": {"profile": "quick"}, "02_isometric_dgp": {"profile": "smoke"},
               "03_bilipschitz": None}
    kept, other = scorecard.of_profile(results, "smoke")
    assert kept == {"01_definitions": None, "02_isometric_dgp": {"profile": "smoke"}, "03_bilipschitz": None}
    assert other == {"01_definitions": "quick"}
    text = scorecard.missing_text(kept, other, "smoke")
    assert text == ("01_definitions (executed with the quick profile, not smoke: left out; "
                    "`nearid run 01 --profile smoke` runs it), 03_bilipschitz")
    assert scorecard.missing_text({"02_isometric_dgp": {}}, {}, "smoke") == "none"
    with pytest.raises(FileNotFoundError, match="no chapter results of the full profile to summarise .01_definitions "
                                                "was executed with the quick profile; 02_isometric_dgp"):
        scorecard.of_profile(results, "full")


@pytest.mark.chapter
def test_chapter_07_in_smoke_does_not_show_chapter_01s_quick_numbers(tmp_path):
    """`nearid run 01 --profile quick`, then `nearid run 07 --profile smoke`: chapter 01's
    quick numbers are not shown, and the page says why."""
    import nbformat

    from nearid.book.profiles import READS
    from nearid.verdicts import Verdict, claim

    rec = claim(Verdict(0.12, 0.05, 0.2, "holds", 40, "bootstrap"), "ICA closes part of the gap",
                section="ch04-verdict", paper=0.4)
    for key in READS["07_summary"]:
        doc = {"profile": "smoke", "verdicts": {}, "paper_comparison": []}
        if key == "04_alignment":
            doc["verdicts"]["order_mae_timm_vs_ours_ica_rigid"] = rec
            doc["paper_comparison"] = [{"table": "Table 1", "row": "mae", "column": "rigid", "ours": 0.14,
                                        "paper": 0.109}]
        if key == "01_definitions":  # a quick number that must not be shown under smoke
            doc["profile"] = "quick"
            doc["paper_comparison"] = [{"table": "Table 1", "row": "mae", "column": "linear", "ours": 9.9,
                                        "paper": 0.1}]
        (tmp_path / f"{key}.json").write_text(json.dumps(doc))
    res = runner.run_chapter("07", profile="smoke", out_dir=tmp_path)
    assert res["counts"] == {"holds": 1, "inconclusive": 0, "fails": 0} and res["n_paper_numbers"] == 1
    assert res["missing"] == ["01_definitions"]
    nb = nbformat.read(tmp_path / "07_summary.ipynb", as_version=4)
    glued = json.dumps([o for c in nb.cells for o in c.get("outputs", [])])
    assert "01_definitions (executed with the quick profile, not smoke: left out" in glued


# ----------------------------------------------------------------------------- 7. verify checks provenance
@pytest.fixture
def verified(cli_project, project):
    """The tiny chapter run in smoke and recorded as the reference (only its own chapter)."""
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 0
    assert cli_project.main(["verify", "--profile", "smoke", "--update", "--only", "98"]) == 0
    assert cli_project.main(["verify", "--profile", "smoke", "--only", "98"]) == 0
    return project / "book" / "executed", project / "book" / "reference" / "smoke"


def _refused(cli, capsys, ref):
    """verify fails (1) and --update refuses (2) with one line each, the reference untouched."""
    before = (ref / "98_tiny.json").read_text()
    assert cli.main(["verify", "--profile", "smoke", "--only", "98"]) == 1
    out = capsys.readouterr().out
    assert cli.main(["verify", "--profile", "smoke", "--update", "--only", "98"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nearid verify: error: not written into ") and err.count("\n") == 1, err
    assert (ref / "98_tiny.json").read_text() == before
    return out, err


def test_verify_refuses_an_edited_result(cli_project, verified, capsys):
    executed, ref = verified
    capsys.readouterr()
    doc = json.loads((executed / "98_tiny.json").read_text())
    (executed / "98_tiny.json").write_text(json.dumps({**doc, "value": 0.5}))
    out, err = _refused(cli_project, capsys, ref)
    assert "error: 98_tiny: edited: 98_tiny.json is not the file its run wrote" in out
    assert "98_tiny: edited: 98_tiny.json" in err


def test_verify_refuses_a_stale_result_and_says_what_changed(cli_project, project, verified, capsys):
    executed, ref = verified
    capsys.readouterr()
    source = project / "notebooks" / "98_tiny.py"
    source.write_text(source.read_text() + "\n# a changed chapter\n")
    out, err = _refused(cli_project, capsys, ref)
    assert "98_tiny: stale: its source changed since it ran" in out and "stale: its source" in err
    key_file = executed / "98_tiny.key"
    record = json.loads(key_file.read_text())
    key_file.write_text(json.dumps({k: v for k, v in record.items() if k != "parts"}))  # an older runner's key
    out, _ = _refused(cli_project, capsys, ref)
    assert "stale: its source, parameters, the code it imports or the packages changed since it ran " \
           "(its key predates per-part records)" in out
    key_file.write_text(json.dumps(record))
    source.write_text(TINY)
    (runner.LIB_DIR / "book" / "results.py").write_text("x = 2\n")  # code the chapter imports
    out, _ = _refused(cli_project, capsys, ref)
    assert "stale: the nearid code it imports changed since it ran" in out


def test_verify_refuses_a_result_run_with_overrides(cli_project, verified, capsys):
    executed, ref = verified
    assert cli_project.main(["run", "98", "--profile", "smoke", "-p", "value=3"]) == 0
    capsys.readouterr()
    out, _ = _refused(cli_project, capsys, ref)
    assert "98_tiny: stale: it ran with other parameters than the smoke profile's as it stands " \
           "(the profile changed since, or it ran with -p overrides)" in out


def test_verify_refuses_the_results_of_a_run_that_failed_since(cli_project, verified, capsys):
    executed, ref = verified
    assert cli_project.main(["run", "98", "--profile", "smoke", "--force", "-p", "fail=True"]) == 1
    capsys.readouterr()
    assert (executed / "98_tiny.failed.ipynb").is_file()
    out, err = _refused(cli_project, capsys, ref)
    assert "98_tiny: its last run failed (98_tiny.failed.ipynb is there)" in out and "last run failed" in err


def test_verify_refuses_results_without_their_key(cli_project, verified, capsys):
    executed, ref = verified
    (executed / "98_tiny.key").unlink()
    capsys.readouterr()
    out, _ = _refused(cli_project, capsys, ref)
    assert "no 98_tiny.key beside its results" in out
    (executed / "98_tiny.key").write_text("[1")
    out, _ = _refused(cli_project, capsys, ref)
    assert "98_tiny: 98_tiny.key cannot be read (" in out


def test_result_problem_is_none_for_the_current_run_and_check_is_passed_through(project, verified):
    executed, ref = verified
    assert runner.result_problem("98", "smoke", executed, project) is None
    calls = []
    rep = reference.verify(executed, ref, "smoke", chapters=["98_tiny"], check=lambda k: calls.append(k) or "odd")
    assert calls == ["98_tiny"] and rep.problems == ["98_tiny: odd"] and not rep.chapters
