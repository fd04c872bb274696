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
