"""`nearid align`: tables on small files, JSON output, every format, layer maps, and every
bad input -> exit 2, no files."""

import json
import pickle
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.numpy import save_file

from nearid.cli.align import JSON_KEYS, main


def _pair(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.laplace(size=(n, d))
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return A, 2.0 * A @ Q + 1.0


def _write(tmp_path, A, B, suffix=".npy"):
    pa, pb = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    for p, X in ((pa, A), (pb, B)):
        if suffix == ".npy":
            np.save(p, X)
        elif suffix == ".npz":
            np.savez(p, embeddings=X)
        else:
            pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).to_parquet(p)
    return str(pa), str(pb)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".parquet"])
def test_json_output(tmp_path, capsys, suffix):
    A, B = _pair()
    pa, pb = _write(tmp_path, A, B, suffix)
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [*JSON_KEYS, "kernels"] and out["kernels"]["mode"] in ("portable", "native")
    # B is an exact rigid image of A (scaled rotation + shift): rigid and linear are exact
    assert out["rigid"] < 1e-10 and out["linear"] < 1e-10
    assert out["cka"] == pytest.approx(1.0)
    assert out["n_fit"] == 100 and out["n_eval"] == 100
    assert out["permutation"] > out["rigid"]


def test_table_output_and_options(tmp_path, capsys):
    A, B = _pair()
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--fit-fraction", "0.7", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    for word in ("permutation", "rigid", "linear", "ica", "ica efficiency", "linear CKA",
                 "fitted on 140 rows", "evaluated on 60"):
        assert word in text


def test_seed_changes_split_deterministically(tmp_path, capsys):
    rng = np.random.default_rng(1)
    A = rng.laplace(size=(120, 3))
    B = A + 0.3 * rng.normal(size=A.shape)
    pa, pb = _write(tmp_path, A, B)
    runs = []
    for seed in (0, 0, 1):
        main([pa, pb, "--json", "--seed", str(seed)])
        doc = json.loads(capsys.readouterr().out)
        for wall_clock in ("seconds", "timings"):  # how long it took is not a result
            doc.pop(wall_clock, None)
        runs.append(doc)
    assert runs[0] == runs[1] and runs[0]["linear"] != runs[2]["linear"]


def _bad_inputs(tmp_path):
    A, B = _pair(n=50, d=3)
    cases = {}
    np.save(tmp_path / "a.npy", A)
    cases["missing"] = (str(tmp_path / "a.npy"), str(tmp_path / "nope.npy"), "no such file")
    np.save(tmp_path / "short.npy", B[:40])
    cases["rows"] = (str(tmp_path / "a.npy"), str(tmp_path / "short.npy"), "50 rows and B has 40")
    Bn = B.copy()
    Bn[3, 0] = np.nan
    np.save(tmp_path / "nan.npy", Bn)
    cases["nan"] = (str(tmp_path / "a.npy"), str(tmp_path / "nan.npy"), "NaN or infinite")
    Bi = B.copy()
    Bi[5, 1] = np.inf
    np.save(tmp_path / "inf.npy", Bi)
    cases["inf"] = (str(tmp_path / "a.npy"), str(tmp_path / "inf.npy"), "NaN or infinite")
    np.save(tmp_path / "few_a.npy", A[:6])
    np.save(tmp_path / "few_b.npy", B[:6])
    cases["few"] = (str(tmp_path / "few_a.npy"), str(tmp_path / "few_b.npy"), "too few rows")
    np.save(tmp_path / "3d.npy", B.reshape(50, 3, 1))
    cases["3d"] = (str(tmp_path / "a.npy"), str(tmp_path / "3d.npy"), "2-D")
    np.save(tmp_path / "1d.npy", B[:, 0])
    cases["1d"] = (str(tmp_path / "1d.npy"), str(tmp_path / "a.npy"), "2-D")
    (tmp_path / "x.txt").write_text("1 2 3")
    cases["type"] = (str(tmp_path / "a.npy"), str(tmp_path / "x.txt"), "unsupported file type")
    np.savez(tmp_path / "many.npz", first=B, second=B)
    cases["key"] = (str(tmp_path / "a.npy"), f"{tmp_path}/many.npz:third", "no array 'third'; it holds: first, second")
    cases["nokey"] = (str(tmp_path / "a.npy"), str(tmp_path / "many.npz"), "holds several arrays")
    np.save(tmp_path / "const.npy", np.ones_like(B))
    cases["constant"] = (str(tmp_path / "a.npy"), str(tmp_path / "const.npy"), "B is constant")
    (tmp_path / "noise.npy").write_bytes(np.random.default_rng(0).bytes(1000))
    cases["noise"] = (str(tmp_path / "noise.npy"), str(tmp_path / "a.npy"), "not a valid .npy file")

    class Evil:
        def __reduce__(self):
            return (open, (str(tmp_path / "ran"), "w"))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps(Evil()))
    cases["pickle"] = (str(tmp_path / "evil.pt"), str(tmp_path / "a.npy"), "never unpickles")
    return cases


