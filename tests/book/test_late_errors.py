"""Issue 36, items 9 and 10: what used to fail late (rc 1, seconds into a cell) or with a
traceback is refused before any work, with exit code 2 and one line that names the variable,
parameter or file and what it accepts."""

import time

import pytest

import test_hardening

project, cli_project = test_hardening.project, test_hardening.cli_project  # the same fixtures


@pytest.fixture
def scratch_root(tmp_path, monkeypatch):
    """A checkout of the real chapters in which nothing of the real one is written."""
    from nearid.book import runner

    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks").symlink_to(runner.find_root() / "notebooks")
    monkeypatch.setenv("NEARID_ROOT", str(tmp_path))
    return tmp_path


# ------------------------------------------------------------------ caches and data folders
def test_the_default_task_cache_is_checked_before_a_chapter_executes(cli_project, project, monkeypatch, capsys):
    monkeypatch.delenv("NEARID_TASK_CACHE", raising=False)
    (project / ".cache").write_text("a file where the cache folder belongs")
    start = time.monotonic()
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the task cache" in err and "($NEARID_TASK_CACHE unset)" in err, err
    assert "is a file, not a folder" in err and time.monotonic() - start < 20
    assert not list((project / "book" / "executed").glob("98_tiny.*")), "nothing ran"
    assert cli_project.main(["book", "--profile", "smoke", "--only", "98", "--no-build"]) == 2
    assert "($NEARID_TASK_CACHE unset)" in capsys.readouterr().err


