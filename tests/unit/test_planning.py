"""`nearid plan`'s estimates: the cost model (exact, with a fake timer) and the measurement
itself (a fresh process timing a task cut to k1 and k2 steps, its peak memory, its failures)."""

import numpy as np
import pytest

import task_functions as tf
from nearid import planning
from nearid.planning import Measurement
from nearid.tasks import Task


def _fake_timer(calls):
    def timer(task, steps, timeout):
        calls.append((task.label, steps))
        if steps is None:
            return Measurement(label=task.label, steps=None, seconds=[3.0], task_s=3.0, peak_rss_mb=100.0)
        return Measurement(label=task.label, steps=steps, seconds=[4.0, 3.0, 3.8], once_s=1.0, setup_s=2.0,
                           step_s=0.01, peak_rss_mb=500.0, device="cpu")
    return timer


def test_the_cost_model_adds_once_setup_and_steps():
    tasks = [Task(tf.sleepy, {"seconds": 0, "max_steps": None}, kind="train", label=f"t{i}", steps=s)
             for i, s in enumerate([100, 100, 200])]
    tasks += [Task(tf.where_am_i, {"x": i}, kind="embed", label=f"e{i}") for i in range(4)]
    calls = []
    plans = planning.plan_tasks(tasks, steps=(2, 10), timer=_fake_timer(calls))
    assert calls == [("t2", (2, 10)), ("e0", None)], "one task per kind, the one with most steps, cut when it can be"
    train, embed = plans
    assert (train.kind, train.tasks, train.steps) == ("train", 3, 400)
    assert train.estimate_s == pytest.approx(1.0 + 3 * 2.0 + 400 * 0.01)
    assert train.longest_s == pytest.approx(1.0 + 2.0 + 200 * 0.01)
    assert (embed.tasks, embed.steps, embed.estimate_s) == (4, None, 12.0)
    s = planning.chapter_summary(plans)
    assert s["estimate_s"] == pytest.approx(23.0) and s["complete"] and s["peak_rss_mb"] == 500.0


def test_a_kind_that_cannot_be_timed_is_reported_not_guessed():
    def broken(task, steps, timeout):
        return Measurement(label=task.label, steps=steps, error="MemoryError: too big")

    plans = planning.plan_tasks([Task(tf.sleepy, {"seconds": 0}, kind="big", steps=5)], timer=broken)
    assert plans[0].estimate_s is None and not planning.chapter_summary(plans)["complete"]
    assert "not timed: MemoryError: too big" in planning.format_chapter("ch", plans)


def test_a_task_without_max_steps_runs_whole():
    calls = []
    planning.plan_tasks([Task(tf.flaky, {"x": 1}, kind="k", label="f", steps=10)], timer=_fake_timer(calls))
    assert calls == [("f", None)]


def test_a_kind_with_few_steps_is_cut_to_them_at_most():
    """An evaluation task's units (8 noise levels, 5 grid points) may be fewer than k2: timing
    must not ask for more than the task has, and a task of k1 units or fewer runs whole."""
    calls = []
    tasks = [Task(tf.sleepy, {"seconds": 0}, kind="few", label="few", steps=6),
             Task(tf.sleepy, {"seconds": 0}, kind="tiny", label="tiny", steps=2)]
    plans = planning.plan_tasks(tasks, steps=(2, 10), timer=_fake_timer(calls), stage=planning.EVALUATION)
    assert calls == [("few", (2, 6)), ("tiny", None)]
    few, tiny = plans
    assert few.estimate_s == pytest.approx(1.0 + 2.0 + 6 * 0.01) and tiny.estimate_s == 3.0
    assert {p.stage for p in plans} == {planning.EVALUATION}


def test_the_summary_keeps_tasks_and_evaluation_apart():
    calls = []
    tasks = planning.plan_tasks([Task(tf.where_am_i, {"x": i}, kind="fit") for i in range(5)],
                                timer=_fake_timer(calls))
    evaluation = planning.plan_tasks([Task(tf.where_am_i, {"x": 9}, kind="align")], timer=_fake_timer(calls),
                                     stage=planning.EVALUATION)
    s = planning.chapter_summary(tasks + evaluation)
    assert (s["tasks"], s["evaluation_parts"], s["tasks_s"], s["evaluation_s"], s["estimate_s"]) == (5, 1, 15.0, 3.0,
                                                                                                    18.0)
    assert s["longest_s"] == 3.0, "the longest task bounds the spread tasks only"
    text = planning.format_chapter("01_definitions: 5 tasks", tasks + evaluation)
    assert "align (evaluation)" in text and "15 s for 5 tasks + 3 s for its own evaluation (1 parts)" in text
    assert "not estimated (no evaluation_plan)" in planning.format_chapter("x", tasks, evaluation_listed=False)


