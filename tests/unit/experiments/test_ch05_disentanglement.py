from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from nearid import paper
from nearid.claims import registry
from nearid.book.profiles import resolve
from nearid.experiments import ch05_disentanglement as ch05
from nearid.tasks import Task

TINY = ch05.Setup(image_size=16, n_train=130, n_eval=80, epochs=1, batch_size=64, lr=1e-3, width=4, hidden=16,
                  supersample=1, device="cpu")


def _score(model: str = "ae", *, hyper=None, max_steps=None, evaluate=1.0, **setup):
    """One task on shapes3d, seed 0, with TINY's setup changed by ``setup``."""
    return ch05.train_and_score(dataset="shapes3d", model=model, seed=0, setup=replace(TINY, **setup),
                                hyper=hyper, max_steps=max_steps, evaluate=evaluate)


@pytest.fixture(scope="module")
def tiny():
    return ch05.run_benchmark(datasets=["shapes3d"], seeds=[0], image_size=16, n_train=130, n_eval=80,
                              epochs=1, width=4, hidden=16, supersample=1, trend_epochs=[1, 2],
                              device="cpu", log=None)


@pytest.fixture(scope="module")
def ae_trend():
    """One AE task trained to 2 epochs with snapshots after 1 and 2."""
    return _score(trend_epochs=[1, 2], secondary=False)


def test_benchmark_rows_and_ica_variants(tiny):
    """The headline AE + ICA (the default, ica_keep="all") rotates every direction the code
    holds; the top-K variant is scored beside it from the same codes."""
    assert set(tiny.scores.model) == {*ch05.MODELS, "ae_ica_k"}
    assert set(tiny.scores.columns) >= {"dataset", "model", "seed", *ch05.SCORES}
    assert tiny.nmi[("shapes3d", "ae_ica_k", 0)].shape == (6, 6)  # K factors x K components
    # "all" whitens onto every direction the code uses (at most 2K = 12), with no
    # rows-per-component cap (130 rows would allow 13)
    assert 6 < tiny.nmi[("shapes3d", "ae_ica", 0)].shape[1] <= 12
    assert tiny.codes[("shapes3d", "ae", 0)].shape == (80, 12)
    assert set(tiny.trend.epochs) == {1, 2} and set(tiny.trend.model) == {"ae", "ae_ica"}
    assert tiny.ica_components[("shapes3d", "ae_ica_k", 0)]["components"] == 6
    assert set(tiny.ica_converged) == {("shapes3d", "ae_ica", 0), ("shapes3d", "ae_ica_k", 0)}
    assert tiny.infoe_fits > 0


def test_ica_on_the_whole_code_keeps_infoe_at_convergence(tiny):
    """Whitening + ICA onto every direction of the code is invertible: InfoE's unpenalised
    probe run to convergence sees the same information. The paper's probe (standardised,
    stopped at 100 iterations) is a different number, and can move under the same map."""
    s = tiny.scores.set_index("model")
    assert s.loc["ae_ica", "infoe_converged"] == pytest.approx(s.loc["ae", "infoe_converged"], abs=3e-3)
    assert s.loc["ae", "infoe"] != s.loc["ae", "infoe_converged"]
    assert tiny.infoe_capped > 0  # the reference probe stops at its cap on these codes


def test_converged_infoe_check_is_the_declared_method_check(tiny):
    from nearid.claims import registry

    rec = ch05.converged_infoe_check(tiny.scores, datasets=["shapes3d"])[ch05.CONVERGED_INFOE_CHECK]
    entry = registry()[ch05.CONVERGED_INFOE_CHECK]
    assert entry.kind == "method_check" and not entry.counts_as_paper_claim
    assert rec["test"] == entry.test and rec["margin"] == entry.margin
    assert abs(rec["estimate"]) < 3e-3 and rec["n"] == 1
    assert rec["verdict"] == "inconclusive"  # one seed: no interval


