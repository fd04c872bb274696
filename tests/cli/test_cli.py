import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import until

from nearid.cli import main as cli


def test_bad_profile_exits_2_with_valid_list(capsys):
    assert cli.main(["run", "02", "--profile", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown profile" in err and "smoke, quick, full" in err


def test_bad_param_exits_2(capsys):
    assert cli.main(["run", "02", "-p", "sedes=3"]) == 2
    assert "unknown parameter 'sedes'" in capsys.readouterr().err
    assert cli.main(["run", "02", "-p", "seeds=three"]) == 2
    assert "'seeds' got 'three'; allowed: an int in [2, 1000]" in capsys.readouterr().err


def test_unknown_chapter(capsys):
    assert cli.main(["run", "42"]) == 2
    assert "01 (01_definitions)" in capsys.readouterr().err


def test_params_lists_every_profile_and_what_is_allowed(capsys):
    assert cli.main(["params", "02"]) == 0
    out = capsys.readouterr().out
    assert "[smoke]" in out and "[full]" in out and "seeds" in out
    assert "seeds: an int in [2, 1000]" in out


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "nearid.cli.main", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "book" in out.stdout and "data" in out.stdout


NEARID = str(Path(sys.executable).with_name("nearid"))
TASK_SUMMARY = re.compile(r"\d+ tasks: ")  # the task runner's summary line, for the terminal


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "NEARID_ROOT"}
    return {**env, **extra}


def test_data_command_keeps_the_readme(tmp_path, monkeypatch, capsys):
    """`rm -rf data; nearid data` in a checkout: everything comes back, the tracked README too,
    and the provisioned files sit apart from it, under data/provisioned/."""
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "README.md").write_text("what data/ holds\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "data/README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "readme"], check=True)
    subprocess.run(["rm", "-rf", str(tmp_path / "data")], check=True)
    monkeypatch.setenv("NEARID_ROOT", str(tmp_path))
    assert cli.main(["data"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("ok") == 5
    assert "restored data/README.md" in captured.err
    assert (tmp_path / "data" / "README.md").read_text() == "what data/ holds\n"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["README.md", "provisioned"]
    assert (tmp_path / "data" / "provisioned" / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file()
    assert (tmp_path / "data" / "provisioned" / "shakespeare" / "plays.txt").is_file()


def test_data_outside_a_checkout_refuses_and_writes_nothing(tmp_path):
    proc = subprocess.run([NEARID, "data"], capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert proc.returncode == 2
    assert "not inside a nearid checkout" in proc.stderr and "--root" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_run_json_pipes_into_json_tool(scratch_root):
    """`nearid run 01 --json | python -m json.tool`: stdout is the JSON alone, executed or cached;
    the status line on stderr says which, and nothing else is printed (no kernel warnings)."""
    for how in ("executed in ", "cached (nothing ran)"):  # the second run is a cache hit
        proc = subprocess.run(["bash", "-c", f"set -o pipefail; '{NEARID}' run 01 --profile smoke --json "
                               f"| '{sys.executable}' -m json.tool"], capture_output=True, text=True,
                              cwd=scratch_root, env=_env(NEARID_ROOT=str(scratch_root)))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["profile"] == "smoke"
        # the chapter's task summary ('8 tasks: ...') reaches the terminal (runner_log); nothing else
        status = [line for line in proc.stderr.splitlines() if not TASK_SUMMARY.match(line)]
        assert len(status) == 1, "one status line; no 'Kernel is running over TCP' warning"
        assert status[0].startswith(f"01_definitions: {how}"), proc.stderr
        assert "book/executed/01_definitions.ipynb" in status[0]


def _kernels(pid):
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if "nearid.book.kernel" in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return found


def _gone(pid):
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _start_running(scratch_root):
    """`nearid run 01 --force` started, returned once its kernel runs the chapter."""
    proc = subprocess.Popen([NEARID, "run", "01", "--profile", "smoke", "--force"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=scratch_root,
                            env=_env(NEARID_ROOT=str(scratch_root)))
    kernels = until(lambda: _kernels(proc.pid), 120)
    until(lambda: list((scratch_root / "book" / "executed").glob(".01_definitions.running*")), 120)
    return proc, kernels


def test_ctrl_c_prints_one_line_exits_130_and_cleans_up(scratch_root):
    out = scratch_root / "book" / "executed"
    first = subprocess.run([NEARID, "run", "01", "--profile", "smoke"], capture_output=True, text=True,
                           cwd=scratch_root, env=_env(NEARID_ROOT=str(scratch_root)))
    assert first.returncode == 0, first.stderr
    good = (out / "01_definitions.json").read_text()
    proc, kernels = _start_running(scratch_root)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == ["nearid run: interrupted; the last good output is kept"], stderr
    assert not list(out.glob(".*running*"))
    assert (out / "01_definitions.json").read_text() == good
    assert all(until(lambda: _gone(k), 5) for k in kernels)


def test_sigterm_is_handled_like_ctrl_c_exits_143_and_is_recorded(scratch_root):
    out = scratch_root / "book" / "executed"
    proc, kernels = _start_running(scratch_root)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == ["nearid run: terminated (SIGTERM); the last good output is kept"], stderr
    assert not list(out.glob(".*running*")), "no hidden file of the run is left"
    records = json.loads((out / "timings.json").read_text())
    assert [r["status"] for r in records] == ["terminated"]
    assert all(until(lambda: _gone(k), 5) for k in kernels)


def test_kernel_dies_with_a_killed_nearid(scratch_root):
    proc, kernels = _start_running(scratch_root)
    proc.kill()
    proc.communicate()
    start = time.monotonic()
    assert all(until(lambda: _gone(k), 10) for k in kernels)
    assert time.monotonic() - start < 3, "the kernel outlived nearid"


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
    (["run", "02", "-p", "seeds=0"], "'seeds' got 0; allowed: an int in [2, 1000]"),
    (["run", "02", "-p", "seeds=1"], "'seeds' got 1; allowed: an int in [2, 1000]"),
    (["run", "03", "-p", "epochs=-1"], "'epochs' got -1; allowed: an int in [1, 100000]"),
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


def test_ctrl_c_in_a_parallel_book_stops_every_chapter(scratch_root):
    """Ctrl-C in a terminal signals the whole foreground process group: the runner and its
    chapter processes (kernels have sessions of their own). All stop, one line, exit 130."""
    proc = subprocess.Popen([NEARID, "book", "--profile", "smoke", "--only", "01", "02", "--force",
                             "--no-build", "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=scratch_root, env=_env(NEARID_ROOT=str(scratch_root)),
                            start_new_session=True)
    kernels = until(lambda: len(_kernels(proc.pid)) == 2 and _kernels(proc.pid), 180)
    until(lambda: len(list((scratch_root / "book" / "executed").glob(".*.running.*.ipynb"))) == 2, 120)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("chapters (smoke)")]
    assert lines == ["nearid book: interrupted; the last good output is kept"], stderr
    assert "Traceback" not in stderr
    assert not list((scratch_root / "book" / "executed").glob(".*running*"))
    assert all(until(lambda: _gone(k), 5) for k in kernels)
