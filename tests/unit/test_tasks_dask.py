"""The two parallel executors of nearid.tasks: a local process pool and a Dask cluster
(distributed.LocalCluster, two worker processes, one thread each) give the same numbers as
in-process on seeded torch trainings, resume after a failure, and GPU tasks ask Dask for a GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import task_functions as tf
from nearid.tasks import GPU_RESOURCE, Task, TaskCache, run_tasks, task_key

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402  (installed with distributed)

SEEDS = range(4)


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes with one thread and one (pretend) GPU each, as `dask worker
    --nworkers 2 --nthreads 1 --resources GPU=1` would start them."""
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, resources={GPU_RESOURCE: 1},
                                  dashboard_address=":0") as c:
        yield c


@pytest.fixture(scope="module")
def in_process():
    """The reference: the trainings in this process with one torch thread, as in a chapter."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_tasks(_trainings(), log=None, progress=False)
    finally:
        torch.set_num_threads(threads)


def _trainings():
    return [Task(tf.train_tiny, {"seed": s}, kind="tiny", label=f"seed {s}") for s in SEEDS]


def _same(a, b):
    assert [r["seed"] for r in b] == list(SEEDS), "results come back in task order"
    for x, y in zip(a, b):
        assert x["steps"] == y["steps"] > 0
        assert np.array_equal(x["losses"], y["losses"]) and np.array_equal(x["codes"], y["codes"]), \
            "bit-identical numbers"


def test_process_pool_gives_the_in_process_numbers(in_process):
    out = run_tasks(_trainings(), executor="processes", workers=2, log=None, progress=False)
    _same(in_process, out)
    assert {r["threads"] for r in out} == {1}, "one torch thread per worker"


def test_dask_cluster_gives_the_in_process_numbers(in_process, cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("NEARID_EXECUTOR", "dask")  # what `-p executor=auto` (the default) reads
    monkeypatch.setenv("NEARID_SCHEDULER", cluster.scheduler_address)
    lines = []
    out = run_tasks(_trainings(), executor="auto", cache_dir=tmp_path, log=lines.append, progress=False)
    _same(in_process, out)
    assert {r["threads"] for r in out} == {1}
    assert "4 tasks: 0 reused, 4 computed" in lines[-1] and "dask" in lines[-1]
    again = run_tasks(_trainings(), executor="auto", cache_dir=tmp_path, log=lines.append, progress=False)
    _same(in_process, again)
    assert "4 tasks: 4 reused, 0 computed" in lines[-1]


def _flaky(tmp_path, n=6, fail_at=None):
    return [Task(tf.flaky, dict(x=i, fail_at=fail_at, marker_dir=str(tmp_path / "markers"),
                                calls_dir=str(tmp_path / "calls")), label=f"x={i}") for i in range(n)]


def _calls(tmp_path):
    return sorted(int(p.name.split(".")[0][2:]) for p in (tmp_path / "calls").iterdir())


@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_a_failed_run_resumes_with_only_the_unfinished_tasks(executor, cluster, tmp_path):
    """Task 2 raises on its first try; the rerun computes exactly the tasks that were not
    cached (task 2 among them) and none twice that had finished."""
    kw = dict(executor=executor, scheduler=cluster.scheduler_address, workers=2, cache_dir=tmp_path / "cache",
              progress=False)
    with pytest.raises(RuntimeError, match="planted failure at 2"):
        run_tasks(_flaky(tmp_path, fail_at=2), log=None, **kw)
    finished = _calls(tmp_path)
    cache = TaskCache(tmp_path / "cache")
    cached = [t.kwargs["x"] for t in _flaky(tmp_path, fail_at=2) if cache.read(task_key(t))[0] == "ok"]
    assert 2 not in finished and set(cached) <= set(finished)
    lines = []
    out = run_tasks(_flaky(tmp_path, fail_at=2), log=lines.append, **kw)
    assert [r["x"] for r in out] == list(range(6))
    assert f"6 tasks: {len(cached)} reused, {6 - len(cached)} computed" in lines[-1]
    counts = np.bincount(_calls(tmp_path), minlength=6)
    assert counts[2] == 1 and all(counts[x] == 1 for x in cached), "a cached task never runs again"
    if executor == "processes":  # a pool lets running tasks finish and keeps them: nothing ran twice
        assert cached == finished and counts.tolist() == [1] * 6


def test_gpu_tasks_ask_dask_for_one_gpu(cluster):
    tasks = [Task(tf.where_am_i, {"x": i}, gpu=i % 2 == 0) for i in range(4)]
    out = run_tasks(tasks, executor="dask", scheduler=cluster.scheduler_address, log=None, progress=False)
    assert [r["x"] for r in out] == [0, 1, 2, 3]
    assert [r["resources"] for r in out] == [{GPU_RESOURCE: 1}, {}, {GPU_RESOURCE: 1}, {}]
    assert all(r["worker_resources"] == {GPU_RESOURCE: 1} for r in out)
    assert {r["omp"] for r in out} == {"1"}


def test_gpu_tasks_wait_for_a_worker_with_a_gpu(cluster):
    """A worker started from the command line without a GPU joins; given a client directly,
    run_tasks sends GPU tasks only to the workers that have one, and leaves the client open."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nworkers", "1",
           "--nthreads", "1", "--name", "cpu-only", "--no-dashboard"]
    worker = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with distributed.Client(cluster.scheduler_address) as client:
            client.wait_for_workers(3, timeout=120)
            cpu_only = [a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "cpu-only"]
            out = run_tasks([Task(tf.where_am_i, {"x": i}, gpu=True) for i in range(6)], executor="dask",
                            scheduler=client, log=None, progress=False)
            assert len(cpu_only) == 1 and cpu_only[0] not in {r["worker"] for r in out}
            assert client.status == "running", "a client we were given is left open"
            client.retire_workers(cpu_only)
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def test_unreachable_scheduler_is_an_error_that_names_it():
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(RuntimeError, match="tcp://127.0.0.1:9"):
            run_tasks([Task(tf.flaky, {"x": 0})], executor="dask", scheduler="tcp://127.0.0.1:9", log=None,
                      progress=False)