def test_snapshot_equals_a_shorter_run(ae_trend):
    """With a constant learning rate the AE after 1 of 2 epochs is the AE of a 1-epoch run,
    and the snapshot after 2 epochs is the AE of a 2-epoch run."""
    one = _score(secondary=False)
    np.testing.assert_array_equal(one["codes"]["ae"], ae_trend["codes"]["ae"])
    assert one["rows"]["ae_ica"]["infom"] == ae_trend["rows"]["ae_ica"]["infom"]
    two = _score(epochs=2, secondary=False)
    at2 = {t["model"]: t for t in ae_trend["trend"] if t["epochs"] == 2}
    for key in ("ae", "ae_ica"):
        for s in ch05.INFOMEC:
            assert at2[key][s] == pytest.approx(two["rows"][key][s], abs=1e-12), (key, s)
    assert ae_trend["steps"] == 2 * 3 and ae_trend["epochs"] == 2  # ceil(130 / 64) = 3 per epoch
    assert [t["steps"] for t in ae_trend["trend"] if t["model"] == "ae"] == [3, 6]


def test_task_is_deterministic_and_plain(ae_trend):
    again = _score(trend_epochs=[1, 2], secondary=False)
    np.testing.assert_array_equal(again["codes"]["ae_ica"], ae_trend["codes"]["ae_ica"])
    assert again["trend"] == ae_trend["trend"]
    assert all(isinstance(v, np.ndarray) for v in ae_trend["codes"].values())


def test_latent_multiplier_and_baseline_task():
    r = _score("bioae", latent_multiplier=3, secondary=False, trend_epochs=[1, 2])
    assert set(r["rows"]) == {"bioae"} and r["trend"] == [] and r["epochs"] == 1
    assert r["codes"]["bioae"].shape == (80, 18)
    assert r["nmi"]["bioae"].shape == (6, 18)
    with pytest.raises(ValueError, match="latent_multiplier"):
        _score(latent_multiplier=0)


def test_max_steps_cuts_the_run_and_fills_every_budget():
    r = _score(trend_epochs=[1, 3], max_steps=2, secondary=False)
    assert r["steps"] == 2
    assert {t["epochs"] for t in r["trend"]} == {1, 3}


def test_a_planned_run_prices_its_scoring_apart(monkeypatch):
    """nearid plan times training alone (evaluate=0) and scoring on a share of the images:
    the model trains the same in both, only what is encoded and scored shrinks."""
    whole = _score(trend_epochs=[1, 2], max_steps=3, secondary=False)
    bare = _score(trend_epochs=[1, 2], max_steps=3, secondary=False, evaluate=0.0)
    assert bare["rows"] == {} and bare["trend"] == [] and bare["losses"] == whole["losses"]
    monkeypatch.setattr(ch05, "MIN_EVALUATED", 10)
    half = _score(trend_epochs=[1, 2], max_steps=3, secondary=False, evaluate=0.5)
    assert half["losses"] == whole["losses"] and whole["codes"]["ae"].shape[0] == TINY.n_eval
    assert {k: v.shape[0] for k, v in half["codes"].items()} == {"ae": 40, "ae_ica": 40, "ae_ica_k": 40}
    with pytest.raises(ValueError, match="evaluate must be a share"):
        _score(evaluate=-1)


def test_bad_arguments():
    with pytest.raises(ValueError, match="ica_keep"):
        ch05.Setup(ica_keep="half")
    with pytest.raises(ValueError, match="unknown dataset 'dsprites'; valid: shapes3d"):
        ch05.benchmark_tasks(datasets=["dsprites"])
    with pytest.raises(ValueError, match="unknown model 'vae'; valid: ae"):
        ch05.benchmark_tasks(datasets=["shapes3d"], models=["vae"])
    with pytest.raises(ValueError, match="unknown trained model"):
        _score("ae_ica")
    with pytest.raises(ValueError, match=r"'latent_multiplier' got 9; allowed: an int in \[1, 8\]"):
        ch05.Setup(latent_multiplier=9)