def test_measure_separates_setup_from_steps_and_sees_memory():
    """sleepy sleeps 0.4 s plus 0.05 s per step and holds 300 MiB: a fresh process times it
    at 2, 2 and 10 steps (or more: 8 steps take less than planning.MIN_SPAN)."""
    task = Task(tf.sleepy, {"seconds": 0.4, "per_step": 0.05, "mb": 300}, kind="sleepy", steps=100)
    ballast = np.ones(400 * 131072)  # 400 MiB here must not count in the child (Linux's ru_maxrss would)
    m = planning.measure(task, steps=(2, 10), timeout=300)
    assert ballast[-1] == 1.0
    assert m.error is None, m.error
    assert m.steps[0] == 2 and m.steps[1] >= 10
    assert m.step_s == pytest.approx(0.05, abs=0.03)  # loose: the machine may be busy
    assert 0.3 < m.setup_s < 3.0, "the sleep and filling 300 MiB, paid once per task"
    assert m.peak_rss_mb - m.base_rss_mb > 250 and m.device == "cpu" and m.peak_gpu_mb is None
    assert m.base_rss_mb < 250, "a fresh process (python, numpy, the task's module) starts small"


def test_a_short_whole_task_runs_twice_so_first_call_costs_count_once():
    """A kind of many small fits: the first fit in a process pays the lazy imports (0.6 s here),
    the others do not; the estimate counts that once, not per task."""
    m = planning.measure(Task(tf.cold_start, {"seconds": 0.1, "first": 0.6}), steps=None)
    assert m.error is None and len(m.seconds) == 2
    assert m.task_s == pytest.approx(0.1, abs=0.08) and m.once_s == pytest.approx(0.6, abs=0.2)
    tasks = [Task(tf.cold_start, {"seconds": 0.1, "first": 0.6}, kind="fit", label=f"fit {i}") for i in range(20)]
    (plan,) = planning.plan_tasks(tasks, timer=lambda task, steps, timeout: m)
    assert plan.estimate_s == pytest.approx(m.once_s + 20 * m.task_s)
    slow = planning.measure(Task(tf.sleepy, {"seconds": planning.WARM_RERUN + 0.1}), steps=None, timeout=60)
    assert len(slow.seconds) == 1 and slow.once_s is None, "a long task is run once"


def test_measure_reports_errors_and_timeouts(tmp_path):
    m = planning.measure(Task(tf.flaky, {"x": 1, "fail_at": 1, "marker_dir": str(tmp_path)}), steps=None)
    assert m.error == "RuntimeError: planted failure at 1"
    m = planning.measure(Task(tf.killer, {"x": 0, "kill_at": 0, "marker_dir": str(tmp_path / "m"),
                                          "calls_dir": str(tmp_path)}), steps=None)
    assert m.error == "the measuring process died (exit code -9, out of memory?)"
    m = planning.measure(Task(tf.sleepy, {"seconds": 60}), steps=None, timeout=2)
    assert m.error == "timed out after 2 s"


def test_a_task_that_evaluates_inside_is_timed_without_it_and_on_a_share_of_its_rows():
    """Chapter 05's tasks probe their model after training: the three runs leave that out
    (evaluate=0) and one more scores a share of the rows; the estimate adds it back per task."""
    task = Task(tf.evaluating, {"seconds": 0.3, "per_step": 0.05, "eval_seconds": 4.0}, kind="probe", steps=100)
    m = planning.measure(task, steps=(2, 10), timeout=300, evaluate_share=0.25)
    assert m.error is None, m.error
    assert m.evaluate_share == 0.25 and m.evaluate_s == pytest.approx(4.0, abs=0.6)
    assert m.setup_s < 1.5, "the training runs did not evaluate"
    assert len(m.seconds) == 3 and m.per_task_s == pytest.approx(m.setup_s + m.evaluate_s)
    (plan,) = planning.plan_tasks([task, task], timer=lambda t, steps, timeout: m)
    assert plan.estimate_s == pytest.approx(m.once_s + 2 * (m.setup_s + m.evaluate_s + 100 * m.step_s))
    assert "eval s" in planning.format_chapter("05", [plan])
    long = planning.measure(task, steps=(2, 10), timeout=300, evaluate_share=0.5, evaluate_seconds=0.5)
    assert long.error is None and long.evaluate_share == pytest.approx(0.125, rel=0.3), \
        "an evaluation that would take longer is timed on a share sized to evaluate_seconds"
    assert long.evaluate_s == pytest.approx(4.0, abs=0.8)
    plain = planning.measure(Task(tf.sleepy, {"seconds": 0.1}), steps=None, evaluate_share=0.25)
    assert plain.evaluate_share is None and plain.evaluate_s is None, "a task without evaluate is timed as it is"
    with pytest.raises(ValueError, match="evaluate_share"):
        planning.measure(task, evaluate_share=0.0)