def test_a_local_cluster_for_one_call(tmp_path):
    """scheduler="local": a LocalCluster of `workers` processes, started and closed by the call."""
    lines = []
    out = run_tasks(_flaky(tmp_path), executor="dask", scheduler="local", workers=2, log=lines.append, progress=False)
    assert [r["x"] for r in out] == list(range(6))
    assert "6 tasks: 0 reused, 6 computed" in lines[-1] and "dask x2" in lines[-1]


def test_gpu_tasks_on_a_cluster_without_gpus_run_anyway_and_say_so(tmp_path, monkeypatch):
    """CPU-only workers (as `dask worker ... --nworkers 2 --nthreads 1` starts them): a GPU
    request would hold the tasks for ever, so it is dropped, with a line saying so."""
    # the worker runs in this process (processes=False) and sets its thread variables here, as
    # a worker process would for itself: put them back afterwards
    from nearid import kernels

    for var in kernels.THREAD_VARS:
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=":0") as c:
        lines = []
        out = run_tasks([Task(tf.where_am_i, {"x": i}, gpu=True) for i in range(2)], executor="dask",
                        scheduler=c.scheduler_address, log=lines.append, progress=False)
    assert [r["resources"] for r in out] == [{}, {}]
    assert any("no Dask worker offers a GPU resource" in line for line in lines)


def test_chapter_02_and_03_smoke_sweeps_on_a_local_cluster_match_in_process(cluster):
    """The real sweeps of chapters 02 and 03 (smoke) through two Dask worker processes give
    bit-identical tables to the in-process run the book makes by default."""
    import pandas as pd

    from nearid.book.profiles import resolve
    from nearid.experiments import ch02_isometric_dgp as ch02
    from nearid.experiments import ch03_bilipschitz as ch03

    def timeless(df):
        return df.drop(columns=[c for c in df.columns if c.endswith("seconds")])  # wall clock

    def both(run):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as a chapter's kernel
        try:
            here = run({})
        finally:
            torch.set_num_threads(threads)
        there = run({"executor": "dask", "scheduler": cluster.scheduler_address})
        return here, there

    here, there = both(lambda o: ch02.run(resolve("02", "smoke", o), log=None))
    for a, b in ((here.sweep.models, there.sweep.models), (here.ablation.models, there.ablation.models),
                 (here.trend_models, there.trend_models)):
        pd.testing.assert_frame_equal(timeless(a), timeless(b), check_exact=True)

    def sweeps(o):
        P = resolve("03", "smoke", o)
        fitted = ch03.fit_sweeps(ch03.chapter_sweeps(P), executor=P.executor,
                                 scheduler=P.scheduler, log=None)
        return {name: (sw.models_, sw.pairs_) for name, sw in fitted.items()}

    here, there = both(sweeps)
    assert here.keys() == there.keys()
    for name in here:
        for a, b in zip(here[name], there[name]):
            pd.testing.assert_frame_equal(timeless(a), timeless(b), check_exact=True)