def test_the_profile_checks_with_the_experiments_rules():
    from nearid.book.profiles import CONSTRAINTS

    declared = CONSTRAINTS["05_disentanglement"]
    assert declared["latent_multiplier"].constraint is ch05.LATENT_MULTIPLIER
    assert declared["ica_keep"].constraint is ch05.ICA_KEEP_CHOICE


def test_numerical_rank_ignores_float32_noise():
    rng = np.random.default_rng(0)
    Z = (rng.normal(size=(300, 4)) @ rng.normal(size=(4, 10))).astype(np.float32).astype(np.float64)
    assert ch05.numerical_rank(Z) == 4 and np.linalg.matrix_rank(Z) > 4  # float32 rounding lifts it
    ica = ch05.fit_ica(Z, "all", seed=0)
    assert ica.n_components_ == 4
    assert ch05.fit_ica(rng.normal(size=(50, 10)), "all", seed=0).n_components_ == 10  # no 50 // 10 cap


def test_top_k_as_the_headline_puts_the_whole_code_beside_it():
    res = ch05.run_benchmark(datasets=["shapes3d"], seeds=[0], models=["ae", "ae_ica"], image_size=16,
                             n_train=130, n_eval=64, epochs=1, width=4, hidden=16, supersample=1,
                             ica_keep="k", device="cpu", log=None)
    assert set(res.scores.model) == {"ae", "ae_ica", "ae_ica_all"}
    assert res.nmi[("shapes3d", "ae_ica", 0)].shape[1] == 6
    assert res.nmi[("shapes3d", "ae_ica_all", 0)].shape[1] > 6


