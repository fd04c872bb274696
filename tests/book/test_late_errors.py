"""Issue 36, items 9 and 10: what used to fail late (rc 1, seconds into a cell) or with a
traceback is refused before any work, with exit code 2 and one line that names the variable,
parameter or file and what it accepts."""

import time

import test_hardening

project, cli_project = test_hardening.project, test_hardening.cli_project  # the same fixtures


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
