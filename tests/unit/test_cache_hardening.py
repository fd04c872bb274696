"""Caches that can neither stop a run nor lose its work (issue 36, items 2-4 and 9): an entry
that is a named pipe, a folder, a link or a 100 GB sparse file is named and recomputed, never
read; a cache folder that cannot be written costs no result; the variables that name caches
and keys are checked before any work, in one line naming the variable."""

import errno
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from nearid import cachefiles
from nearid import tasks as tasks_mod
from nearid.tasks import Task, TaskCache, run_tasks, task_key

CALLS: list[int] = []


def cube(x: int) -> dict:
    """A pure task."""
    CALLS.append(x)
    return {"x": x, "y": np.full(2, x ** 3)}


def _tasks(n: int = 2) -> list[Task]:
    return [Task(cube, {"x": i}, kind="cube") for i in range(n)]


@pytest.fixture
def no_hang():
    """A read that blocks (a named pipe) fails the test in 20 s instead of hanging the suite."""
    def stop(signum, frame):
        raise TimeoutError("the cache read blocked")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _rerun(tmp_path) -> tuple[list, list[str]]:
    CALLS.clear()
    lines: list[str] = []
    out = run_tasks(_tasks(), cache_dir=tmp_path, log=lines.append)
    return out, lines


# ------------------------------------------------------------------ entries bounded before reading
@pytest.mark.parametrize("plant,words", [
    (lambda p: os.mkfifo(p), "is a named pipe, not a regular file"),
    (lambda p: p.mkdir(), "is a folder, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "is a symbolic link, not a regular file"),
])
def test_a_pipe_folder_or_link_at_an_entry_path_is_named_and_recomputed(tmp_path, no_hang, plant, words):
    run_tasks(_tasks(), cache_dir=tmp_path, log=None)
    path = TaskCache(tmp_path).path(task_key(_tasks()[1]))
    path.unlink()
    plant(path)
    start = time.monotonic()
    assert TaskCache(tmp_path).read_entry(task_key(_tasks()[1]))[::2] == ("damaged", words)
    out, lines = _rerun(tmp_path)
    assert time.monotonic() - start < 15
    assert CALLS == [1] and out[1]["x"] == 1
    assert "1 damaged cache entry recomputed" in lines[-1] and f"{path} {words}" in lines[-1]


def test_a_fifo_entry_is_replaced_by_the_recomputed_result(tmp_path, no_hang):
    run_tasks(_tasks(), cache_dir=tmp_path, log=None)
    path = TaskCache(tmp_path).path(task_key(_tasks()[0]))
    path.unlink()
    os.mkfifo(path)
    _rerun(tmp_path)
    assert path.is_file() and TaskCache(tmp_path).read(task_key(_tasks()[0]))[0] == "ok"
    assert not list(tmp_path.rglob(".*.tmp")), "no temporary file left behind"


def test_a_100_gb_sparse_entry_is_refused_from_its_size_without_reading(tmp_path, monkeypatch):
    """The attack of issue 36: a sparse entry with a well-formed header. Its size (fstat) is
    over the bound, so not a byte of its payload is read; the run takes no time and no memory."""
    monkeypatch.setattr(cachefiles, "memory_limit", lambda: 1 << 30)
    run_tasks(_tasks(), cache_dir=tmp_path, log=None)
    key = task_key(_tasks()[1])
    path = TaskCache(tmp_path).path(key)
    size = 100 * 10**9
    header = b"nearid-task 2 " + key.encode() + b" " + b"0" * 64 + b" "
    header += str(size - len(header) - len(str(size)) - 1).encode() + b"\n"
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(size)
    read, real = [], cachefiles.read_exact
    monkeypatch.setattr(cachefiles, "read_exact", lambda fd, n, at=0: read.append(n) if n > 10**9 else real(fd, n, at))
    start = time.monotonic()
    out, lines = _rerun(tmp_path)
    assert time.monotonic() - start < 10 and not read, "nothing read"
    assert CALLS == [1] and out[1]["x"] == 1
    assert f"{path} holds 100.0 GB, more than the 1.1 GB an entry may hold on this machine" in lines[-1]


def test_an_entry_longer_or_shorter_than_its_header_is_named(tmp_path):
    run_tasks(_tasks(), cache_dir=tmp_path, log=None)
    path = TaskCache(tmp_path).path(task_key(_tasks()[1]))
    with open(path, "ab") as fh:
        fh.write(b"x" * 10)
    status, _, why = TaskCache(tmp_path).read_entry(task_key(_tasks()[1]))
    assert status == "damaged" and "its header says" in why
    out, lines = _rerun(tmp_path)
    assert CALLS == [1] and str(path) in lines[-1]


def test_the_bound_is_half_the_memory():
    assert cachefiles.memory_limit() == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2


# ------------------------------------------------------------------ a cache that cannot be written
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_cache_that_refuses_writes_costs_no_result_and_is_said_once(tmp_path, monkeypatch, err):
    tries = []

    def refuse(self, key, result):
        tries.append(key)
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(TaskCache, "put", refuse)
    CALLS.clear()
    lines: list[str] = []
    out = run_tasks([Task(cube, {"x": i}) for i in range(4)], cache_dir=tmp_path, log=lines.append)
    assert [r["x"] for r in out] == [0, 1, 2, 3] and CALLS == [0, 1, 2, 3]
    assert len(tries) == 1, "the first refusal stops further writes"
    assert (f"4 results not cached: the task cache {tmp_path} cannot be written ({os.strerror(err)}); "
            f"every result was used") in lines[-1]
    assert sum("not cached" in line for line in lines) == 1, "said once"


@pytest.mark.parametrize("make,words", [
    (lambda p: p.write_text("not a folder"), "is a file, not a folder"),
    (lambda p: p.symlink_to(p.parent / "gone"), "is a symbolic link to"),
])
def test_a_cache_path_that_is_no_folder_costs_no_result(tmp_path, make, words):
    cache = tmp_path / "cache"
    make(cache)
    CALLS.clear()
    lines: list[str] = []
    out = run_tasks(_tasks(), cache_dir=cache, log=lines.append)
    assert [r["x"] for r in out] == [0, 1] and CALLS == [0, 1]
    assert f"2 results not cached: the task cache {cache} {words}" in lines[-1]
    assert not (tmp_path / "gone").exists(), "nothing made through the link"


def test_a_full_disk_leaves_no_temporary_file(tmp_path, monkeypatch):
    """ENOSPC in the middle of writing an entry: the partial temporary file is removed."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd):
            self.fh = real_fdopen(fd, "wb")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tasks_mod.os, "fdopen", lambda fd, mode="r": Full(fd))
    CALLS.clear()
    lines: list[str] = []
    out = run_tasks(_tasks(), cache_dir=tmp_path, log=lines.append)
    monkeypatch.undo()
    assert [r["x"] for r in out] == [0, 1]
    assert "No space left on device" in lines[-1]
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


# ------------------------------------------------------------------ checked before any work
@pytest.mark.parametrize("env,words", [
    ({"NEARID_TASK_CACHE": "/etc/passwd"}, "$NEARID_TASK_CACHE is '/etc/passwd', which is a file, not a folder; "
                                           "allowed: a folder this user can write"),
    ({"NEARID_CACHE_KEY_FILE": "{tmp}/missing.key"}, "which does not exist; allowed: a readable file"),
    ({"NEARID_CACHE_KEY_FILE": "{tmp}"}, "which is a folder, not a file; allowed: a readable file"),
    ({"NEARID_CACHE_KEY_FILE": "/dev/zero"}, "which is a character device, not a file"),
    ({"NEARID_TASK_CACHE": "{tmp}/link"}, "which is a symbolic link to"),
    ({"NEARID_TASK_CACHE": "/etc/passwd/sub"}, "which cannot be made: /etc/passwd is a file, not a folder"),
])
def test_cache_variables_are_refused_in_one_line(tmp_path, env, words):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    problem = tasks_mod.cache_environment_problem(env)
    assert problem is not None and words in problem and "\n" not in problem
    assert list(tmp_path.iterdir()) == [tmp_path / "link"], "nothing created"


def test_good_cache_variables_pass(tmp_path):
    key = tmp_path / "team.key"
    key.write_text("a-secret-of-the-team\n")
    assert tasks_mod.cache_environment_problem({}) is None
    assert tasks_mod.cache_environment_problem({"NEARID_TASK_CACHE": str(tmp_path / "new" / "cache"),
                                                "NEARID_CACHE_KEY_FILE": str(key)}) is None
    assert tasks_mod.cache_environment_problem({"NEARID_TASK_CACHE": ""}) is None
    # the secret itself replaces the file
    assert tasks_mod.cache_environment_problem({"NEARID_CACHE_KEY_FILE": "/nope", "NEARID_CACHE_KEY": "s" * 16}) is None
    assert not (tmp_path / "new").exists()


def test_a_key_file_that_is_a_pipe_or_device_is_refused_without_reading(tmp_path, monkeypatch, no_hang):
    monkeypatch.delenv("NEARID_CACHE_KEY", raising=False)
    pipe = tmp_path / "key.fifo"
    os.mkfifo(pipe)
    for path, words in ((pipe, "is a named pipe"), ("/dev/zero", "is a character device"), (tmp_path, "is a folder")):
        monkeypatch.setenv("NEARID_CACHE_KEY_FILE", str(path))
        with pytest.raises(RuntimeError, match=f"key file {path} {words}, not a regular file"):
            tasks_mod.cache_secret()
    big = tmp_path / "big.key"
    big.write_bytes(b"k" * 5000)
    monkeypatch.setenv("NEARID_CACHE_KEY_FILE", str(big))
    with pytest.raises(RuntimeError, match="holds 5.0 kB"):
        tasks_mod.cache_secret()


def test_folder_problem_creates_nothing(tmp_path):
    target = tmp_path / "a" / "b" / "c"
    assert cachefiles.folder_problem(target) is None and not (tmp_path / "a").exists()
    assert cachefiles.folder_problem(tmp_path) is None
    Path(tmp_path / "f").write_text("x")
    assert cachefiles.folder_problem(tmp_path / "f" / "x") == f"cannot be made: {tmp_path / 'f'} is a file, not a folder"


# ------------------------------------------------------------------ the generated-data cache
def _fill_with(value, calls):
    def fill(writer):
        calls.append(1)
        writer.write(0, np.full(writer.shape, value, dtype=writer.dtype))
    return fill


def _made(root, calls, value=109.0, **kw):
    from nearid.data import cache as dc

    return dc.cached_array("toy", {"v": 1}, (50, 4), np.float32, _fill_with(value, calls), version={"code": "x"},
                           root=root, **kw)


def _only_npy(root) -> Path:
    (path,) = (root / "toy").glob("*.npy")
    return path


def test_a_cached_array_overwritten_with_other_values_is_detected_and_made_again(tmp_path):
    """The attack of issue 36: the .npy overwritten with 7s, same shape and header."""
    from nearid.data import cache as dc

    calls = []
    assert float(_made(tmp_path, calls).mean()) == 109.0
    path = _only_npy(tmp_path)
    np.save(path, np.full((50, 4), 7, np.float32))
    with pytest.warns(dc.DataCacheWarning, match=f"data cache: {path} does not match its signature.*made again"):
        again = _made(tmp_path, calls)
    assert calls == [1, 1] and float(again.mean()) == 109.0, "the 7s never came back"
    assert float(_made(tmp_path, calls).mean()) == 109.0 and calls == [1, 1], "the remade file is reused"


def test_a_cached_array_without_signature_is_made_again(tmp_path):
    """A file of an older nearid (no .mac beside it) is made again, never misread."""
    from nearid.data import cache as dc

    calls = []
    _made(tmp_path, calls)
    path = _only_npy(tmp_path)
    path.with_suffix(".mac").unlink()
    with pytest.warns(dc.DataCacheWarning, match="has no signature"):
        _made(tmp_path, calls)
    assert calls == [1, 1] and path.with_suffix(".mac").is_file()


def test_a_signature_under_another_key_is_refused(tmp_path, monkeypatch):
    from nearid.data import cache as dc

    calls = []
    _made(tmp_path, calls)
    monkeypatch.setenv("NEARID_CACHE_KEY", "someone else's secret")
    with pytest.warns(dc.DataCacheWarning, match="does not match its signature"):
        _made(tmp_path, calls)
    assert calls == [1, 1]


@pytest.mark.parametrize("plant,words", [
    (lambda p: os.mkfifo(p), "is a named pipe, not a regular file"),
    (lambda p: p.mkdir(), "is a folder, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "is a symbolic link, not a regular file"),
])
def test_a_pipe_folder_or_link_in_place_of_a_cached_array_is_named(tmp_path, no_hang, plant, words):
    from nearid.data import cache as dc

    calls = []
    _made(tmp_path, calls)
    path = _only_npy(tmp_path)
    path.unlink()
    plant(path)
    with pytest.warns(dc.DataCacheWarning) as seen:  # a folder cannot be replaced: made in memory
        out = _made(tmp_path, calls, compute=lambda: np.full((50, 4), 109.0, np.float32))
    assert any(f"{path} {words}; made again" in str(w.message) for w in seen), [str(w.message) for w in seen]
    assert calls == [1, 1] and float(out.mean()) == 109.0


def test_a_huge_sparse_cached_array_is_refused_from_its_size(tmp_path, no_hang):
    from nearid.data import cache as dc

    calls = []
    _made(tmp_path, calls)
    path = _only_npy(tmp_path)
    with open(path, "r+b") as fh:
        fh.truncate(100 * 10**9)
    with pytest.warns(dc.DataCacheWarning, match="holds 100.0 GB, more than the"):
        out = _made(tmp_path, calls)
    assert calls == [1, 1] and out.shape == (50, 4) and path.stat().st_size < 10**6


def test_a_data_cache_that_cannot_be_written_falls_back_to_memory_once(tmp_path):
    from nearid.data import cache as dc

    root = tmp_path / "cache"
    root.write_text("a file where the folder should be")
    calls, computed = [], []

    def compute():
        computed.append(1)
        return np.full((50, 4), 109.0, np.float32)

    with pytest.warns(dc.DataCacheWarning, match=f"cannot write {root / 'toy'}") as seen:
        out = _made(root, calls, compute=compute)
        again = _made(root, calls, compute=compute)
    assert float(out.mean()) == float(again.mean()) == 109.0 and computed == [1, 1]
    assert len([w for w in seen if "cannot write" in str(w.message)]) == 1, "one warning per folder and process"
    with pytest.raises(OSError):  # without a way to make it in memory the failure is the caller's
        _made(root, calls)


def test_a_link_planted_at_the_lock_is_not_followed(tmp_path):
    from nearid.data import cache as dc

    calls = []
    _made(tmp_path, calls)
    path = _only_npy(tmp_path)
    path.unlink()
    victim = tmp_path / "victim"
    lock = path.with_name(path.name + ".lock")
    lock.unlink()
    lock.symlink_to(victim)
    with pytest.warns(dc.DataCacheWarning, match="cannot write"):
        out = _made(tmp_path, calls, compute=lambda: np.full((50, 4), 109.0, np.float32))
    assert float(out.mean()) == 109.0 and not victim.exists()


def test_generators_fall_back_to_memory(tmp_path):
    """chapter 05's images made in memory, the same pixels, when the cache folder is a file."""
    from nearid.data import cache as dc
    from nearid.data import procedural as pr

    root = tmp_path / "file"
    root.write_text("x")
    with pytest.warns(dc.DataCacheWarning, match="cannot write"):
        images, _, _ = pr.make_dataset("shapes3d", 8, 16, cache=True, cache_dir=root)
    reference, _, _ = pr.make_dataset("shapes3d", 8, 16, cache=False)
    np.testing.assert_array_equal(images, reference)


# ------------------------------------------------------------------ before any work, in one line
@pytest.mark.parametrize("env,words", [
    ({"NEARID_DATA_CACHE_MIN_MB": "abc"}, "$NEARID_DATA_CACHE_MIN_MB is 'abc'; allowed: a number of megabytes >= 0"),
    ({"NEARID_DATA_CACHE_MIN_MB": "-1"}, "$NEARID_DATA_CACHE_MIN_MB is '-1'"),
    ({"NEARID_DATA_CACHE_MIN_MB": "nan"}, "$NEARID_DATA_CACHE_MIN_MB is 'nan'"),
    ({"NEARID_DATA_CACHE": "/etc/passwd"}, "$NEARID_DATA_CACHE is '/etc/passwd', which is a file, not a folder"),
    ({"NEARID_DATA_WORKERS": "0"}, "$NEARID_DATA_WORKERS is '0'; allowed: a whole number >= 1"),
])
def test_data_cache_variables_are_refused_in_one_line(env, words):
    from nearid.data import cache as dc

    assert words in (dc.environment_problem(env) or "")


def test_data_variable_names_itself(tmp_path, monkeypatch):
    from nearid import data
    from nearid.data import mnist

    monkeypatch.setenv("NEARID_DATA", "/etc/passwd")
    with pytest.raises(ValueError, match=r"\$NEARID_DATA is '/etc/passwd', which is a file, not a folder; allowed: "):
        data.data_root()
    monkeypatch.setenv("NEARID_DATA", str(tmp_path / "empty"))
    with pytest.raises(mnist.DataError, match=r"missing \(the data folder is \$NEARID_DATA="):
        mnist.verify_mnist()
    assert data.environment_problem({"NEARID_DATA": str(tmp_path)}) is None


@pytest.fixture
def scratch_root(tmp_path, root, monkeypatch):
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks").symlink_to(root / "notebooks")
    monkeypatch.setenv("NEARID_ROOT", str(tmp_path))
    for var in ("NEARID_EXECUTOR", "NEARID_SCHEDULER", "NEARID_WORKERS", "NEARID_FORCE", "NEARID_TASK_CACHE",
                "NEARID_DATA_CACHE", "NEARID_DATA_CACHE_MIN_MB", "NEARID_DATA", "NEARID_CACHE_KEY_FILE"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


@pytest.mark.parametrize("var,value,words", [
    ("NEARID_CACHE_KEY_FILE", "{root}/missing.key", "$NEARID_CACHE_KEY_FILE is '{root}/missing.key', which does "
                                                    "not exist; allowed: a readable file"),
    ("NEARID_CACHE_KEY_FILE", "{root}/lib", "which is a folder, not a file; allowed:"),
    ("NEARID_TASK_CACHE", "/etc/passwd", "$NEARID_TASK_CACHE is '/etc/passwd', which is a file, not a folder; "
                                         "allowed: a folder this user can write"),
    ("NEARID_DATA_CACHE_MIN_MB", "abc", "$NEARID_DATA_CACHE_MIN_MB is 'abc'; allowed: a number of megabytes >= 0"),
    ("NEARID_DATA", "/etc/passwd", "$NEARID_DATA is '/etc/passwd', which is a file, not a folder; allowed:"),
])
def test_nearid_run_refuses_bad_cache_variables_before_any_work(scratch_root, monkeypatch, capsys, var, value, words):
    from nearid.cli import main as cli

    monkeypatch.delenv("NEARID_CACHE_KEY", raising=False)
    monkeypatch.setenv(var, value.format(root=scratch_root))
    start = time.monotonic()
    assert cli.main(["run", "01", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - start < 30
    assert err.count("\n") == 1 and words.format(root=scratch_root) in err, err
    assert sorted(p.name for p in scratch_root.iterdir()) == ["lib", "notebooks"], "nothing may be written"


def test_a_link_planted_as_a_cache_subfolder_redirects_no_write(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    key = task_key(_tasks(1)[0])
    (cache / key[:2]).symlink_to(elsewhere)
    lines: list[str] = []
    out = run_tasks(_tasks(1), cache_dir=cache, log=lines.append)
    assert out[0]["x"] == 0 and list(elsewhere.iterdir()) == []
    assert "1 result not cached: the task cache" in lines[-1] and "is a symbolic link, not a folder" in lines[-1]


def test_the_runners_default_task_cache_is_checked_when_the_variable_is_unset(tmp_path):
    from nearid.book import preflight

    blocked = tmp_path / ".cache"
    blocked.write_text("a file where the cache folder should be")
    with pytest.raises(preflight.PreflightError, match=r"the task cache .*tasks \(\$NEARID_TASK_CACHE unset\) "
                                                       r"cannot be made: .*\.cache is a file, not a folder; set"):
        preflight.check_caches({}, task_cache=blocked / "tasks")
    preflight.check_caches({"NEARID_TASK_CACHE": ""}, task_cache=blocked / "tasks")  # no task cache: nothing to check
    preflight.check_caches({}, task_cache=tmp_path / "fine" / "tasks")
    assert not (tmp_path / "fine").exists()


def test_a_run_without_a_cache_says_nothing_about_caching():
    lines: list[str] = []
    run_tasks(_tasks(), cache_dir=None, log=lines.append)
    assert "not cached" not in lines[-1] and "cache" not in lines[-1]


def fails_at(x: int) -> dict:
    if x == 2:
        raise RuntimeError("planted failure")
    return {"x": x}


def test_a_failing_task_carries_the_unwritable_cache_note(tmp_path):
    cache = tmp_path / "file"
    cache.write_text("x")
    with pytest.raises(RuntimeError, match="planted failure") as info:
        run_tasks([Task(fails_at, {"x": i}) for i in range(3)], cache_dir=cache, log=None)
    assert any("2 results not cached: the task cache" in note for note in info.value.__notes__)