@pytest.mark.parametrize("profile", ["smoke", "quick", "full"])
def test_plan_lists_one_task_per_training_run(profile):
    P = resolve("05_disentanglement", profile, {})
    tasks = ch05.plan(P)
    assert len(tasks) == len(P.datasets) * P.seeds * 4
    assert all(isinstance(t, Task) and t.fn is ch05.train_and_score and t.gpu for t in tasks)  # device "auto"
    per_epoch = -(-P.n_train // P.batch_size)
    ae = [t for t in tasks if t.kind == "ch05:ae"]
    assert len(ae) == len(P.datasets) * P.seeds
    assert ae[0].steps == max(P.trend_epochs) * per_epoch
    assert [t for t in tasks if t.kind == "ch05:bioae"][0].steps == P.epochs * per_epoch
    assert all(t.kwargs["max_steps"] is None for t in tasks)
    assert all(t.kwargs["setup"].trend_epochs == () for t in tasks if t.kind != "ch05:ae")
    assert {t.kwargs["setup"] for t in tasks if t.kind == "ch05:ae"} == {ch05.plan(P)[0].kwargs["setup"]}
    assert [t.kwargs["dataset"] for t in tasks[:4]] == [P.datasets[0]] * 4  # one dataset at a time


def test_dry_run_plan_cuts_steps_and_data():
    P = resolve("05_disentanglement", "full", {"dry_run": True})
    tasks = ch05.plan(P)
    assert all(t.kwargs["max_steps"] == ch05.DRY_RUN_STEPS and t.steps == ch05.DRY_RUN_STEPS for t in tasks)
    assert all(t.kwargs["setup"].n_train == ch05.DRY_RUN_TRAIN and t.kwargs["setup"].n_eval == ch05.DRY_RUN_EVAL
               for t in tasks)
    assert tasks[0].kwargs["setup"].image_size == 64 and tasks[0].kwargs["setup"].width == P.width


def _fake_scores(gain: dict, seeds=(0, 1, 2)):
    """AE at 0.4 + seed noise; AE + ICA = AE + gain[dataset] (+ tiny seed wobble); baselines 0.5."""
    rows = []
    for ds in paper.TABLE2_DATASETS:
        for seed in seeds:
            base = 0.4 + 0.01 * seed
            for m, v in (("ae", base), ("ae_ica", base + gain[ds] + 0.002 * (seed - 1)),
                         ("beta_vae", 0.5), ("beta_tcvae", 0.5 + 0.01 * seed), ("bioae", 0.3 + 0.01 * seed)):
                rows.append({"dataset": ds, "model": m, "seed": seed, **{s: v for s in ch05.SCORES}})
    return pd.DataFrame(rows)


def test_claims_decide_by_paired_intervals():
    gain = {"shapes3d": 0.2, "mpi3d": -0.1, "falcor3d": 0.0005, "isaac3d": 0.1}
    out = ch05.claims(_fake_scores(gain), datasets=list(paper.TABLE2_DATASETS))
    assert out["ica_vs_ae_infom_shapes3d"]["verdict"] == "holds"
    assert out["ica_vs_ae_infom_mpi3d"]["verdict"] == "fails"
    assert out["ica_vs_ae_infom_falcor3d"]["verdict"] == "inconclusive"
    assert out["ica_vs_ae_infom_aggregated"]["estimate"] == pytest.approx(np.mean(list(gain.values())))
    assert out["ica_vs_ae_infom_shapes3d"]["paper"] == pytest.approx(0.79 - 0.34)
    assert out["ica_vs_ae_infoe_aggregated"]["paper"] == pytest.approx(0.83 - 0.76)
    assert out["ica_vs_bioae_infom_aggregated"]["verdict"] == "holds"
    assert out["ica_vs_beta_vae_infom_aggregated"]["paper"] == pytest.approx(0.06)
    # tests as the registry declares them: "comparably" is non-inferiority within the margin
    assert out["ica_vs_beta_vae_infom_aggregated"]["test"] == "non_inferiority"
    assert out["ica_vs_beta_vae_infom_aggregated"]["margin"] == pytest.approx(0.05)  # InfoM's in Table 5
    assert out["ica_vs_beta_vae_infom_aggregated"]["threshold"] == pytest.approx(-0.05)
    # a difference the paper prints as 0 is tested as equivalence: InfoC on MPI3D is -0.1 here
    assert out["ica_vs_ae_infoc_mpi3d"]["test"] == "equivalence"
    assert out["ica_vs_ae_infoc_mpi3d"]["verdict"] == "fails"
    assert out["ica_vs_ae_infoe_falcor3d"]["test"] == "equivalence"
    assert out["ica_vs_ae_infoe_falcor3d"]["verdict"] == "holds"  # +0.0005, inside InfoE's +-0.02
    assert out["ica_vs_ae_infom_shapes3d"]["test"] == "superiority"
    # each record says what it compares, as data: the id is a name, never parsed
    assert out["ica_vs_ae_infom_shapes3d"]["about"] == {"against": "ae", "score": "infom", "dataset": "shapes3d"}
    assert all(cid == f"ica_vs_{r['about']['against']}_{r['about']['score']}_{r['about']['dataset']}"
               for cid, r in out.items())
    conv = {(ds, "ae_ica", s): not (ds == "isaac3d" and s == 1) for ds in paper.TABLE2_DATASETS for s in (0, 1, 2)}
    flagged = ch05.claims(_fake_scores(gain), datasets=list(paper.TABLE2_DATASETS), ica_converged=conv)
    assert flagged["ica_vs_ae_infom_isaac3d"]["ica_converged"] is False
    assert flagged["ica_vs_ae_infom_aggregated"]["ica_converged"] is False
    assert flagged["ica_vs_ae_infom_shapes3d"]["ica_converged"] is True
    # on all four datasets it decides exactly the registry's claims of its section: a new claim is
    # one entry there and one decision in the module, with no count to edit here
    assert set(out) == {c.id for c in registry().values() if c.section == "ch05-verdict"}
    for rec in out.values():
        assert {"claim", "estimate", "low", "high", "verdict", "n", "method", "paper", "section"} <= set(rec)
        assert rec["method"] == "t" and rec["n"] == 3 and rec["section"] == "ch05-verdict"
    # a subset of datasets has no paper number for the aggregate (the paper's is over all four)
    sub = ch05.claims(_fake_scores(gain), datasets=["shapes3d", "mpi3d"])
    assert sub["ica_vs_ae_infom_aggregated"]["paper"] is None
    assert sub["ica_vs_ae_infom_shapes3d"]["paper"] is not None


def test_infom_and_infoc_claims_read_the_equal_latent_columns_unless_asked_for_the_rule():
    gain = dict.fromkeys(paper.TABLE2_DATASETS, 0.1)
    scores = _fake_scores(gain)
    scores.loc[scores.model == "ae_ica", ["infom_k", "infoc_k"]] -= 0.2  # on K latents ICA loses
    equal = ch05.claims(scores, datasets=list(paper.TABLE2_DATASETS))
    rule = ch05.claims(scores, datasets=list(paper.TABLE2_DATASETS), latents="active")
    for s in ("infom", "infoc"):
        assert equal[f"ica_vs_ae_{s}_aggregated"]["estimate"] == pytest.approx(-0.1)
        assert rule[f"ica_vs_ae_{s}_aggregated"]["estimate"] == pytest.approx(0.1)
        assert "over K latents" in equal[f"ica_vs_ae_{s}_shapes3d"]["ours_label"]
    assert equal["ica_vs_beta_vae_infom_aggregated"]["estimate"] == pytest.approx(
        rule["ica_vs_beta_vae_infom_aggregated"]["estimate"] - 0.2)
    # InfoE has no latent set: both ways give the same verdicts
    assert equal["ica_vs_ae_infoe_aggregated"]["estimate"] == rule["ica_vs_ae_infoe_aggregated"]["estimate"]
    with pytest.raises(ValueError, match="latents"):
        ch05.claims(scores, datasets=list(paper.TABLE2_DATASETS), latents="all")


def test_score_codes_scores_every_code_on_its_k_most_informative_latents():
    rng = np.random.default_rng(0)
    F = rng.integers(0, 4, size=(600, 2))
    Z = np.c_[F + 0.1 * rng.standard_normal(F.shape), 0.01 * rng.standard_normal((600, 2))]  # 2 near-dead latents
    sc = ch05.score_codes(F, Z, secondary=False, converged=False)
    assert sc["n_active"] == 2 and sc["infom_k"] == sc["infom"] > 0.95 and sc["infoc_k"] == sc["infoc"]
    # standardised, the dead latents count as active under the rule (and dilute InfoC), but are
    # not among the K = 2 latents scored on equal terms, which score as the clean code's
    W = (Z - Z.mean(0)) / Z.std(0)
    sw = ch05.score_codes(F, W, secondary=False, converged=False)
    assert sw["n_active"] == 4 and sw["infoc"] < sw["infoc_k"] == sc["infoc_k"]


def test_paper_comparison_records():
    summary = ch05.summarise(_fake_scores(dict.fromkeys(paper.TABLE2_DATASETS, 0.1)))
    recs = ch05.paper_comparison(summary, list(paper.TABLE2_DATASETS))
    assert len(recs) == 5 * 5 * 3  # models x (4 datasets + aggregated) x (InfoM, InfoE, InfoC)
    r = next(r for r in recs if r["row"] == "AE + ICA" and r["column"] == "Shapes3D InfoM")
    assert r["paper"] == 0.79 and r["ours"] == pytest.approx(0.51) and r["table"] == "Table 2"
    assert next(r for r in recs if r["row"] == "β-VAE")["quoted"]
    assert not r["quoted"]


def test_trend_summary_and_change():
    rows = []
    for ds in paper.TABLE2_DATASETS:
        for seed in (0, 1, 2):
            for epochs, gain in ((2, 0.0), (4, 0.05), (8, 0.1)):
                rows.append({"dataset": ds, "seed": seed, "epochs": epochs, "steps": 10 * epochs,
                             "model": "ae", "infom": 0.4, "infoe": 0.5, "infoc": 0.2})
                rows.append({"dataset": ds, "seed": seed, "epochs": epochs, "steps": 10 * epochs,
                             "model": "ae_ica", "infom": 0.4 + gain + 0.01 * seed, "infoe": 0.5 - gain - 0.002 * seed,
                             "infoc": 0.3})
    trend = pd.DataFrame(rows)
    t = ch05.trend_summary(trend, list(paper.TABLE2_DATASETS)).set_index(["score", "epochs"])
    assert t.loc[("infom", 8), "difference"] == pytest.approx(0.11)
    assert t.loc[("infom", 8), "verdict"] == "holds" and t.loc[("infoe", 8), "verdict"] == "fails"
    assert t.loc[("infom", 4), "steps"] == 40 and t.loc[("infom", 2), "ae_ica"] == pytest.approx(0.41)
    grow = ch05.trend_change(trend, list(paper.TABLE2_DATASETS), "infom")
    assert grow.estimate == pytest.approx(0.1) and grow.n == 3


def test_summarise_and_payload():
    rows = [{"dataset": d, "model": m, "seed": s, **{k: v for k in ch05.SCORES}}
            for d, v0 in (("shapes3d", 0.2), ("mpi3d", 0.4)) for m in ("ae", "ae_ica")
            for s, v in ((0, v0), (1, v0 + 0.2))]
    summary = ch05.summarise(pd.DataFrame(rows))
    payload = ch05.table2_payload(summary, datasets=["shapes3d", "mpi3d", "aggregated"])
    assert payload["shapes3d"]["ae"]["infom"] == pytest.approx(0.3)
    assert payload["aggregated"]["ae_ica"]["infom"] == pytest.approx(0.4)
    std = ch05.table2_payload(summary, stat="std", datasets=["mpi3d"])
    assert std["mpi3d"]["ae"]["infom"] == pytest.approx(np.std([0.4, 0.6], ddof=1))
    with pytest.raises(ValueError, match="lack columns"):
        ch05.summarise(pd.DataFrame(rows).drop(columns="mig"))


def test_images_become_one_float_tensor_chunk_by_chunk_with_the_same_bits():
    images = np.random.default_rng(0).integers(0, 256, (50, 8, 8, 3), dtype=np.uint8)
    at_once = torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0).contiguous()
    chunked = ch05.images_to_tensor(images, chunk=7)
    assert chunked.is_contiguous() and torch.equal(chunked, at_once)
    with pytest.raises(ValueError, match="expected uint8 images"):
        ch05.images_to_tensor(images.astype(np.float32))