@pytest.mark.parametrize("case", ["missing", "rows", "nan", "inf", "few", "3d", "1d", "type", "key", "nokey",
                                  "constant", "noise", "pickle"])
def test_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys, case):
    pa, pb, message = _bad_inputs(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([pa, pb, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.startswith("nearid align: error:")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _write_format(tmp_path, name, X, suffix):
    """Write X as a file of the given type; returns the path to pass on the command line."""
    path = tmp_path / f"{name}{suffix}"
    if suffix == ".pt":
        torch.save(torch.from_numpy(X), path)
        return str(path)
    if suffix == ".safetensors":
        save_file({"other": X[:, :1].copy(), "emb": X}, str(path))
        return f"{path}:emb"
    if suffix == ".h5":
        with h5py.File(path, "w") as f:
            f["model/out"] = X
            f["labels"] = np.arange(len(X))
        return f"{path}:model/out"
    np.savez(path, emb=X, ids=np.arange(len(X)))
    return f"{path}:emb"


@pytest.mark.parametrize("suffix", [".pt", ".safetensors", ".h5", ".npz"])
def test_every_format_through_the_command(tmp_path, capsys, suffix):
    A, B = _pair()
    pa = _write_format(tmp_path, "a", A.astype(np.float32), suffix)
    pb = _write_format(tmp_path, "b", B.astype(np.float32), suffix)
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rigid"] < 1e-4 and out["n_fit"] == 100 and out["dtype"] == "float32"


def test_json_reports_ica_components_and_table_warns_on_low_variance(tmp_path, capsys):
    rng = np.random.default_rng(0)
    A = rng.laplace(size=(600, 20))  # a flat spectrum: one component holds 5%
    B = A @ np.linalg.qr(rng.normal(size=(20, 20)))[0]
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--json", "--ica-components", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ica_components"] == [3, 3] and 0 < out["ica_variance"][0] < 0.5
    assert main([pa, pb, "--ica-components", "3"]) == 0
    text = capsys.readouterr().out
    assert "warning: A's 3 whitened components hold only" in text and "warning: B's 3" in text
    assert main([pa, pb]) == 0
    assert "warning" not in capsys.readouterr().out


def _layer_files(tmp_path, n=300, rows_b=None):
    rng = np.random.default_rng(0)
    Z = rng.laplace(size=(n, 6))
    A = {f"a{i}": (Z[:, 2 * i:2 * i + 2] @ rng.normal(size=(2, 5)) + 0.05 * rng.normal(size=(n, 5))).astype(np.float32)
         for i in range(3)}
    B = {f"b{i}": (Z[:, 2 * i:2 * i + 2] @ rng.normal(size=(2, 4)) + 0.05 * rng.normal(size=(n, 4))).astype(np.float32)
         for i in range(3)}
    if rows_b:
        B = {k: v[:rows_b] for k, v in B.items()}
    np.savez(tmp_path / "A.npz", **A)
    save_file(B, str(tmp_path / "B.safetensors"))
    return str(tmp_path / "A.npz"), str(tmp_path / "B.safetensors")


def test_layers_table_json_and_plot(tmp_path, capsys):
    pa, pb = _layer_files(tmp_path)
    assert main(["--layers", pa, pb]) == 0
    text = capsys.readouterr().out
    assert "rows: A's layers, columns: B's" in text and "a2" in text and "b1" in text
    assert main(["--layers", pa, pb, "--metric", "cka", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a_layers"] == ["a0", "a1", "a2"] and out["b_layers"] == ["b0", "b1", "b2"]
    vals = np.array(out["values"])
    assert out["metric"] == "cka" and out["lower_is_better"] is False
    assert np.argmax(vals, axis=1).tolist() == [0, 1, 2]  # layer i of A shares its factors with layer i of B
    png = tmp_path / "out" / "map.png"
    assert main(["--layers", pa, pb, "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"heatmap: {png}" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["rows", "plot_type", "plot_without_layers", "single_file"])
def test_layers_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys, case):
    pa, pb = _layer_files(tmp_path, rows_b=250 if case == "rows" else None)
    png = tmp_path / "map.png"
    argv = {"rows": ["--layers", pa, pb, "--plot", str(png)],
            "plot_type": ["--layers", pa, pb, "--plot", str(tmp_path / "map.bmp")],
            "plot_without_layers": [pa + ":a0", pb + ":b0", "--plot", str(png)],
            "single_file": ["--layers", pa + ":a0", pb]}[case]
    message = {"rows": "row counts differ", "plot_type": "unsupported image type",
               "plot_without_layers": "go with --layers", "single_file": "drop ':a0'"}[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_json_piped_is_silent_on_stderr(tmp_path):
    A, B = _pair(n=400, d=6)
    pa, pb = _write(tmp_path, A, B)
    env_code = "import nearid.align as a; a.PROGRESS_DELAY = 0.0; from nearid.cli.align import main; " \
               "import sys; sys.exit(main(sys.argv[1:]))"
    quiet = subprocess.run([sys.executable, "-c", env_code, pa, pb, "--json"], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = subprocess.run([sys.executable, "-c", env_code, pa, pb], capture_output=True, text=True)
    assert loud.returncode == 0 and "%" in loud.stderr  # the table run shows its progress bar
    off = subprocess.run([sys.executable, "-c", env_code, pa, pb, "--no-progress"], capture_output=True, text=True)
    assert off.returncode == 0 and off.stderr == ""


def test_bad_fit_fraction(tmp_path, capsys):
    A, B = _pair()
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--fit-fraction", "1.5"]) == 2
    assert "fit_fraction" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    A, B = _pair(n=60, d=2)
    pa, pb = _write(tmp_path, A, B)
    ok = subprocess.run([sys.executable, "-m", "nearid.cli.align", pa, pb, "--json"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and set(json.loads(ok.stdout)) == {*JSON_KEYS, "kernels"}
    bad = subprocess.run([sys.executable, "-m", "nearid.cli.align", pa, str(tmp_path / "z.npy")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such file" in bad.stderr and bad.stdout == ""


def test_threads_leave_busy_cores_alone(monkeypatch):
    from threadpoolctl import threadpool_limits

    from nearid.cli import align as cli_align

    monkeypatch.setattr(cli_align.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(cli_align.os, "getloadavg", lambda: (7.5, 7.0, 6.0))  # a lagging load average is ignored
    with threadpool_limits(limits=2):
        monkeypatch.setattr(cli_align, "_busy_cores", lambda cores: 1.9)
        assert cli_align._idle_threads() == 1  # every core busy now: one thread
        monkeypatch.setattr(cli_align, "_busy_cores", lambda cores: 0.05)
        assert cli_align._idle_threads() is None  # idle now: the BLAS default stands


def test_busy_cores_are_measured_now():
    from nearid.cli import align as cli_align

    busy = cli_align._busy_cores({0}, interval=0.05)
    assert busy is None or 0.0 <= busy <= 1.0


def test_selection_runs_only_what_was_asked(tmp_path, capsys):
    A, B = _pair(n=400, d=6)
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--families", "rigid", "--measures", "cka,debiased_cka,rsa", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rigid"] is not None and out["ica"] is None and out["ica_components"] is None  # no FastICA
    assert out["measures"] == ["cka", "debiased_cka", "rsa"] and out["debiased_cka"] == pytest.approx(1.0)
    assert out["measure_rows"]["rsa"] == "on the 200 fit rows" and isinstance(out["threads"], int)
    assert main([pa, pb, "--families", "none", "--measures", "cca", "--intervals", "--resamples", "10",
                 "--permutations", "3"]) == 0
    text = capsys.readouterr().out
    assert "mean CCA" in text and "rigid" not in text and "rows shuffled" in text and "BLAS thread" in text
    assert "fitted on 200 fit rows, scored on 200 held-out rows" in text
    with pytest.raises(SystemExit):
        main([pa, pb, "--measures", "cka,nope"])
    assert "unknown measure 'nope'" in capsys.readouterr().err
    assert main([pa, pb, "--measure-param", "bogus=1"]) == 2


def test_measures_alone_do_not_import_scikit_learn(tmp_path):
    A, B = _pair(n=300, d=5)
    pa, pb = _write(tmp_path, A, B)
    code = ("import sys; from nearid.cli.align import main; "
            f"rc = main([{pa!r}, {pb!r}, '--families', 'none', '--measures', 'cka,rsa,procrustes']); "
            "print(rc, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 False"


# --------------------------------------------------------------------------- wide inputs, round-off
def _self_pairs(n=2000, d=16, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.laplace(size=(n, d)).astype(np.float32)
    perm, sign = rng.permutation(d), rng.choice([-1, 1], d).astype(np.float32)
    return A, {"itself": A, "signed permutation": A[:, perm] * sign}


@pytest.mark.parametrize("which", ["itself", "signed permutation"])
def test_efficiency_not_defined_without_a_gap(tmp_path, capsys, which):
    A, pairs = _self_pairs()
    pa, pb = _write(tmp_path, A, pairs[which])
    assert main([pa, pb, "--json"]) == 0
    raw = capsys.readouterr().out
    out = json.loads(raw)
    assert out["ica_efficiency"] is None and "NaN" not in raw
    assert abs(out["permutation"] - out["rigid"]) < 1e-5
    assert main([pa, pb, "--no-progress"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("ica efficiency"))
    assert "n/a" in line and "numerical noise" in line and "%" not in line.split("n/a")[0]


def test_efficiency_with_a_real_gap_is_a_number(tmp_path, capsys):
    A, B = _pair(n=400, d=6)
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out["ica_efficiency"], float)


def test_values_near_1e30_are_computed_in_float64_and_the_output_says_so(tmp_path, capsys):
    A, B = _pair(n=400, d=6)
    pa, pb = _write(tmp_path, (A * 1e30).astype(np.float32), (B * 1e30).astype(np.float32))
    assert main([pa, pb, "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "cross-products in float64" in captured.out and "overflow float32" in captured.out
    assert "NaN" not in captured.err and "inf" not in captured.err
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dtype"] == "float64" and out["rigid"] < 1e-5 and out["cka"] == pytest.approx(1.0)


def test_efficiency_of_two_unrelated_inputs_is_flagged(tmp_path, capsys):
    rng = np.random.default_rng(0)
    pa, pb = _write(tmp_path, rng.laplace(size=(400, 2)), rng.laplace(size=(400, 2)))
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out["ica_efficiency"], float), "the number itself is computed as before"
    assert "within twice its standard error" in out["ica_efficiency_caveat"]
    assert main([pa, pb, "--no-progress"]) == 0
    assert "caveat: the ica efficiency says little here: perm - rigid = " in capsys.readouterr().out


def test_efficiency_with_a_clear_gap_has_no_caveat(tmp_path, capsys):
    rng = np.random.default_rng(0)
    Z = rng.laplace(size=(2000, 6))
    pa, pb = _write(tmp_path, Z @ rng.normal(size=(6, 12)), Z @ rng.normal(size=(6, 12)))
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ica_efficiency_caveat"] is None and out["permutation"] - out["rigid"] > 0.05
    assert main([pa, pb, "--no-progress"]) == 0
    assert "caveat" not in capsys.readouterr().out


def test_component_cap_in_json_and_table(tmp_path, capsys):
    rng = np.random.default_rng(0)
    Z = rng.laplace(size=(1000, 8))
    A = Z @ rng.normal(size=(8, 20)) + 0.3 * rng.normal(size=(1000, 20))
    B = Z @ rng.normal(size=(8, 20)) + 0.3 * rng.normal(size=(1000, 20))
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ica_max_components"] == 256 and out["ica_cap_bound"] == [False, False]
    assert out["ica_components_by_rule"] == out["ica_components"] and out["fallbacks"] == []
    assert main([pa, pb, "--json", "--ica-max-components", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ica_components"] == [3, 3] and out["ica_cap_bound"] == [True, True]
    assert min(out["ica_components_by_rule"]) > 3
    assert main([pa, pb, "--no-progress", "--ica-max-components", "3"]) == 0
    assert "capped at 3 per side" in capsys.readouterr().out
    assert main([pa, pb, "--json", "--ica-max-components", "0"]) == 0  # no cap
    out = json.loads(capsys.readouterr().out)
    assert out["ica_max_components"] is None and out["ica_cap_bound"] is None
    assert main([pa, pb, "--ica-max-components", "-1"]) == 2


def test_help_states_the_cap(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--ica-max-components" in text and "default 256" in text


def test_failing_svd_falls_back_and_says_so(tmp_path, capsys, monkeypatch):
    A, B = _pair(n=400, d=6)
    pa, pb = _write(tmp_path, A, B)

    def failing(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", failing)
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any("rigid SVD" in n and "gesvd" in n for n in out["fallbacks"])
    assert out["rigid"] < 1e-10
    assert main([pa, pb, "--no-progress"]) == 0
    assert "numerical fallback: rigid SVD" in capsys.readouterr().out


def test_layers_with_a_measure(tmp_path, capsys):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((300, 5))
    np.savez(tmp_path / "a.npz", l0=A, l1=A @ rng.standard_normal((5, 5)))
    assert main(["--layers", str(tmp_path / "a.npz"), str(tmp_path / "a.npz"), "--metric", "mutual_knn",
                 "--max-rows", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metric"] == "mutual_knn" and out["values"][0][0] == pytest.approx(1.0)
