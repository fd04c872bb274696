"""The runner on a tiny throw-away chapter: caching, failures, atomic outputs, timings."""

import json
import textwrap

import pytest

from nearid.book import profiles, runner
from nearid.book.params import Boolean, Interval

TINY = textwrap.dedent('''\
    # %% tags=["parameters"]
    profile = "quick"
    overrides = {}
    results_path = None

    # %%
    from nearid.book.results import save
    P = {"value": 1, "fail": False, **overrides}  # the kernel cannot see the test's profiles
    if P["fail"]:
        raise RuntimeError("planted failure")
    save(results_path, {"value": P["value"] * 2}, params=P, profile=profile)
    ''')


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A fake checkout with one chapter, and a fake package folder whose files feed the cache
    key: the chapter imports nearid.book.results, nothing imports nearid.cli.main."""
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
    return tmp_path


def _runs(out):
    return len(json.loads((out / "timings.json").read_text()))


def test_runs_then_caches_then_reruns_after_lib_change(project):
    out = project / "book" / "executed"
    res = runner.run_chapter("98", "smoke", root=project)
    assert res["value"] == 2 and res["profile"] == "smoke"
    assert (out / "98_tiny.ipynb").is_file() and (out / "98_tiny.json").is_file()
    assert _runs(out) == 1
    runner.run_chapter("98", "smoke", root=project)
    assert _runs(out) == 1, "an unchanged chapter must not execute again"
    (project / "fake_lib" / "book" / "results.py").write_text("x = 2\n")
    runner.run_chapter("98", "smoke", root=project)
    assert _runs(out) == 2, "a change to code the chapter imports must re-execute it"
    runner.run_chapter("98", "smoke", {"value": 5}, root=project)
    assert _runs(out) == 3, "new parameters must re-execute the chapter"
    assert json.loads((out / "98_tiny.json").read_text())["value"] == 10


def test_failure_names_chapter_and_cell_and_keeps_last_good(project, monkeypatch):
    out = project / "book" / "executed"
    runner.run_chapter("98", "smoke", root=project)
    good = (out / "98_tiny.json").read_text()
    with pytest.raises(runner.ChapterFailed) as info:
        runner.run_chapter("98", "smoke", {"fail": True}, root=project)
    msg = str(info.value)
    assert "98_tiny" in msg and "cell" in msg and "planted failure" in msg
    assert info.value.cell_index is not None
    assert (out / "98_tiny.json").read_text() == good
    assert (out / "98_tiny.failed.ipynb").is_file()
    assert not list(out.glob(".*running*"))
    records = json.loads((out / "timings.json").read_text())
    assert records[-1]["status"] == "failed"


def test_bad_parameters_fail_before_any_work(project):
    with pytest.raises(KeyError, match="valid"):
        runner.run_chapter("98", "smoke", {"nope": 1}, root=project)
    with pytest.raises(ValueError, match="profile"):
        runner.run_chapter("98", "huge", root=project)
    assert not (project / "book" / "executed" / "timings.json").exists()


def test_run_book_parallel_and_report(project):
    status = runner.run_book("smoke", jobs=2, root=project, progress=False)
    assert status == {"98_tiny": "ran"}
    assert runner.run_book("smoke", jobs=1, root=project, progress=False) == {"98_tiny": "cached"}
    report = (project / "book" / "executed" / runner.REPORT_NAME).read_text()
    assert "98_tiny" in report and "smoke" in report and "torch" in report


def test_run_book_rejects_bad_jobs(project):
    with pytest.raises(ValueError, match="jobs"):
        runner.run_book("smoke", jobs=0, root=project, progress=False)


def test_code_the_chapter_does_not_import_executes_nothing(project):
    out = project / "book" / "executed"
    runner.run_chapter("98", "smoke", root=project)
    (project / "fake_lib" / "cli" / "main.py").write_text("x = 1  # a new comment\n")
    (project / "fake_lib" / "notes.txt").write_text("not code\n")
    runner.run_chapter("98", "smoke", root=project)
    assert _runs(out) == 1, "the CLI and stray non-code files are not in the chapter's key"
    key = json.loads((out / "98_tiny.key").read_text())
    assert key["code"] == ["nearid", "nearid.book", "nearid.book.results"]


def test_bad_values_fail_before_any_work(project):
    with pytest.raises(ValueError, match="'value' got 'x'; allowed: an int"):
        runner.run_chapter("98", "smoke", {"value": "x"}, root=project)
    assert not (project / "book" / "executed").exists()
