"""A chapter's sweep through the runner: the kernel finds the task cache the runner points it
at, `--force` recomputes the tasks, a re-executed chapter reuses finished tasks, and inside
the kernel there is no progress bar and the summary line goes to the terminal, not the page."""

import json
import os
import textwrap
from pathlib import Path

import nbformat
import pytest

import task_functions as tf
from nearid.book import profiles, runner
from nearid.book.params import Interval

CHAPTER = textwrap.dedent('''\
    # %% tags=["parameters"]
    profile = "quick"
    overrides = {}
    results_path = None

    # %%
    import task_functions as tf
    from nearid.book.results import save
    from nearid.tasks import Task, run_tasks

    P = {"n": 3, **overrides}
    out = run_tasks([Task(tf.flaky, {"x": i}, label=f"x={i}") for i in range(P["n"])])
    save(results_path, {"xs": [r["x"] for r in out]}, params=P, profile=profile)
    ''')


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks" / "97_sweep.py").write_text(CHAPTER)
    monkeypatch.setitem(profiles.CHAPTERS, "97_sweep", {p: {"n": 3} for p in profiles.PROFILES})
    monkeypatch.setitem(profiles.CONSTRAINTS, "97_sweep", {"n": Interval(int, 1)})
    monkeypatch.delenv("NEARID_TASK_CACHE", raising=False)
    monkeypatch.delenv("NEARID_EXECUTOR", raising=False)
    tests_dir = str(Path(tf.__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*os.environ.get("PYTHONPATH", "").split(os.pathsep), tests_dir]))
    return tmp_path


def _outputs(project) -> tuple[str, str]:
    nb = nbformat.read(project / "book" / "executed" / "97_sweep.ipynb", as_version=4)
    streams = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"]
    return ("".join(o["text"] for o in streams if o["name"] == "stdout"),
            "".join(o["text"] for o in streams if o["name"] == "stderr"))


def test_a_chapter_sweep_on_a_process_pool_from_the_kernel(project, monkeypatch, capfd):
    """Spawned workers started from inside a papermill kernel (its __main__ is ipykernel's)."""
    monkeypatch.setenv("NEARID_EXECUTOR", "processes")
    monkeypatch.setenv("NEARID_WORKERS", "2")
    assert runner.run_chapter("97", "smoke", root=project)["xs"] == [0, 1, 2]
    err = capfd.readouterr().err  # the kernel's own stderr: the terminal that ran the chapter
    assert "3 tasks: 0 reused, 3 computed" in err and "processes x2" in err
    assert "tasks:" not in "".join(_outputs(project)), "bookkeeping stays off the page"


def test_a_chapter_sweep_resumes_and_forces_through_the_runner(project, capfd):
    res = runner.run_chapter("97", "smoke", root=project)
    assert res["xs"] == [0, 1, 2]
    out, err = _outputs(project)
    # the summary line goes to the kernel's own stderr (the terminal), neither it nor a line
    # per task nor a bar into the page
    assert "tasks:" not in out + err and "x=0" not in out and "tasks (" not in err
    assert "3 tasks: 0 reused, 3 computed" in capfd.readouterr().err
    assert len(list((project / ".cache" / "tasks").rglob("*.entry"))) == 3, "the runner's cache folder"
    runner.run_chapter("97", "smoke", {"n": 4}, root=project)  # new parameters: the chapter runs again
    assert "4 tasks: 3 reused, 1 computed" in capfd.readouterr().err
    runner.run_chapter("97", "smoke", {"n": 4}, root=project, force=True)
    assert "4 tasks: 0 reused, 4 computed" in capfd.readouterr().err, "--force recomputes the tasks"
    assert json.loads((project / "book" / "executed" / "97_sweep.json").read_text())["xs"] == [0, 1, 2, 3]


def test_scale_out_parameters_check_their_values():
    from nearid.book.params import InvalidParameterError
    from nearid.book.profiles.shared import DRY_RUN, EXECUTOR, SCHEDULER

    for ok in ("", "local", "tcp://127.0.0.1:8786", "node7:8786", "tls://gpu-3.cluster:8786"):
        assert SCHEDULER.check("scheduler", ok) == ok
    for bad in ("tcp:/host", "tcp://host:port", "two words", 8786):
        with pytest.raises(InvalidParameterError, match="Dask scheduler address"):
            SCHEDULER.check("scheduler", bad)
    assert EXECUTOR.check("executor", "processes") == "processes"
    with pytest.raises(InvalidParameterError):
        EXECUTOR.check("executor", "threads")
    assert DRY_RUN.check("dry_run", True) is True