def test_kinds_are_timed_side_by_side_in_order():
    """--jobs 2: two kinds at a time (each in its own process), the plans in the kinds' order."""
    import threading
    import time

    running, overlap = [], []
    lock = threading.Lock()

    def timer(task, steps, timeout):
        with lock:
            running.append(task.label)
            overlap.append(len(running))
        time.sleep(0.2)
        with lock:
            running.remove(task.label)
        return Measurement(label=task.label, steps=None, seconds=[1.0], task_s=1.0)

    tasks = [Task(tf.where_am_i, {"x": i}, kind=f"k{i}", label=f"t{i}") for i in range(4)]
    plans = planning.plan_tasks(tasks, timer=timer, jobs=2)
    assert [p.kind for p in plans] == ["k0", "k1", "k2", "k3"] and max(overlap) == 2
    assert [p.estimate_s for p in plans] == [1.0] * 4


def test_helpers():
    assert planning.parse_steps("2,10") == (2, 10)
    for bad in ("10,2", "2", "a,b", "0,3"):
        with pytest.raises(ValueError):
            planning.parse_steps(bad)
    assert [planning.human_seconds(s) for s in (0.2, 42, 600, 7200, 4 * 86400)] == \
        ["< 1 s", "42 s", "10 min", "2.0 h", "4.0 d"]
    assert planning.experiment_module("03").__name__ == "nearid.experiments.ch03_bilipschitz"
    assert planning.experiment_module("99") is None


def test_chapters_whose_data_fill_the_memory_are_timed_one_kind_at_a_time(monkeypatch):
    """Two of chapter 05's full tasks (6.4 GB of images each, 12 GB at their peak) were killed
    for memory side by side on a 23 GB machine: such a chapter's kinds are timed alone."""
    from nearid import env
    from nearid.book.profiles import resolve

    monkeypatch.setattr(env, "machine_memory_mb", lambda: 23.5 * 1024)

    ch05 = planning.experiment_module("05")
    assert planning.memory_heavy(ch05, resolve("05", "full"), jobs=2)
    assert not planning.memory_heavy(ch05, resolve("05", "quick"), jobs=2)
    assert not planning.memory_heavy(ch05, resolve("05", "full"), jobs=1)
    assert not planning.memory_heavy(planning.experiment_module("01"), resolve("01", "full"), jobs=2)
    monkeypatch.setattr(env, "machine_memory_mb", lambda: 128 * 1024)  # a GPU machine's
    assert not planning.memory_heavy(ch05, resolve("05", "full"), jobs=2)


def test_memory_heavy_kinds_never_overlap_and_no_more_than_jobs_run_at_once(monkeypatch):
    import threading
    import time
    import types

    from nearid import env

    monkeypatch.setattr(env, "machine_memory_mb", lambda: 16 * 1024)
    light = types.SimpleNamespace(plan=lambda P: [Task(tf.where_am_i, {"x": i}, kind=f"light{i}") for i in range(4)])
    heavy = types.SimpleNamespace(plan=lambda P: [Task(tf.where_am_i, {"x": i}, kind=f"heavy{i}") for i in range(3)],
                                  data_mb=lambda P: 8 * 1024)
    monkeypatch.setattr(planning, "experiment_module", lambda n: {"01": light, "05": heavy}[n])
    running, peaks, lock = [], [], threading.Lock()

    def timer(task, steps, timeout):
        with lock:
            running.append(task.kind)
            peaks.append((len(running), sum(k.startswith("heavy") for k in running)))
        time.sleep(0.1)
        with lock:
            running.remove(task.kind)
        return Measurement(label=task.kind, steps=None, seconds=[1.0], task_s=1.0)

    report = planning.plan_chapters({"05_heavy": {}, "01_light": {}}, jobs=2, timer=timer, out=lambda _: None)
    assert max(p[0] for p in peaks) == 2 and max(p[1] for p in peaks) == 1
    assert report["chapters"]["05_heavy"]["estimate_s"] == 3.0 and report["chapters"]["01_light"]["estimate_s"] == 4.0
