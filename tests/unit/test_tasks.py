"""Sweeps as tasks: results in task order, a cache that lets a killed run resume, damaged or
partial cache entries recomputed, never used (the in-process executor; the pools and Dask are
in test_tasks_dask.py)."""

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import task_functions as tf
from nearid import tasks as tasks_mod
from nearid import safeformat
from nearid.safeformat import UnsafeValue
from nearid.tasks import Task, TaskCache, cache_secret, run_tasks, task_key

CALLS: list[int] = []
TESTS_DIR = Path(tf.__file__).resolve().parent
LIB_DIR = Path(tasks_mod.__file__).resolve().parents[1]


def square(x: int, fail_at: int | None = None) -> dict:
    """A pure task: its result depends on its arguments only."""
    if fail_at is not None and x == fail_at:
        raise RuntimeError(f"planted failure at {x}")
    CALLS.append(x)
    return {"x": x, "y": np.full(3, x * x)}


def _tasks(n=5, fail_at=None):
    return [Task(square, {"x": i, "fail_at": fail_at}, kind="square", label=f"x={i}") for i in range(n)]


def test_in_process_results_come_back_in_task_order(tmp_path):
    out = run_tasks(_tasks(), cache_dir=tmp_path, log=None)
    assert [r["x"] for r in out] == [0, 1, 2, 3, 4]
    assert out[3]["y"].tolist() == [9, 9, 9]


def test_a_killed_run_resumes_with_only_the_unfinished_tasks(tmp_path):
    CALLS.clear()
    with pytest.raises(RuntimeError, match="planted failure at 3"):
        run_tasks([Task(square, {"x": i, "fail_at": 3 if i == 3 else None}) for i in range(5)],
                  cache_dir=tmp_path, log=None)
    assert CALLS == [0, 1, 2]
    CALLS.clear()
    lines = []
    out = run_tasks([Task(square, {"x": i, "fail_at": None}) for i in range(5)], cache_dir=tmp_path,
                    log=lines.append)
    assert [r["x"] for r in out] == [0, 1, 2, 3, 4]
    assert CALLS == [3, 4], "finished tasks are reused, only the rest is computed"
    assert "5 tasks: 3 reused, 2 computed" in lines[-1]


