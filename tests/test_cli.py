import subprocess
import sys

import pytest

from nearid import cli


def test_bad_profile_exits_2_with_valid_list(capsys):
    assert cli.main(["run", "02", "--profile", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown profile" in err and "smoke, quick, full" in err


def test_bad_param_exits_2(capsys):
    assert cli.main(["run", "02", "-p", "sedes=3"]) == 2
    assert "unknown parameter 'sedes'" in capsys.readouterr().err
    assert cli.main(["run", "02", "-p", "seeds=three"]) == 2
    assert "must be an int" in capsys.readouterr().err


def test_unknown_chapter(capsys):
    assert cli.main(["run", "42"]) == 2
    assert "01 (01_definitions)" in capsys.readouterr().err


def test_params_lists_every_profile(capsys):
    assert cli.main(["params", "02"]) == 0
    out = capsys.readouterr().out
    assert "[smoke]" in out and "[full]" in out and "seeds" in out


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "nearid.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "book" in out.stdout and "data" in out.stdout


def test_data_command(tmp_path, capsys):
    assert cli.main(["data", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok") == 5


@pytest.mark.parametrize("argv", [["book", "--jobs", "0", "--no-build"]])
def test_book_bad_jobs(argv, capsys):
    assert cli.main(argv) == 2
    assert "jobs" in capsys.readouterr().err
