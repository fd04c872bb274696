import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nearid.cli import main as cli


def test_bad_profile_exits_2_with_valid_list(capsys):
    assert cli.main(["run", "02", "--profile", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown profile" in err and "smoke, quick, full" in err


def test_bad_param_exits_2(capsys):
    assert cli.main(["run", "02", "-p", "sedes=3"]) == 2
    assert "unknown parameter 'sedes'" in capsys.readouterr().err
    assert cli.main(["run", "02", "-p", "seeds=three"]) == 2
    assert "'seeds' got 'three'; allowed: an int >= 2" in capsys.readouterr().err


def test_unknown_chapter(capsys):
    assert cli.main(["run", "42"]) == 2
    assert "01 (01_definitions)" in capsys.readouterr().err


def test_params_lists_every_profile_and_what_is_allowed(capsys):
    assert cli.main(["params", "02"]) == 0
    out = capsys.readouterr().out
    assert "[smoke]" in out and "[full]" in out and "seeds" in out
    assert "seeds: an int >= 2" in out


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "nearid.cli.main", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "book" in out.stdout and "data" in out.stdout


def test_data_command(tmp_path, capsys):
    assert cli.main(["data", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok") == 5


@pytest.mark.parametrize("argv", [["book", "--jobs", "0", "--no-build"]])
def test_book_bad_jobs(argv, capsys):
    assert cli.main(argv) == 2
    assert "jobs" in capsys.readouterr().err


@pytest.fixture
def scratch_root(tmp_path, root):
    """A checkout-shaped folder whose chapters are the real ones: anything written shows."""
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks").symlink_to(root / "notebooks")
    return tmp_path


@pytest.mark.parametrize("argv,message", [
    (["run", "04", "-p", "fit_fraction=1.5"], "'fit_fraction' got 1.5; allowed: a number in (0, 1)"),
    (["run", "04", "-p", "fit_fraction=0"], "'fit_fraction' got 0; allowed: a number in (0, 1)"),
    (["run", "02", "-p", "seeds=0"], "'seeds' got 0; allowed: an int >= 2"),
    (["run", "02", "-p", "seeds=1"], "'seeds' got 1; allowed: an int >= 2"),
    (["run", "03", "-p", "epochs=-1"], "'epochs' got -1; allowed: an int >= 1"),
    (["run", "03", "-p", "alphas=[]"], "'alphas' got []; allowed: a list of at least 1 element"),
    (["run", "01", "-p", "noise_levels=[]"], "'noise_levels' got []; allowed: a list of at least 1 element"),
    (["run", "02", "-p", "deltas=[]"], "'deltas' got []; allowed: a list of at least 1 element"),
    (["run", "05", "-p", "datasets=['nope']"], "element 0 is 'nope'"),
])
def test_bad_values_exit_at_once_and_write_nothing(scratch_root, argv, message):
    start = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).with_name("nearid")), *argv], capture_output=True,
                          text=True, cwd=scratch_root, env={**os.environ, "NEARID_ROOT": str(scratch_root)})
    seconds = time.perf_counter() - start
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stdout == ""
    assert seconds < 10
    assert sorted(p.name for p in scratch_root.iterdir()) == ["lib", "notebooks"], "nothing may be written"