def test_a_sigkilled_run_resumes(tmp_path):
    """The process running the sweep dies without any chance to clean up (SIGKILL at task 3);
    the rerun reuses the three finished tasks and computes the other two."""
    script = textwrap.dedent(f"""
        import sys
        from nearid.tasks import Task, run_tasks
        import task_functions as tf
        tasks = [Task(tf.killer, dict(x=i, kill_at=3, marker_dir={str(tmp_path / 'm')!r},
                                      calls_dir={str(tmp_path / 'calls')!r})) for i in range(5)]
        print(run_tasks(tasks, cache_dir={str(tmp_path / 'cache')!r}, progress=False))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LIB_DIR), str(TESTS_DIR)])}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert first.returncode == -9, first.stderr
    assert len(list((tmp_path / "calls").iterdir())) == 3
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "5 tasks: 3 reused, 2 computed" in second.stderr  # nearid.tasks.runner_log: bookkeeping, on stderr
    assert "[0, 10, 20, 30, 40]" in second.stdout
    assert sorted(p.name.split(".")[0] for p in (tmp_path / "calls").iterdir()) == [f"x-{i}" for i in range(5)]


def test_force_recomputes_everything(tmp_path):
    run_tasks(_tasks(3), cache_dir=tmp_path, log=None)
    CALLS.clear()
    run_tasks(_tasks(3), cache_dir=tmp_path, force=True, log=None)
    assert CALLS == [0, 1, 2]


def test_force_and_cache_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARID_TASK_CACHE", str(tmp_path))
    monkeypatch.setenv("NEARID_FORCE", "0")
    run_tasks(_tasks(2), log=None)
    CALLS.clear()
    run_tasks(_tasks(2), log=None)
    assert CALLS == []
    monkeypatch.setenv("NEARID_FORCE", "1")
    run_tasks(_tasks(2), log=None)
    assert CALLS == [0, 1]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "header", "old-format", "other-key"])
def test_damaged_entries_are_recomputed_never_used(tmp_path, damage):
    tasks = _tasks(2)
    run_tasks(tasks, cache_dir=tmp_path, log=None)
    cache = TaskCache(tmp_path)
    path = cache.path(task_key(tasks[1]))
    blob = path.read_bytes()
    header, _, payload = blob.partition(b"\n")
    other = cache.path(task_key(tasks[0])).read_bytes()
    path.write_bytes({"truncate": blob[: len(blob) // 2], "flip": blob[:-1] + bytes([blob[-1] ^ 1]),
                      "empty": b"", "header": header.replace(b"nearid-task 2", b"nearid-task 3") + b"\n" + payload,
                      "old-format": header.split(b" ")[3] + b"\n" + payload,  # the first format: digest line only
                      "other-key": other}[damage])
    status = "unauthenticated" if damage == "flip" else "damaged"  # a flipped payload fails its MAC
    assert cache.read(task_key(tasks[1])) == (status, None)
    CALLS.clear()
    lines = []
    out = run_tasks(tasks, cache_dir=tmp_path, log=lines.append)
    assert CALLS == [1] and out[1]["x"] == 1
    assert "2 tasks: 1 reused, 1 computed" in lines[-1] and f"1 {status} cache entry" in lines[-1]
    assert cache.read(task_key(tasks[1]))[0] == "ok", "the recomputed result replaces the damaged entry"


def test_partial_temporary_files_are_ignored_and_cleaned(tmp_path):
    """A writer killed mid-write leaves only a temporary file: never read as a result, removed
    when its writer is gone (same host, dead pid) or when it is a day old (any host)."""
    tasks = _tasks(3)
    cache = TaskCache(tmp_path)
    keys = [task_key(t) for t in tasks]
    folder = cache.path(keys[0]).parent
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    dead_writer = folder / f".{keys[0]}.entry.{host}.{dead.pid}.ab12cd34.tmp"
    live_writer = folder / f".{keys[0]}.entry.{host}.{os.getpid()}.ab12cd35.tmp"
    old_elsewhere = folder / f".{keys[0]}.entry.node-7.cluster.local.4242.ab12cd36.tmp"
    recent_elsewhere = folder / f".{keys[0]}.entry.node-7.cluster.local.4243.ab12cd37.tmp"
    for p in (dead_writer, live_writer, old_elsewhere, recent_elsewhere):
        p.write_bytes(b"nearid-task 2 " + keys[0].encode() + b" half a fi")
    day_ago = time.time() - 2 * TaskCache.STALE_SECONDS
    os.utime(old_elsewhere, (day_ago, day_ago))
    CALLS.clear()
    lines = []
    run_tasks(tasks, cache_dir=tmp_path, log=lines.append)
    assert CALLS == [0, 1, 2], "a temporary file is never taken for a result"
    assert not dead_writer.exists() and not old_elsewhere.exists()
    assert live_writer.exists() and recent_elsewhere.exists(), "a writer that may still finish is left alone"
    assert "2 abandoned temporary files removed" in lines[-1]
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == \
        sorted(cache.path(k).name for k in keys if k[:2] == keys[0][:2])


def test_put_refuses_values_that_need_pickle_and_leaves_no_file(tmp_path):
    cache = TaskCache(tmp_path)
    with pytest.raises(UnsafeValue, match=r"result\['f'\]: a builtins.function"):
        cache.put("ab" * 32, {"f": lambda: 0})
    assert list(tmp_path.rglob("*")) == []
    assert cache.read("ab" * 32) == ("missing", None)


def unstorable(*, x: int) -> dict:
    return {"x": x, "model": object()}


def test_a_result_that_cannot_be_stored_safely_is_used_and_said_not_cached(tmp_path):
    lines = []
    out = run_tasks([Task(unstorable, {"x": 1})], cache_dir=tmp_path, log=lines.append)
    assert out[0]["x"] == 1
    assert any(line.startswith("not cached") and "builtins.object" in line for line in lines)
    assert "1 result not cached (not storable without pickle)" in lines[-1]


# ------------------------------------------------------------ a cache someone else can write
_PWNED = "pwned.txt"


class _Payload:
    """Unpickling this runs a shell command that writes a marker file (the attack of issue 19)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_pickle_entry_runs_no_code(tmp_path):
    """An attacker who can write the cache folder plants pickles that run a command when
    unpickled: in the old format at the old path, in a format-2 header, and inside an npz
    member whose MAC is even valid (as if the secret had leaked). Nothing runs; each entry is
    recomputed."""
    import pickle

    marker = tmp_path / _PWNED
    tasks = _tasks(3)
    cache = TaskCache(tmp_path / "cache")
    keys = [task_key(t) for t in tasks]
    evil = pickle.dumps(_Payload(marker))
    import hashlib

    old = cache.path(keys[0]).with_suffix(".pkl")
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_bytes(b" ".join([b"nearid-task 1", keys[0].encode(), hashlib.sha256(evil).hexdigest().encode(),
                               str(len(evil)).encode()]) + b"\n" + evil)
    for key, payload in ((keys[1], evil), (keys[2], _npz_with_object_member(marker))):
        path = cache.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b" ".join([b"nearid-task 2", key.encode(), cache._mac(key, payload),
                                    str(len(payload)).encode()]) + b"\n" + payload)
    assert [cache.read(k)[0] for k in keys] == ["missing", "damaged", "damaged"]
    CALLS.clear()
    lines = []
    out = run_tasks(tasks, cache_dir=tmp_path / "cache", log=lines.append)
    assert [r["x"] for r in out] == [0, 1, 2] and CALLS == [0, 1, 2]
    assert not marker.exists(), "no code in the cache ran"
    assert "3 tasks: 0 reused, 3 computed" in lines[-1]


