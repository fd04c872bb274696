"""Chapter 01's experiments: the ICA sample-size sweep, its verdicts and the dry run."""

import numpy as np
import pandas as pd
import pytest

from nearid.book.profiles import resolve
from nearid.experiments import ch01_definitions as ch01


def test_ica_amari_sweep_separates_gaussian():
    df = ch01.ica_amari_sweep(sample_sizes=[3000], sources=["laplace", "gaussian"], dim=3, repeats=2)
    means = df.groupby("source").amari.mean()
    assert means["laplace"] < 0.1 < means["gaussian"]
    again = ch01.ica_amari_sweep(sample_sizes=[3000], sources=["laplace", "gaussian"], dim=3, repeats=2)
    np.testing.assert_array_equal(df.amari.values, again.amari.values)


def test_settings_dry_run_keeps_shapes_and_cuts_sizes():
    full = resolve("01", "full")
    assert ch01.settings(full)["ica_sample_sizes"] == full.ica_sample_sizes
    dry = ch01.settings(resolve("01", "full", {"dry_run": True}))
    assert dry["n_points"] == ch01.DRY_RUN_ROWS and dry["ica_repeats"] == ch01.DRY_RUN_REPEATS
    assert max(dry["ica_sample_sizes"]) == ch01.DRY_RUN_ROWS and dry["ica_sample_sizes"] == sorted(
        set(dry["ica_sample_sizes"]))


def _sweep(amari):
    """A sweep frame from {(source, n): [amari per repeat]}."""
    return pd.DataFrame([{"source": s, "n": n, "repeat": r, "amari": a}
                         for (s, n), values in amari.items() for r, a in enumerate(values)])


def test_sample_size_verdict_pairs_source_and_repeat():
    sweep = _sweep({("laplace", 100): [0.20, 0.22, 0.21], ("laplace", 1000): [0.02, 0.03, 0.02],
                    ("uniform", 100): [0.15, 0.16, 0.14], ("uniform", 1000): [0.03, 0.02, 0.03],
                    ("gaussian", 100): [0.4, 0.4, 0.4], ("gaussian", 1000): [0.9, 0.85, 0.95]})
    v = ch01.sample_size_verdict(sweep)
    assert v.verdict == "holds" and v.n == 6  # Gaussian sources are left out
    assert v.estimate == pytest.approx(np.mean([0.18, 0.19, 0.19, 0.12, 0.14, 0.11]))
    g = ch01.gaussian_verdict(sweep)
    assert g.verdict == "holds" and g.n == 3 and g.method == "t"
    worse = _sweep({("laplace", 100): [0.02, 0.03], ("laplace", 1000): [0.2, 0.3]})
    assert ch01.sample_size_verdict(worse).verdict == "fails"
    with pytest.raises(ValueError, match="Gaussian"):
        ch01.gaussian_verdict(worse)


def _old_loop(*, sample_sizes, sources, dim, repeats, seed=0):
    """The sweep as one loop, as ica_amari_sweep ran it before it became tasks: the tasks must
    give these numbers, to the bit."""
    import warnings
    import zlib

    from nearid.data.toy import sample_sources
    from nearid.ica import WhitenedICA
    from nearid.metrics.recovery import amari_distance

    rows = []
    for kind in sources:
        for n in sample_sizes:
            for r in range(repeats):
                rng = np.random.default_rng([seed, r, n, zlib.crc32(kind.encode())])
                S = sample_sources(kind, n, dim, rng)
                A = rng.standard_normal((dim, dim)) + 2 * np.eye(dim)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ica = WhitenedICA(n_components="all", random_state=r, max_iter=2000).fit(S @ A.T)
                rows.append({"source": kind, "n": n, "repeat": r, "converged": ica.converged_,
                             "amari": amari_distance(ica.unmixing_, A)})
    return pd.DataFrame(rows)


def test_the_sweep_as_tasks_gives_the_loops_numbers_in_any_order(tmp_path):
    from nearid.tasks import run_tasks

    P = resolve("01", "smoke", {"ica_sources": ["laplace", "gaussian"], "ica_sample_sizes": [50, 400],
                                "ica_repeats": 2, "seed": 3})
    tasks = ch01.plan(P)
    assert len(tasks) == 2 * 2 * 2 and len({t.kind for t in tasks}) == 4, "one fit per task, a kind per (source, n)"
    assert tasks[0].kind == "ica_fit_laplace_n50" and tasks[0].steps is None
    old = _old_loop(sample_sizes=[50, 400], sources=["laplace", "gaussian"], dim=P.ica_dim, repeats=2, seed=3)
    backwards = run_tasks(tasks[::-1], cache_dir=tmp_path, log=None)[::-1]
    pd.testing.assert_frame_equal(ch01.collect(backwards), old, check_exact=True)
    cached = run_tasks(tasks, cache_dir=tmp_path, log=None)  # read back from the task cache
    pd.testing.assert_frame_equal(ch01.collect(cached), old, check_exact=True)
    serial = ch01.ica_amari_sweep(sample_sizes=[50, 400], sources=["laplace", "gaussian"], dim=P.ica_dim,
                                  repeats=2, seed=3)
    pd.testing.assert_frame_equal(serial, old, check_exact=True)


def test_plan_follows_the_dry_run_and_lists_the_evaluation():
    full = ch01.plan(resolve("01", "full"))
    P = resolve("01", "full")
    assert len(full) == len(P.ica_sources) * len(P.ica_sample_sizes) * P.ica_repeats
    dry = ch01.plan(resolve("01", "full", {"dry_run": True}))
    assert max(t.kwargs["n"] for t in dry) == ch01.DRY_RUN_ROWS
    assert {t.kwargs["repeat"] for t in dry} == set(range(ch01.DRY_RUN_REPEATS))
    assert {t.kwargs["dim"] for t in dry} == {P.ica_dim}, "the dry run keeps the full shape's dimension"
    rotated, exercise = ch01.evaluation_plan(P)
    assert rotated.kwargs["n_points"] == P.n_points and rotated.kwargs["noise_levels"] == P.noise_levels
    assert exercise.kwargs["dim"] == P.ica_dim
    assert ch01.evaluation_plan(resolve("01", "full", {"dry_run": True}))[0].kwargs["n_points"] == ch01.DRY_RUN_ROWS


def test_rotated_copy_is_exact_without_noise():
    frame = ch01.rotated_copy(n_points=400, noise_levels=[0.0, 0.2], seed=1)
    clean = frame[frame.noise == 0].set_index("family").error
    assert clean["rigid"] < 1e-8 and clean["linear"] < 1e-8
    assert (frame[frame.noise == 0.2].error > 1e-3).all()
