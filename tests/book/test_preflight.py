"""What a run checks before any work (nearid.book.preflight): the NEARID_* environment, CUDA,
the Dask scheduler, and through `nearid run` one line, exit 2, seconds, nothing written."""

import socket
import time

import pytest

from nearid.book import preflight
from nearid.book.preflight import PreflightError
from nearid.cli import main as cli

DASK = {"device": "cpu", "executor": "dask", "scheduler": ""}


@pytest.mark.parametrize("env,message", [
    ({"NEARID_EXECUTOR": "bogus"}, "$NEARID_EXECUTOR is 'bogus'; allowed: inprocess, processes, dask"),
    ({"NEARID_EXECUTOR": "auto"}, "$NEARID_EXECUTOR is 'auto'"),  # run_tasks would refuse it, late
    ({"NEARID_WORKERS": "two"}, "$NEARID_WORKERS is 'two'; allowed: a whole number >= 1"),
    ({"NEARID_WORKERS": "-3"}, "$NEARID_WORKERS is '-3'"),
    ({"NEARID_SCHEDULER": "foo"}, "$NEARID_SCHEDULER: 'foo' is not [scheme://]host:port"),
    ({"NEARID_SCHEDULER": "http://host:8786"}, "unknown scheme 'http'"),
    ({"NEARID_FORCE": "yes"}, "$NEARID_FORCE is 'yes'; allowed: 1"),
    ({"NEARID_NUM_THREADS": "0"}, "$NEARID_NUM_THREADS is '0'"),
])
def test_bad_environment_variables(env, message):
    with pytest.raises(PreflightError) as info:
        preflight.check_environment(env)
    assert message in str(info.value)


def test_good_environment_variables():
    preflight.check_environment({})
    preflight.check_environment({"NEARID_EXECUTOR": "dask", "NEARID_WORKERS": "4", "NEARID_FORCE": "1",
                                 "NEARID_SCHEDULER": "tcp://10.0.0.5:8786", "NEARID_NUM_THREADS": "2"})
    preflight.check_environment({"NEARID_SCHEDULER": "local", "NEARID_FORCE": "0", "NEARID_EXECUTOR": ""})


def test_cuda_asked_for_and_absent(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(PreflightError, match="device=cuda asks for CUDA, but .*use device=auto"):
        preflight.check_device("02_x", {"device": "cuda", "executor": "auto", "scheduler": ""}, {})
    with pytest.raises(PreflightError):  # the tasks run here: a local cluster is this machine too
        preflight.check_device("02_x", {"device": "cuda", "executor": "dask", "scheduler": "local"}, {})
    # tasks sent to a remote cluster may find GPUs there
    preflight.check_device("02_x", {"device": "cuda", "executor": "dask", "scheduler": "tcp://gpu:8786"}, {})
    preflight.check_device("02_x", {"device": "cuda", "executor": "auto", "scheduler": ""},
                           {"NEARID_EXECUTOR": "dask", "NEARID_SCHEDULER": "tcp://gpu:8786"})
    for device in ("auto", "cpu"):
        preflight.check_device("02_x", {"device": device}, {})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scheduler_refused_unknown_silent_and_missing():
    port = _free_port()
    with pytest.raises(PreflightError, match=f"connection refused: nothing listens on 127.0.0.1:{port}"):
        preflight.check_scheduler("02_x", {**DASK, "scheduler": f"tcp://127.0.0.1:{port}"}, {})
    with pytest.raises(PreflightError, match="host 'nosuchhost.invalid' not found"):
        preflight.check_scheduler("02_x", {**DASK, "scheduler": "tcp://nosuchhost.invalid:8786"}, {})
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        with pytest.raises(PreflightError, match="accepts connections but sent no Dask handshake within 1 s"):
            preflight.check_scheduler("02_x", {**DASK, "scheduler": address}, {}, timeout=1.0)
        assert time.monotonic() - start < 10
    with pytest.raises(PreflightError, match="executor 'dask' needs a scheduler"):
        preflight.check_scheduler("02_x", DASK, {})
    preflight.check_scheduler("02_x", {**DASK, "scheduler": "local"}, {})
    preflight.check_scheduler("02_x", {**DASK, "executor": "inprocess", "scheduler": "tcp://127.0.0.1:1"}, {})


def test_a_running_scheduler_answers():
    distributed = pytest.importorskip("distributed")

    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        assert preflight.probe_scheduler(cluster.scheduler_address, timeout=10) is None


@pytest.fixture
def scratch_root(tmp_path, root, monkeypatch):
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks").symlink_to(root / "notebooks")
    monkeypatch.setenv("NEARID_ROOT", str(tmp_path))
    for var in ("NEARID_EXECUTOR", "NEARID_SCHEDULER", "NEARID_WORKERS", "NEARID_FORCE"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _refused(argv, capsys, scratch_root):
    start = time.monotonic()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert time.monotonic() - start < 30
    assert sorted(p.name for p in scratch_root.iterdir()) == ["lib", "notebooks"], "nothing may be written"
    return err


def test_nearid_run_refuses_at_once(scratch_root, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "-p device=cuda asks for CUDA" in _refused(["run", "02", "--profile", "smoke", "-p", "device=cuda"],
                                                      capsys, scratch_root)
    port = _free_port()
    assert "not reachable: connection refused" in _refused(
        ["run", "02", "--profile", "smoke", "-p", "executor=dask", "-p", f"scheduler=tcp://127.0.0.1:{port}"],
        capsys, scratch_root)
    assert "'scheduler' got 'foo'" in _refused(["run", "02", "--profile", "smoke", "-p", "scheduler=foo"],
                                               capsys, scratch_root)
    assert "given twice" in _refused(["run", "01", "-p", "seed=1", "-p", "seed=2"], capsys, scratch_root)
    monkeypatch.setenv("NEARID_EXECUTOR", "bogus")
    assert "$NEARID_EXECUTOR is 'bogus'" in _refused(["run", "01", "--profile", "smoke"], capsys, scratch_root)
    assert "$NEARID_EXECUTOR is 'bogus'" in _refused(["book", "--profile", "smoke", "--no-build"], capsys,
                                                     scratch_root)


def test_the_kernel_manager_encrypts_and_never_interrupts_at_shutdown():
    """CurveZMQ keys for every chapter kernel (so ipykernel has no plain-TCP warning to print),
    and no SIGINT before a shutdown (an interrupted kernel printed a ZMQError traceback)."""
    import asyncio

    from nearid.book import runner

    km = runner._kernel_manager_class()(kernel_name="python3")
    if runner._curve_ready():
        assert km.transport_encryption == "required" and km._kernel_supports_curve_encryption()
    sent = []

    async def signal_kernel(signum):
        sent.append(signum)

    km._async_signal_kernel = signal_kernel
    km.shutting_down = True
    asyncio.run(km._async_interrupt_kernel())
    assert sent == []


def test_an_output_folder_that_takes_no_file_is_refused_in_one_line(tmp_path, monkeypatch):
    """A read-only mount, simulated (the tests run as root, whom chmod does not stop)."""
    import errno
    import tempfile

    from nearid.book.preflight import check_writable

    check_writable(tmp_path / "new")  # made when missing

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(PreflightError, match=r"cannot write the chapter's outputs to .*: Read-only file system"):
        check_writable(tmp_path)