def _npz_with_object_member(marker: Path) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, tree=np.frombuffer(b'{"$": "ndarray", "array": "a0"}', np.uint8),
             a0=np.array([_Payload(marker)], dtype=object))
    return buf.getvalue()


def test_a_forged_entry_with_another_tasks_numbers_is_detected_and_recomputed(tmp_path):
    """Someone without the secret copies task 0's result under task 1's key with a
    well-formed header (their own MAC): the entry is refused and task 1 recomputed."""
    tasks = _tasks(2)
    run_tasks(tasks, cache_dir=tmp_path, log=None)
    theirs = TaskCache(tmp_path, secret=b"someone else's secret")
    key1 = task_key(tasks[1])
    _, _, payload0 = TaskCache(tmp_path).path(task_key(tasks[0])).read_bytes().partition(b"\n")
    theirs.path(key1).write_bytes(b" ".join([b"nearid-task 2", key1.encode(), theirs._mac(key1, payload0),
                                             str(len(payload0)).encode()]) + b"\n" + payload0)
    assert TaskCache(tmp_path).read(key1) == ("unauthenticated", None)
    CALLS.clear()
    lines = []
    out = run_tasks(tasks, cache_dir=tmp_path, log=lines.append)
    assert CALLS == [1] and out[1]["x"] == 1 and out[1]["y"].tolist() == [1, 1, 1], "task 0's numbers not used"
    assert "1 unauthenticated cache entry" in lines[-1]
    assert TaskCache(tmp_path).read(key1)[0] == "ok", "the recomputed result replaces the forgery"


