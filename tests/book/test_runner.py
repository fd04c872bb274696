"""The runner on tiny throw-away chapters: caching, failures, atomic outputs, timings,
parallel runs that give the same numbers, interrupts."""

import json
import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest
from waiting import until

from nearid.book import profiles, runner
from nearid.book import cachekey
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

# Floating-point work whose last digits would move with the thread count or the order of
# the chapters: numpy SVD and torch training-like sums, seeded.
NUMERIC = textwrap.dedent('''\
    # %% tags=["parameters"]
    profile = "quick"
    overrides = {}
    results_path = None

    # %%
    import os
    import numpy as np
    import torch
    from nearid.env import setup
    from nearid.book.results import save
    P = {"value": 1, "fail": False, **overrides}
    seed = int(os.path.basename(results_path).lstrip(".")[:2])  # 96 or 97: the chapters differ
    setup(seed=seed)
    X = np.random.default_rng(seed).normal(size=(300, 120))
    W = torch.randn(120, 64, dtype=torch.float64)
    H = torch.tanh(torch.from_numpy(X) @ W)
    save(results_path, {"svd": np.linalg.svd(X @ X.T, compute_uv=False).tolist()[:20],
                        "torch": float((H.T @ H).sum()), "torch_threads": torch.get_num_threads(),
                        "omp": os.environ.get("OMP_NUM_THREADS")}, params=P, profile=profile)
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
    monkeypatch.setattr(cachekey, "LIB_DIR", lib)  # the key hashes the code under it
    monkeypatch.delenv("NEARID_NUM_THREADS", raising=False)
    return tmp_path


@pytest.fixture
def two_numeric(project, monkeypatch):
    """The tiny project with 98_tiny replaced by two numeric chapters, 96 and 97."""
    (project / "notebooks" / "98_tiny.py").unlink()
    for key, value in (("96_numeric", 3), ("97_numeric", 4)):
        (project / "notebooks" / f"{key}.py").write_text(NUMERIC)
        block = {"value": value, "fail": False}
        monkeypatch.setitem(profiles.CHAPTERS, key, {p: dict(block) for p in profiles.PROFILES})
        monkeypatch.setitem(profiles.CONSTRAINTS, key, {"value": Interval(int), "fail": Boolean()})
    return project


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
    assert "No lock file was found" in report  # the fake checkout has none


def test_report_lists_the_lock_hash(project, root):
    from nearid.book import lockfile

    (project / "requirements").mkdir()
    for rel in lockfile.LOCK_FILES:
        (project / rel).write_bytes((root / rel).read_bytes())
    report = runner.write_run_report(project / "book" / "executed", project).read_text()
    for rel in lockfile.LOCK_FILES:
        assert f"| `{rel}` | `{lockfile.digest(root / rel)}` |" in report
    assert "When this page was written, " in report


def test_jobs_do_not_change_the_numbers(two_numeric):
    """Two chapters side by side (jobs=2, each in its own process) give exactly the JSON of
    a one-job run: every kernel gets the same thread count whatever --jobs is."""
    out1, out2 = two_numeric / "one", two_numeric / "two"
    assert runner.run_book("smoke", jobs=1, root=two_numeric, out_dir=out1, progress=False) == \
        {"96_numeric": "ran", "97_numeric": "ran"}
    assert runner.run_book("smoke", jobs=2, root=two_numeric, out_dir=out2, progress=False) == \
        {"96_numeric": "ran", "97_numeric": "ran"}
    for key in ("96_numeric", "97_numeric"):
        a, b = (json.loads((o / f"{key}.json").read_text()) for o in (out1, out2))
        assert a == b
        assert a["torch_threads"] == 1 and a["omp"] == "1"
    assert json.loads((out1 / "96_numeric.json").read_text()) != json.loads((out1 / "97_numeric.json").read_text())
    timings = json.loads((out2 / "timings.json").read_text())
    assert {t["threads"] for t in timings} == {1}


def test_default_jobs_is_one_per_core(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert runner.default_jobs() == 7
    monkeypatch.setenv("NEARID_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="NEARID_NUM_THREADS"):
        runner.kernel_threads()


def test_longest_chapter_starts_first(project):
    out = project / "book" / "executed"
    out.mkdir(parents=True)
    (out / "timings.json").write_text(json.dumps([
        {"chapter": "a", "profile": "quick", "status": "ok", "wall_s": 5},
        {"chapter": "b", "profile": "quick", "status": "ok", "wall_s": 50},
        {"chapter": "a", "profile": "quick", "status": "ok", "wall_s": 7},
        {"chapter": "c", "profile": "quick", "status": "failed", "wall_s": 900},
        {"chapter": "c", "profile": "smoke", "status": "ok", "wall_s": 900}]))
    expected = runner._expected_seconds(out, "quick")
    assert {k: expected[k] for k in "ab"} == {"a": 7.0, "b": 50.0} and "c" not in expected


def test_a_fresh_clone_starts_chapters_04_and_05_first(tmp_path):
    """No timings of its own yet: the reference machine's order, longest first (04 and 05 each
    take more than twice as long as the rest of the book together)."""
    for profile in ("quick", "full"):
        expected = runner._expected_seconds(tmp_path, profile)
        names = [p.stem for p in (Path(runner.__file__).parents[3] / "notebooks").glob("0[1-6]_*.py")]
        assert set(names) <= set(expected), set(names) - set(expected)
        longest = sorted(expected, key=expected.get, reverse=True)[:2]
        assert set(longest) == {"04_alignment", "05_disentanglement"}, longest
    assert runner._expected_seconds(tmp_path, "smoke") == runner.REFERENCE_SECONDS["quick"]


def test_failed_notebook_removed_by_a_later_success_or_cache_hit(project):
    out = project / "book" / "executed"
    failed = out / "98_tiny.failed.ipynb"
    runner.run_chapter("98", "smoke", root=project)
    with pytest.raises(runner.ChapterFailed):
        runner.run_chapter("98", "smoke", {"fail": True}, root=project)
    assert failed.is_file()
    runner.run_chapter("98", "smoke", root=project)  # a cache hit: nothing executes
    assert _runs(out) == 2 and not failed.exists()
    with pytest.raises(runner.ChapterFailed):
        runner.run_chapter("98", "smoke", {"fail": True}, root=project)
    assert runner.run_book("smoke", jobs=1, root=project, progress=False) == {"98_tiny": "cached"}
    assert not failed.exists()
    with pytest.raises(runner.ChapterFailed):
        runner.run_chapter("98", "smoke", {"fail": True}, root=project)
    runner.run_chapter("98", "smoke", {"value": 3}, root=project)  # a successful execution
    assert not failed.exists()


SLOW = TINY.replace('save(results_path', 'import time\ntime.sleep(600)\nsave(results_path')


def _kernel_pids(project):
    import psutil

    return [p.pid for p in psutil.Process().children(recursive=True)
            if "nearid.book.kernel" in " ".join(p.cmdline())]


def _gone(pid):
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_interrupt_stops_the_kernel_and_cleans_up(project):
    """Ctrl-C (KeyboardInterrupt in the runner) mid-chapter: the kernel is stopped, the hidden
    running files are removed, the last good output is kept."""
    out = project / "book" / "executed"
    runner.run_chapter("98", "smoke", root=project)
    good = (out / "98_tiny.json").read_text()
    (project / "notebooks" / "98_tiny.py").write_text(SLOW)
    seen = {}

    def interrupt_when_running():
        seen["kernels"] = until(lambda: _kernel_pids(project))
        until(lambda: list(out.glob(".98_tiny.running*")))
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGINT)

    # a job started in the background of a shell inherits SIGINT ignored: Ctrl-C's default
    # behaviour is what is tested here, whatever the test run inherited
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread = threading.Thread(target=interrupt_when_running, daemon=True)
    thread.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run_chapter("98", "smoke", root=project)
    finally:
        signal.signal(signal.SIGINT, previous)
    thread.join()
    assert time.monotonic() - start < 120
    assert not list(out.glob(".*running*"))
    assert (out / "98_tiny.json").read_text() == good
    assert all(until(lambda: _gone(pid), 10) for pid in seen["kernels"])
    assert [r["status"] for r in json.loads((out / "timings.json").read_text())] == ["ok", "interrupted"]


def test_kernel_dies_with_a_killed_runner(tmp_path):
    """SIGKILL of the process that started a kernel takes the kernel with it at once."""
    import subprocess
    import sys

    import psutil

    code = textwrap.dedent('''
        import asyncio, sys
        from nearid.book.runner import _kernel_manager_class
        km = _kernel_manager_class()(kernel_name="python3")
        asyncio.run(km.start_kernel())
        print(km.provisioner.process.pid, flush=True)
        sys.stdin.read()
        ''')
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    kernel = int(proc.stdout.readline())
    assert "nearid.book.kernel" in " ".join(psutil.Process(kernel).cmdline())
    time.sleep(1.0)  # let the kernel get past start-up, as in a real run
    proc.kill()
    proc.wait()
    start = time.monotonic()
    until(lambda: _gone(kernel), 10)
    assert time.monotonic() - start < 3, "the kernel outlived its runner"


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


# ----------------------------------------------------------------------------- one run at a time
def test_a_second_run_waits_for_the_chapter_lock(project):
    """While a run holds a chapter's lock, another run of it says who holds it and waits; it
    goes on once the lock is released."""
    out = project / "book" / "executed"
    ch = runner.get_chapter("98", project)
    said, result = [], {}

    def second():
        result["value"] = runner.run_chapter_outcome("98", "smoke", {"value": 4}, root=project, say=said.append)

    with runner.chapter_lock(out, ch, about="nearid run 98 --profile smoke (the test)"):
        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        until(lambda: said, 60)
        time.sleep(0.5)
        assert thread.is_alive() and not (out / "98_tiny.json").exists(), "it must wait, not run"
    thread.join(120)
    assert "the test" in said[0] and "waiting for it to finish" in said[0], said
    assert result["value"][1] == "executed" and result["value"][0]["value"] == 8
    assert not list(out.glob(".*running*"))


def test_the_lock_wait_names_the_holder_not_an_earlier_run(project):
    """An exclusive run leaves no name behind: a later shared holder (a cache check) is not
    reported as the command that ran the chapter before it (issue 36, item 10)."""
    out = project / "book" / "executed"
    ch = runner.get_chapter("98", project)
    with runner.chapter_lock(out, ch, about="nearid run 98 (long finished)"):
        pass
    said = []
    with runner.chapter_lock(out, ch, exclusive=False):
        thread = threading.Thread(target=lambda: runner.chapter_lock(out, ch, say=said.append).__enter__(),
                                  daemon=True)
        thread.start()
        until(lambda: said, 60)
    thread.join(60)
    assert "long finished" not in said[0] and "reading the chapter's outputs" in said[0], said


def test_a_key_serves_only_its_own_outputs(project):
    """The .key names the sha256 of the notebook and JSON it was written with: outputs that
    another run replaced are not served under it (they were, with seed 1's numbers for seed 0)."""
    out = project / "book" / "executed"
    ch = runner.get_chapter("98", project)
    runner.run_chapter("98", "smoke", root=project)
    key = json.loads((out / "98_tiny.key").read_text())
    assert set(key["outputs"]) == {"ipynb", "json"}
    params = profiles.resolve("98_tiny", "smoke")
    assert runner.is_cached(ch, runner.cache_key(ch, "smoke", params, out), out)
    doc = json.loads((out / "98_tiny.json").read_text())
    (out / "98_tiny.json").write_text(json.dumps({**doc, "value": 99}))  # another run's JSON
    assert not runner.is_cached(ch, runner.cache_key(ch, "smoke", params, out), out)
    assert runner.run_chapter_outcome("98", "smoke", root=project)[1] == "executed"
    # a key written before keys named their outputs: its parameters must match the JSON's
    legacy = {k: v for k, v in json.loads((out / "98_tiny.key").read_text()).items() if k != "outputs"}
    (out / "98_tiny.key").write_text(json.dumps(legacy))
    assert runner.is_cached(ch, runner.cache_key(ch, "smoke", params, out), out)
    (out / "98_tiny.json").write_text(json.dumps({**doc, "params": {**doc["params"], "value": 5}}))
    assert not runner.is_cached(ch, runner.cache_key(ch, "smoke", params, out), out)


def test_files_of_a_killed_run_are_removed_by_the_next(project):
    out = project / "book" / "executed"
    out.mkdir(parents=True)
    dead = 2 ** 22 + 12345  # above the default pid_max: no such process
    stale = out / f".98_tiny.running.{dead}-0badc0de.ipynb"
    live = out / f".98_tiny.running.{os.getpid()}-1badc0de.ipynb"  # this very process: alive
    stale.write_text("{}")
    live.write_text("{}")
    runner.run_chapter("98", "smoke", root=project)
    assert not stale.exists() and live.exists()


# ----------------------------------------------------------------------------- exit codes and messages
@pytest.fixture
def cli_project(project, monkeypatch):
    monkeypatch.setenv("NEARID_ROOT", str(project))
    from nearid.cli import main as cli

    return cli


def test_exit_codes_ok_failed_refused(cli_project, capsys):
    cli = cli_project
    assert cli.main(["run", "98", "--profile", "smoke"]) == 0
    assert capsys.readouterr().out.startswith("98_tiny: executed in ")
    assert cli.main(["run", "98", "--profile", "smoke"]) == 0
    assert capsys.readouterr().out.startswith("98_tiny: cached (nothing ran): ")
    assert cli.main(["run", "98", "--profile", "smoke", "-p", "fail=True"]) == 1, "a failed chapter"
    err = capsys.readouterr().err
    assert err.startswith("nearid run: chapter 98_tiny failed in cell") and err.count("\n") == 1, err
    assert cli.main(["run", "98", "--profile", "smoke", "-p", "value=1", "-p", "value=2"]) == 2, "bad input"
    assert "parameter 'value' is given twice (-p value=1 and -p value=2)" in capsys.readouterr().err


def test_a_book_with_a_failed_chapter_exits_1(cli_project, project, capsys):
    (project / "notebooks" / "98_tiny.py").write_text(TINY.replace('"fail": False', '"fail": True'))
    assert cli_project.main(["book", "--profile", "smoke", "--only", "98", "--no-build", "--jobs", "1"]) == 1
    assert "chapter 98_tiny failed in cell" in capsys.readouterr().err


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(cli_project, project, capsys):
    (project / "book").mkdir()
    (project / "book" / "executed").write_text("a file where the folder should be")
    start = time.monotonic()
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nearid run: error: cannot write the chapter's outputs to ") and err.count("\n") == 1
    assert time.monotonic() - start < 30 and not _kernel_pids(project)


def test_a_cached_run_in_a_read_only_folder_serves_its_results(cli_project, project, monkeypatch, capsys):
    """The "How this book was run" page cannot be rewritten: one line says so, the cached
    results are served, exit 0 (a read-only mount is simulated: the tests run as root)."""
    import errno

    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 0
    capsys.readouterr()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    from nearid.book import report

    monkeypatch.setattr(report, "atomic_write_text", read_only)
    assert cli_project.main(["run", "98", "--profile", "smoke", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["value"] == 2
    lines = captured.err.splitlines()
    assert len(lines) == 2 and "was not rewritten (Read-only file system)" in lines[0], lines
    assert lines[1].startswith("98_tiny: cached (nothing ran)")


def test_force_from_the_caller_is_kept_for_the_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARID_FORCE", "1")
    with runner._kernel_environment(tmp_path, force=False):
        assert os.environ["NEARID_FORCE"] == "1"
    monkeypatch.delenv("NEARID_FORCE")
    with runner._kernel_environment(tmp_path, force=False):
        assert os.environ["NEARID_FORCE"] == "0"
    with runner._kernel_environment(tmp_path, force=True):
        assert os.environ["NEARID_FORCE"] == "1"
    assert "NEARID_FORCE" not in os.environ


def test_chapters_in_threads_leave_the_environment_as_they_found_it(tmp_path, monkeypatch):
    """run_book runs chapters in threads: interleaved entries and exits must restore the
    caller's environment once, not leave one chapter's task cache behind."""
    monkeypatch.delenv("NEARID_TASK_CACHE", raising=False)
    a, b = runner._kernel_environment(tmp_path / "a", force=False), runner._kernel_environment(tmp_path / "b", force=False)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert "NEARID_TASK_CACHE" in os.environ  # b still runs
    b.__exit__(None, None, None)
    assert "NEARID_TASK_CACHE" not in os.environ


def test_the_registry_of_claims_is_part_of_every_chapters_key(root):
    """Every chapter's save checks its verdicts against lib/nearid/claims.yaml and the summary
    reads kinds from it: a registry edit must re-execute, though the file is not Python."""
    from nearid import claims

    for ch in runner.list_chapters(root):
        assert runner.chapter_code(ch)["nearid/claims.yaml"] == claims.REGISTRY, ch.key


def test_report_sets_each_profile_beside_the_papers_setup(project):
    """`full` is said to be the largest we define, not the paper's models, and each chapter's
    row puts the paper's setup beside the sizes of smoke, quick and full."""
    from nearid import paper
    from nearid.book import profiles

    report = runner.write_run_report(project / "book" / "executed", project).read_text()
    assert "## What each profile runs" in report and "not the paper's models or data" in report
    row = next(line for line in report.splitlines() if line.startswith("| 04_alignment |"))
    assert paper.SETUPS["04_alignment"] in row and "Pythia-160M checkpoints from data/pythia" in row
    full = profiles.CHAPTERS["04_alignment"]["full"]["mnist_train"]
    assert f"mnist_train {full:,}" in row.split(" | ")[-1]
    assert "paper scale" not in report


def test_what_a_change_re_executes(root):
    """`nearid affected`: the chapters whose cache key covers a file, then those reading them."""
    every = [ch.key for ch in runner.list_chapters(root)]
    got = runner.affected_chapters(["notebooks/03_bilipschitz.py", "lib/nearid/claims.yaml", "README.md",
                                    "requirements/lock.txt", "lib/nearid/models/conv.py"], root)
    assert got["notebooks/03_bilipschitz.py"] == (["03_bilipschitz"], ["07_summary"])
    assert got["lib/nearid/claims.yaml"] == (every, []), "every chapter's save checks the registry"
    assert got["README.md"] == ([], []) and got["requirements/lock.txt"] == (every, [])
    assert got["lib/nearid/models/conv.py"] == (["05_disentanglement"], ["07_summary"])