def test_nearid_data_writes_where_nearid_data_points(tmp_path, monkeypatch, capsys):
    from nearid.cli import main as cli

    monkeypatch.setenv("NEARID_DATA", "/etc/passwd")
    assert cli.main(["data"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "$NEARID_DATA is '/etc/passwd', which is a file, not a folder; allowed:" in err
    monkeypatch.setenv("NEARID_DATA", str(tmp_path / "mine"))
    assert cli.main(["data"]) == 0
    assert (tmp_path / "mine" / "provisioned" / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file()


# ------------------------------------------------------------------ sizes of a run
def _int_intervals(constraint):
    """The int Interval of a constraint, or of a list's elements; None for other kinds."""
    from nearid.constraints import Interval, ListOf

    inner = constraint.item if isinstance(constraint, ListOf) else constraint
    return inner if isinstance(inner, Interval) and inner.kind is int else None


def test_every_whole_number_parameter_has_an_upper_bound_far_above_full():
    from nearid.book import params, profiles

    SIZE_BOUNDS = {params.MAX_WIDTH, params.MAX_ROWS, params.MAX_EPOCHS, params.MAX_BATCH, params.MAX_DEPTH,
                   params.MAX_IMAGE, params.MAX_COUNT}

    for chapter, constraints in profiles.CONSTRAINTS.items():
        full = profiles.CHAPTERS[chapter]["full"]
        for name, constraint in constraints.items():
            interval = _int_intervals(constraint)
            if interval is None:
                continue
            assert interval.high is not None, f"{chapter}: {name} has no upper bound"
            if interval.high not in SIZE_BOUNDS:
                continue  # a data set's size (MNIST's 60,000 images), the seed, the replicates
            values = full.get(name, [])
            for value in values if isinstance(values, list) else [values]:
                assert value <= interval.high / 8, (chapter, name, value, interval.high)


@pytest.mark.parametrize("chapter,param,value", [("02", "hidden", 2_000_000_000), ("05", "hidden", 2_000_000_000),
                                                 ("03", "hidden", [2_000_000_000]), ("04", "lm_train_windows", 10**12),
                                                 ("06", "cells_per_well", 10**9), ("02", "epochs", 10**9)])
def test_a_huge_size_is_refused_before_any_work_with_its_range(scratch_root, chapter, param, value, capsys):
    from nearid.cli import main as cli

    start = time.monotonic()
    assert cli.main(["run", chapter, "--profile", "smoke", "-p", f"{param}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"'{param}" in err and "allowed: " in err and "an int in [" in err, err
    assert time.monotonic() - start < 20
    assert sorted(p.name for p in scratch_root.iterdir()) == ["lib", "notebooks"], "nothing ran"


# ------------------------------------------------------------------ files given as parameters
def _rxrx_files(tmp_path, features=None):
    import pandas as pd

    from nearid.data.rxrx import METADATA_COLUMNS

    emb, meta = tmp_path / "emb.parquet", tmp_path / "meta.csv"
    pd.DataFrame({"well_id": ["w1", "w2"], **(features or {"feature_0": [0.5, 1.5]})}).to_parquet(emb)
    meta.write_text(",".join(METADATA_COLUMNS) + "\nw1,e,1,A01,PLK1,PLK1_guide_1,,,CRISPR,HUVEC\n")
    return str(emb), str(meta)


def test_rxrx_files_are_looked_into_before_any_work(scratch_root, tmp_path, capsys):
    from nearid.book import profiles
    from nearid.cli import main as cli
    from nearid.constraints import InvalidParameterError

    emb, meta = _rxrx_files(tmp_path)
    assert profiles.resolve("06", "smoke", {"rxrx_embeddings": emb, "rxrx_metadata": meta})["rxrx_embeddings"] == emb
    start = time.monotonic()
    assert cli.main(["run", "06", "--profile", "smoke", "-p", "rxrx_embeddings=/etc/passwd",
                     "-p", f"rxrx_metadata={meta}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and time.monotonic() - start < 20
    assert "'rxrx_embeddings' got '/etc/passwd': /etc/passwd is not a Parquet file" in err and "allowed: " in err
    assert sorted(p.name for p in scratch_root.iterdir()) == ["emb.parquet", "lib", "meta.csv", "notebooks"]
    with pytest.raises(InvalidParameterError, match="'rxrx_metadata' got '/etc/passwd': /etc/passwd is not "
                                                    "RxRx3-core metadata: its header lacks"):
        profiles.resolve("06", "smoke", {"rxrx_embeddings": emb, "rxrx_metadata": "/etc/passwd"})
    (tmp_path / "strings").mkdir()
    strings, _ = _rxrx_files(tmp_path / "strings", {"feature_0": ["a", "b"]})
    with pytest.raises(InvalidParameterError, match=f"{strings}: feature columns must be numeric"):
        profiles.resolve("06", "smoke", {"rxrx_embeddings": strings, "rxrx_metadata": meta})


# ------------------------------------------------------------------ output files of commands
def test_plan_checks_its_json_path_before_timing_anything(monkeypatch, tmp_path, capsys):
    from nearid import planning
    from nearid.cli import main as cli

    monkeypatch.setattr(planning, "plan_chapters", lambda *a, **k: pytest.fail("timed before the check"))
    (tmp_path / "afile").write_text("x")
    for target, words in ((tmp_path / "afile" / "plan.json", "is a file, not a folder"),
                          (tmp_path / "afile" / "deeper" / "plan.json", "cannot be made: "),
                          (tmp_path, "is a folder")):
        start = time.monotonic()
        assert cli.main(["plan", "01", "--profile", "smoke", "--json", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--json {target}: cannot write the estimates there" in err, err
        assert words in err and time.monotonic() - start < 20


def test_plan_never_writes_its_json_through_a_link(monkeypatch, tmp_path, capsys):
    from nearid import planning
    from nearid.cli import main as cli

    victim, link = tmp_path / "victim.txt", tmp_path / "plan.json"
    victim.write_text("precious\n")
    link.symlink_to(victim)
    monkeypatch.setattr(planning, "plan_chapters", lambda *a, **k: pytest.fail("timed before the check"))
    assert cli.main(["plan", "01", "--profile", "smoke", "--json", str(link)]) == 2
    assert "is a symbolic link" in capsys.readouterr().err and victim.read_text() == "precious\n"


def test_align_checks_its_plot_path_before_computing(tmp_path, monkeypatch, capsys):
    import numpy as np

    from nearid.cli import align as align_cli

    monkeypatch.setattr(align_cli, "compute_layers", lambda *a, **k: pytest.fail("computed before the check"))
    np.savez(tmp_path / "a.npz", x=np.ones((10, 2)))
    (tmp_path / "afile").write_text("x")
    for target, words in ((tmp_path / "afile" / "sub" / "map.png", "cannot be made: "),
                          (tmp_path / "afile" / "map.png", "is a file, not a folder")):
        args = ["--layers", str(tmp_path / "a.npz"), str(tmp_path / "a.npz"), "--plot", str(target)]
        assert align_cli.main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot write the heatmap there" in err and words in err, err


def test_the_heatmap_is_never_written_through_a_link(tmp_path):
    import pandas as pd

    from nearid.book.plotting import plot_layer_matrix
    from nearid.fileio import UnsafePath

    victim, link = tmp_path / "victim.txt", tmp_path / "map.png"
    victim.write_text("precious\n")
    link.symlink_to(victim)
    df = pd.DataFrame([[0.1, 0.2], [0.3, 0.4]], index=["a0", "a1"], columns=["b0", "b1"])
    df.attrs.update(metric="rigid", lower_is_better=True)
    with pytest.raises(UnsafePath):
        plot_layer_matrix(df, link)
    assert victim.read_text() == "precious\n"
    plot_layer_matrix(df, tmp_path / "ok.svg")
    assert (tmp_path / "ok.svg").read_text().lstrip().startswith("<?xml")


def test_papermill_saves_the_working_notebook_without_following_links(tmp_path):
    import nbformat
    from papermill.iorw import write_ipynb

    from nearid.book import runner
    from nearid.fileio import UnsafePath

    runner._papermill_writes_without_following_links()
    runner._papermill_writes_without_following_links()  # twice: still one handler
    nb = nbformat.v4.new_notebook()
    victim, link = tmp_path / "victim.txt", tmp_path / ".01_x.running.1-ab.ipynb"
    victim.write_text("precious\n")
    link.symlink_to(victim)
    with pytest.raises(UnsafePath):
        write_ipynb(nb, str(link))
    assert victim.read_text() == "precious\n"
    write_ipynb(nb, str(tmp_path / "ok.ipynb"))
    assert nbformat.read(tmp_path / "ok.ipynb", as_version=4).cells == []


def test_the_pdf_and_its_page_are_never_written_through_links(tmp_path):
    from nearid.book import pdf
    from nearid.fileio import UnsafePath

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "book.pdf").symlink_to(victim)
    html = tmp_path / "index.html"
    html.write_text('<meta http-equiv="refresh" content="0; url=book/intro.html">')
    with pytest.raises(UnsafePath):
        pdf.print_pdf("true", html, tmp_path / "book.pdf")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.html").write_text("<p>intro</p>")
    (tmp_path / "nearid-book.html").symlink_to(victim)
    with pytest.raises(UnsafePath):
        pdf.single_page(tmp_path)
    assert victim.read_text() == "precious\n"


# ------------------------------------------------------------------ polish (item 10)
def test_100000_minus_signs_and_100_kb_values_give_one_short_line():
    from nearid.book import profiles
    from nearid.constraints import InvalidParameterError

    for text in ("seed=" + "-" * 100_000 + "1", "hidden=" + "x" * 100_000, "hidden=[" + "1," * 30_000 + "]"):
        key, value = profiles.parse_override(text)
        with pytest.raises(InvalidParameterError) as info:
            profiles.resolve("02", "smoke", {key: value})
        message = str(info.value)
        assert len(message) < 300 and "\n" not in message and "characters)" in message, message[:400]
    for texts in (["k" * 100_000 + "=1"], ["x" * 100_000], ["seed=1", "seed=" + "2" * 100_000]):
        with pytest.raises((ValueError, KeyError)) as info:
            profiles.resolve("02", "smoke", profiles.parse_overrides(texts))
        assert len(str(info.value)) < 600, str(info.value)[:700]


def test_only_the_same_chapter_twice_runs_it_once(cli_project, project, monkeypatch):
    import json

    from nearid.book import runner

    priced, check = [], runner.pricing.check
    monkeypatch.setattr(runner.pricing, "check", lambda costs, **k: (priced.append(len(costs)), check(costs, **k)))
    assert cli_project.main(["book", "--profile", "smoke", "--only", "98", "98_tiny", "--jobs", "2",
                             "--no-build"]) == 0
    assert priced == [1], "one chapter priced, once"
    runs = [r for r in json.loads((project / "book" / "executed" / "timings.json").read_text())
            if r["chapter"] == "98_tiny"]
    assert len(runs) == 1, runs


@pytest.fixture
def verified(cli_project, project):
    assert cli_project.main(["run", "98", "--profile", "smoke"]) == 0
    assert cli_project.main(["verify", "--profile", "smoke", "--update", "--only", "98"]) == 0
    return project / "book" / "executed", project / "book" / "reference" / "smoke"


@pytest.mark.parametrize("content,words", [("[]", "holds a JSON list, not a chapter's results"),
                                           ('{"value": ', "is not valid JSON (Expecting value at line 1"),
                                           ("fifo", "is not a regular file")])
def test_verify_names_a_results_file_that_is_not_one(cli_project, verified, content, words, capsys):
    import os

    executed, ref = verified
    path = executed / "98_tiny.json"
    path.unlink()
    if content == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(content)
    capsys.readouterr()
    start = time.monotonic()
    assert cli_project.main(["verify", "--profile", "smoke", "--only", "98", "98"]) == 1
    out = capsys.readouterr().out
    assert f"98_tiny: {path} {words}" in out and time.monotonic() - start < 20, out
    assert out.count(f"{path}") == 1, "the chapter is checked once"
    assert cli_project.main(["verify", "--profile", "smoke", "--update", "--only", "98"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path} {words}" in err, err


@pytest.mark.parametrize("content,mode,words", [("k\n", 0o600, "holds 2 bytes, fewer than a secret needs"),
                                                ("a-long-enough-team-secret\n", 0o666, "can be written by every user")])
def test_a_weak_cache_key_is_refused_before_work_and_when_read(tmp_path, monkeypatch, content, mode, words):
    import os

    from nearid import tasks

    key = tmp_path / "team.key"
    key.write_text(content)
    os.chmod(key, mode)
    problem = tasks.cache_environment_problem({"NEARID_CACHE_KEY_FILE": str(key)})
    assert problem and words in problem and "$NEARID_CACHE_KEY_FILE" in problem and "\n" not in problem
    monkeypatch.delenv("NEARID_CACHE_KEY", raising=False)
    monkeypatch.setenv("NEARID_CACHE_KEY_FILE", str(key))
    with pytest.raises(RuntimeError, match="fewer than 16|can be written by every user"):
        tasks.cache_secret()


def test_a_one_byte_secret_in_the_environment_is_refused(monkeypatch):
    from nearid import tasks

    problem = tasks.cache_environment_problem({"NEARID_CACHE_KEY": "k"})
    assert problem and "$NEARID_CACHE_KEY holds a secret of 1 bytes; allowed: at least 16 bytes" in problem
    monkeypatch.setenv("NEARID_CACHE_KEY", "k")
    with pytest.raises(RuntimeError, match="at least 16 bytes"):
        tasks.cache_secret()
    monkeypatch.setenv("NEARID_CACHE_KEY", "k" * 16)
    assert tasks.cache_secret() == b"k" * 16


# ------------------------------------------------------------------ memory limits (ulimit -v)
def test_a_memory_limit_gives_one_line_that_says_so(monkeypatch, capsys):
    """Under a low ``ulimit -v`` torch cannot map its libraries: the chapter's own failure is
    named with a hint, recording it does not fail too, and the CLI prints one line, not 30."""
    from nearid import env
    from nearid.book import runner
    from nearid.cli import main as cli

    hint = runner._memory_hint("ImportError", "libtorch_python.so: failed to map segment from shared object")
    assert "ulimit -v" in hint and runner._memory_hint("ValueError", "bad value") == ""

    def no_torch():
        raise ImportError("libtorch_python.so: failed to map segment from shared object")

    monkeypatch.setattr(env, "device_description", no_torch)
    assert runner._device_description().startswith("unknown (torch could not load: ImportError")

    def fails(args):
        raise MemoryError()

    parser = cli.build_parser()
    real_parse = parser.parse_args
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", lambda argv: real_parse(argv).__class__(
        **{**vars(real_parse(argv)), "func": fails}))
    assert cli.main(["plan", "01", "--profile", "smoke"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MemoryError" in err and "ulimit -v" in err, err


def test_a_nearid_root_without_chapters_is_named(tmp_path, monkeypatch, capsys):
    from nearid.cli import main as cli

    monkeypatch.setenv("NEARID_ROOT", str(tmp_path))
    assert cli.main(["run", "01", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"$NEARID_ROOT is '{tmp_path}', which holds no notebooks/ folder" in err, err
    monkeypatch.setenv("NEARID_ROOT", str(tmp_path / "missing"))
    assert cli.main(["verify", "--profile", "smoke"]) == 2
    assert "which does not exist" in capsys.readouterr().err


def test_a_kernel_killed_mid_cell_names_that_cell(tmp_path):
    """SIGKILL or a full disk leaves no error output; papermill's 'running' mark says where."""
    import nbformat

    from nearid.book import runner

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {i}") for i in range(4)])
    for i, status in enumerate(["completed", "completed", "running", "pending"]):
        nb.cells[i].metadata["papermill"] = {"status": status}
    path = tmp_path / "killed.ipynb"
    nbformat.write(nb, path)
    assert runner._failing_cell(path) == 2
    assert "failed in cell 2" in str(runner.ChapterFailed("01_definitions", 2, "DeadKernelError", path))

    for i, (status, start) in enumerate([("completed", "t0"), ("completed", "t1"), ("completed", None),
                                         ("completed", None)]):  # papermill closed the marks
        nb.cells[i].metadata["papermill"] = {"status": status, "start_time": start}
    nbformat.write(nb, path)
    assert runner._failing_cell(path) == 2


@pytest.mark.parametrize("hyper,message", [
    ({"beta_vae": {"beta": 1e300}},
     r"""parameter "hyper\['beta_vae'\]\['beta'\]" got 1e\+300; allowed: a number in \[0, 10000\]"""),
    ({"beta_vae": {"gamma": 1}}, r"'beta_vae' has no knob 'gamma'; allowed for 'beta_vae': beta"),
    ({"ae_ica": {"x": 1}}, r"allowed for 'ae_ica': none"),
    ({"beta_tcvae": {"dataset_size": 10 ** 12}}, r"an int in \[1, 1000000000\]"),
])
def test_chapter_05_model_knobs_are_bounded(hyper, message):
    """Chapter 05's hyper dict: unknown knobs and huge values refused before any work."""
    from nearid.book.profiles import resolve

    with pytest.raises(ValueError, match=message):
        resolve("05_disentanglement", "smoke", {"hyper": hyper})
    assert resolve("05_disentanglement", "smoke", {"hyper": {"bioae": {"nonneg_weight": 2}}})["hyper"] == {
        "bioae": {"nonneg_weight": 2.0}}


def test_a_full_disk_names_the_folder_and_its_free_space(tmp_path):
    import errno

    from nearid.book import runner

    said = runner._disk_full(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert said.startswith(f"No space left on device writing to {tmp_path} (") and "MB free there" in said
    assert runner._disk_full(OSError(errno.EACCES, "Permission denied"), tmp_path) is None
    failed = runner.ChapterFailed("01_definitions", 11, said, None, where="while writing its outputs after cell 11")
    assert str(failed).startswith("chapter 01_definitions failed while writing its outputs after cell 11: No space")