def test_evaluation_plan_prices_the_exercises_at_the_chapters_shape():
    """Full: the rotation exercise scores 3 code sets of 10,000 held-out rows x 2K latents, the
    latent-size exercise trains 2 smoke-sized AEs (48 steps each), the figure renders 8
    images per factor."""
    from nearid import planning
    from nearid.data.procedural import FACTOR_GRIDS

    full = resolve("05", "full")
    kinds = planning.group(ch05.evaluation_plan(full))
    (rotation,) = kinds["ch05 rotation exercise scoring"]
    assert rotation.steps == len(ch05.ROTATION_CODE_SETS) == 3 and planning.takes_max_steps(rotation)
    assert (rotation.kwargs["n_train"], rotation.kwargs["n_eval"]) == (full.n_train, full.n_eval)
    exercise = kinds["ch05 exercise autoencoder"]
    assert [t.kwargs["setup"].latent_multiplier for t in exercise] == [1, 2]
    assert all(t.steps == 3 * 16 and planning.takes_max_steps(t) for t in exercise)
    (figure,) = kinds["ch05 traversals"]
    assert figure.kwargs["image_size"] == full.traversal_size and figure.steps is None
    dry = planning.group(ch05.evaluation_plan(resolve("05", "full", {"dry_run": True})))
    assert dry["ch05 rotation exercise scoring"][0].kwargs["n_eval"] == ch05.DRY_RUN_EVAL

    small = {**rotation.kwargs, "n_train": 100, "n_eval": 60}
    assert ch05.rotation_scoring(**small, max_steps=1) == 1, "a plan times a few, then scales up"
    assert ch05.render_traversals(datasets=["shapes3d"], image_size=16, steps=2) == len(FACTOR_GRIDS["shapes3d"])
