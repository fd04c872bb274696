"""Sweeps as tasks: results in task order, a cache that lets a killed run resume, damaged
cache entries recomputed, never used."""

import numpy as np
import pytest

from nearid.tasks import Task, TaskCache, run_tasks, task_key

CALLS: list[int] = []


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


def test_force_recomputes_everything(tmp_path):
    run_tasks(_tasks(3), cache_dir=tmp_path, log=None)
    CALLS.clear()
    run_tasks(_tasks(3), cache_dir=tmp_path, force=True, log=None)
    assert CALLS == [0, 1, 2]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_entries_are_recomputed_never_used(tmp_path, damage):
    tasks = _tasks(2)
    run_tasks(tasks, cache_dir=tmp_path, log=None)
    path = TaskCache(tmp_path).path(task_key(tasks[1]))
    blob = path.read_bytes()
    path.write_bytes({"truncate": blob[: len(blob) // 2], "flip": blob[:-1] + bytes([blob[-1] ^ 1]),
                      "empty": b""}[damage])
    CALLS.clear()
    out = run_tasks(tasks, cache_dir=tmp_path, log=None)
    assert CALLS == [1] and out[1]["x"] == 1


def test_keys_follow_arguments_not_order():
    a = Task(square, {"x": 1, "fail_at": None})
    b = Task(square, {"fail_at": None, "x": 1})
    assert task_key(a) == task_key(b) != task_key(Task(square, {"x": 2, "fail_at": None}))


def test_task_functions_must_live_at_module_level():
    def local(x):
        return x

    with pytest.raises(ValueError, match="module level"):
        Task(local, {"x": 1})


def test_unknown_executor():
    with pytest.raises(ValueError, match="executor"):
        run_tasks(_tasks(1), executor="spark", log=None)