def test_the_cache_secret_lives_outside_the_cache_and_is_private(tmp_path, monkeypatch):
    monkeypatch.delenv("NEARID_CACHE_KEY", raising=False)
    monkeypatch.delenv("NEARID_CACHE_KEY_FILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    first = cache_secret()
    made = tmp_path / "config" / "nearid" / "task-cache.key"
    assert made.exists() and (made.stat().st_mode & 0o777) == 0o600 and len(first) == 64
    assert cache_secret() == first, "created once, then read"
    monkeypatch.setenv("NEARID_CACHE_KEY_FILE", str(tmp_path / "team.key"))
    with pytest.raises(RuntimeError, match="team.key does not exist"):
        cache_secret()
    (tmp_path / "team.key").write_text("shared-by-the-team\n")
    assert cache_secret() == b"shared-by-the-team"
    monkeypatch.setenv("NEARID_CACHE_KEY", "given-by-the-environment")
    assert cache_secret() == b"given-by-the-environment"


def test_results_come_back_value_for_value_and_type_for_type():
    import pandas as pd
    import torch

    frame = pd.DataFrame({"gene": ["a", "b"], "n": [1, 2], "f": np.array([0.5, np.nan], np.float32)},
                         index=["w1", "w2"])
    value = {"i": 3, "f": 0.1, "nan": float("nan"), "s": "x", "none": None, "b": True, 7: (1, 2.5),
             (0, "k"): [np.float32(1.5), np.int64(4), np.bool_(False)], "a": np.arange(6.0).reshape(2, 3).T,
             "frame": frame, "series": pd.Series([1.0, 2.0], name="error"), "t": torch.arange(3)}
    back = safeformat.loads(safeformat.dumps(value))
    assert list(back) == list(value)
    for k in ("i", "f", "s", "none", "b", 7):
        assert back[k] == value[k] and type(back[k]) is type(value[k])
    assert np.isnan(back["nan"])
    assert [type(v) for v in back[(0, "k")]] == [np.float32, np.int64, np.bool_]
    assert back["a"].tobytes() == value["a"].tobytes() and back["a"].flags.f_contiguous
    pd.testing.assert_frame_equal(back["frame"], frame)
    pd.testing.assert_series_equal(back["series"], value["series"])
    assert torch.equal(back["t"], value["t"])


def test_identical_tasks_run_once_and_results_are_independent_copies(tmp_path):
    CALLS.clear()
    lines = []
    out = run_tasks([Task(square, {"x": 2}), Task(square, {"x": 1}), Task(square, {"x": 2})], log=lines.append)
    assert CALLS == [2, 1]
    assert out[0]["x"] == out[2]["x"] == 2 and out[0] is not out[2]
    assert "3 tasks: 0 reused, 3 computed" in lines[-1]


def test_keys_follow_arguments_not_order():
    a = Task(square, {"x": 1, "fail_at": None})
    b = Task(square, {"fail_at": None, "x": 1})
    assert task_key(a) == task_key(b) != task_key(Task(square, {"x": 2, "fail_at": None}))


def test_keys_follow_array_contents_and_refuse_unknown_values():
    big = np.arange(10_000.0)
    changed = big.copy()
    changed[5000] = -1.0  # in the part a repr would elide
    assert task_key(Task(square, {"x": big})) != task_key(Task(square, {"x": changed}))
    assert task_key(Task(square, {"x": np.int64(3)})) == task_key(Task(square, {"x": 3}))
    with pytest.raises(TypeError, match="JSON values"):
        Task(square, {"x": object()})


def test_keys_name_every_field_of_a_settings_record():
    """A task's settings may come as one frozen record (issue 37): its key still follows each
    field, and the record's type, not its identity."""
    from dataclasses import dataclass, replace

    @dataclass(frozen=True)
    class Settings:
        epochs: int = 1
        lr: float = 0.1
        seeds: tuple[int, ...] = (0, 1)

    @dataclass(frozen=True)
    class Other:
        epochs: int = 1
        lr: float = 0.1
        seeds: tuple[int, ...] = (0, 1)

    key = task_key(Task(square, {"x": Settings()}))
    assert key == task_key(Task(square, {"x": Settings()}))
    assert key != task_key(Task(square, {"x": replace(Settings(), lr=0.2)}))
    assert key != task_key(Task(square, {"x": replace(Settings(), seeds=(0, 2))}))
    assert key != task_key(Task(square, {"x": Other()})), "another record type with the same fields"
    with pytest.raises(TypeError, match="JSON values"):
        Task(square, {"x": Settings})  # the class, not a record


def test_keys_follow_the_code_of_a_task_module_outside_nearid(tmp_path, monkeypatch):
    (tmp_path / "mytasks.py").write_text("def f(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import mytasks

    before = task_key(Task(mytasks.f, {"x": 1}))
    (tmp_path / "mytasks.py").write_text("def f(x):\n    return x + 1\n")
    assert task_key(Task(mytasks.f, {"x": 1})) != before


def test_task_functions_must_live_at_module_level():
    def local(x):
        return x

    with pytest.raises(ValueError, match="module level"):
        Task(local, {"x": 1})


def test_unknown_executor():
    with pytest.raises(ValueError, match="executor"):
        run_tasks(_tasks(1), executor="spark", log=None)


def test_dask_without_a_scheduler_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("NEARID_SCHEDULER", raising=False)
    pytest.importorskip("distributed")
    with pytest.raises(ValueError, match="NEARID_SCHEDULER"):
        run_tasks(_tasks(1), executor="dask", log=None)


def test_executor_auto_reads_the_environment(monkeypatch):
    monkeypatch.setenv("NEARID_EXECUTOR", "spark")
    with pytest.raises(ValueError, match="'spark'"):
        run_tasks(_tasks(1), executor="auto", log=None)


def test_labels_are_logged_without_a_bar_and_the_bar_goes_to_stderr(capsys):
    lines = []
    run_tasks(_tasks(2), progress=False, log=lines.append)
    assert lines[:2] == ["x=0", "x=1"] and lines[2].startswith("2 tasks: 0 reused, 2 computed")
    lines.clear()
    run_tasks(_tasks(2), progress=True, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("2 tasks")
    err = capsys.readouterr().err
    assert "tasks (inprocess)" in err and "2/2" in err


def test_inside_a_notebook_kernel_the_log_gets_one_summary_line(capsys, monkeypatch):
    """Inside a chapter's kernel the log gets the summary line only: no bar (ipykernel forwards
    even the process's own stderr into the page) and no line per task."""
    monkeypatch.setattr(tasks_mod, "_in_notebook_kernel", lambda: True)
    lines = []
    run_tasks(_tasks(2), log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("2 tasks: 0 reused, 2 computed")
    assert capsys.readouterr().err == ""


def test_a_worker_with_other_code_or_versions_refuses_to_run(monkeypatch):
    monkeypatch.setattr(tasks_mod, "_WORKER_CODE", {})
    monkeypatch.setattr(tasks_mod, "prepare_worker", lambda setup: None)  # keep this process's threads
    task = Task(square, {"x": 1})
    with pytest.raises(RuntimeError, match="other code"):
        tasks_mod.execute_task(task, "0" * 64, tasks_mod.WorkerSetup(), tasks_mod._key_versions())
    code = tasks_mod.code_digest(square.__module__)
    with pytest.raises(RuntimeError, match=r"numpy .* vs 0.0.1 in the caller"):
        tasks_mod.execute_task(task, code, tasks_mod.WorkerSetup(), {**tasks_mod._key_versions(), "numpy": "0.0.1"})
    assert tasks_mod.execute_task(task, code, tasks_mod.WorkerSetup(), tasks_mod._key_versions())["x"] == 1


def test_malloc_thresholds_are_restored_only_where_dask_froze_them(monkeypatch):
    import platform

    from nearid import tasks

    monkeypatch.setattr(tasks, "_MALLOC_FIXED", False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert tasks.undo_fixed_malloc_thresholds() is False, "nothing to undo without the variable"
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    expected = platform.libc_ver()[0] == "glibc"
    assert tasks.undo_fixed_malloc_thresholds() is expected
    assert tasks.undo_fixed_malloc_thresholds() is False, "once per process"


def test_a_worker_retries_the_spurious_cpython_311_ast_error(monkeypatch):
    """gh-106905: concurrent ast.parse in two threads of one worker can raise a spurious
    SystemError; the worker's code digest is retried, any other SystemError is raised."""
    calls = []

    def flaky_digest(module):
        calls.append(module)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=51, after=201)")
        return "digest"

    monkeypatch.setattr(tasks_mod, "code_digest", flaky_digest)
    assert tasks_mod._worker_code_digest("m") == "digest" and len(calls) == 2
    monkeypatch.setattr(tasks_mod, "code_digest", lambda m: (_ for _ in ()).throw(SystemError("other")))
    with pytest.raises(SystemError, match="other"):
        tasks_mod._worker_code_digest("m")


def test_the_runner_log_skips_the_page_inside_a_kernel(monkeypatch, tmp_path):
    """runner_log writes to stderr's descriptor, which ipykernel keeps as its copy of the
    terminal's stderr (what is written to sys.stderr itself goes into the page)."""
    import io

    sink = tmp_path / "terminal"

    class PageStream(io.StringIO):  # ipykernel's OutStream: text to the page, fileno() the terminal's copy
        def fileno(self):
            return fd

    fd = os.open(sink, os.O_WRONLY | os.O_CREAT)
    page = PageStream()
    monkeypatch.setattr(sys, "stderr", page)
    monkeypatch.setattr(tasks_mod, "_in_notebook_kernel", lambda: True)
    tasks_mod.runner_log("2 tasks: 0 reused, 2 computed (0 s, inprocess)")
    os.close(fd)
    assert page.getvalue() == "" and sink.read_text() == "2 tasks: 0 reused, 2 computed (0 s, inprocess)\n"
    monkeypatch.setattr(tasks_mod, "_in_notebook_kernel", lambda: False)
    tasks_mod.runner_log("outside a kernel")
    assert page.getvalue() == "outside a kernel\n"
