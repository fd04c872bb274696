"""Model pairs for Table 1 on tiny inputs: shapes, pairing, determinism, tasks, verdicts,
sensitivity and the fit-rows trend on planted pairs."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from nearid import ica
from nearid.align import ICA_MAX_ITER, ICA_MAX_ROWS
from nearid.book.params import InvalidParameterError
from nearid.book.profiles import resolve
from nearid.experiments import ch04_alignment
from nearid.paper import TABLE1, TABLE1_EFFICIENCY_RANGE, TABLE1_LABELS
from nearid.tasks import run_tasks
from nearid.verdicts import VERDICTS

torch.set_num_threads(1)
TEXT = ("Now is the winter of our discontent made glorious summer by this sun of York.\n" * 60)
ALL = ch04_alignment.Protocol(ica_components="all")  # every whitened component: the planted sources


@pytest.fixture(scope="module")
def images():
    g = torch.Generator().manual_seed(0)
    Xtr = torch.rand(48, 1, 28, 28, generator=g).numpy()
    ytr = np.arange(48) % 10
    Xev = torch.rand(12, 1, 28, 28, generator=g).numpy()
    return Xtr, ytr, Xev, np.arange(12) % 10


def _language_tests():
    """tests/unit/models/test_language.py as a module (its word-level tokenizer helper), found
    by path, so that this file also runs on its own."""
    path = Path(__file__).resolve().parents[1] / "models" / "test_language.py"
    spec = importlib.util.spec_from_file_location("_ch04_language_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pair_rows_must_match():
    with pytest.raises(ValueError, match="different inputs"):
        ch04_alignment.Pair("x", np.zeros((3, 2)), np.zeros((4, 2)))


def test_mae_pair(images):
    training = ch04_alignment.Training(epochs=1, batch_size=16)
    p = ch04_alignment.mae_pair(ch04_alignment.Digits(*images), embed_dim=8, depth=1, num_heads=2, training=training)
    assert p.A.shape == p.B.shape == (12, 8)
    assert set(p.info) == {"timm", "original"} and p.info["original"]["seed"] == 1
    q = ch04_alignment.mae_pair(ch04_alignment.Digits(*images), embed_dim=8, depth=1, num_heads=2, training=training)
    np.testing.assert_array_equal(p.A, q.A)  # deterministic for a seed
    assert not np.allclose(p.A, p.B)


def test_classifier_pairs(images):
    digits, training = ch04_alignment.Digits(*images), ch04_alignment.Training(epochs=1, batch_size=16)
    p = ch04_alignment.cnn_width_pair(digits, feature_dim=8, training=training)
    assert p.A.shape == p.B.shape == (12, 8)
    assert p.info["base"]["parameters"] > p.info["small"]["parameters"]
    wide = ch04_alignment.cnn_width_pair(digits, feature_dim=8, base_feature_dim=16, training=training, max_steps=2)
    assert wide.A.shape == (12, 8) and wide.B.shape == (12, 16)
    assert wide.info["base"]["feature_dim"] == 16 and wide.info["small"]["steps"] == 2
    assert 0 <= p.info["small"]["test_accuracy"] <= 1
    r = ch04_alignment.resnet18_pair(digits, training=training)
    assert r.A.shape == r.B.shape == (12, 512)
    assert set(r.info) == {"seed0", "seed1"}


def test_gpt_neox_pair_trained_and_pretrained(tmp_path):
    kw = dict(shape=ch04_alignment.LMShape(hidden=16, layers=2, heads=2, context=8), train_windows=16,
              training=ch04_alignment.Training(epochs=1, batch_size=32), eval_windows=20)
    p = ch04_alignment.gpt_neox_pair(TEXT, **kw)
    assert p.A.shape == p.B.shape == (20, 16) and p.info["source"] == "trained"
    assert not np.allclose(p.A, p.B)  # different seeds

    from transformers import GPTNeoXForCausalLM

    from nearid.models.language import tiny_gpt_neox_config

    folders = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        cfg = tiny_gpt_neox_config(vocab_size=6, hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, max_position_embeddings=64)
        GPTNeoXForCausalLM(cfg).save_pretrained(tmp_path / f"s{seed}")
        _language_tests()._word_tokenizer().save_pretrained(tmp_path / f"s{seed}")
        folders.append(str(tmp_path / f"s{seed}"))
    q = ch04_alignment.gpt_neox_pair("to be or not to be " * 40, shape=ch04_alignment.LMShape(context=8),
                                     eval_windows=2, pretrained=folders)
    assert q.A.shape == (2, 16) and q.info["source"] == "pretrained"
    with pytest.raises(ValueError, match="exactly two"):
        ch04_alignment.gpt_neox_pair(TEXT, pretrained=folders[:1])


# --------------------------------------------------------------------------- planted pairs
def _planted(n=2000, d=8, noise=0.02, seed=0):
    """Independent Laplace sources seen through two different invertible linear maps: the
    linear family is near-perfect, ICA recovers the sources on both sides, a rigid map cannot
    undo the non-orthogonal difference, and axis matching is worst."""
    rng = np.random.default_rng(seed)
    S = rng.laplace(size=(n, d))
    M1 = rng.normal(size=(d, d))
    M2 = rng.normal(size=(d, d))
    return S @ M1, S @ M2 + noise * rng.normal(size=(n, d))


@pytest.fixture(scope="module")
def planted():
    A, B = _planted()
    rng = np.random.default_rng(1)
    same = rng.laplace(size=(600, 4))
    pairs = {"mae_timm_vs_ours": ch04_alignment.Pair("mae_timm_vs_ours", A, B),
             "sentence_encoders": ch04_alignment.Pair("sentence_encoders", same, same.copy())}
    return pairs, ch04_alignment.measure(pairs, ALL)


def test_measure_and_table1(planted):
    pairs, measured = planted
    t = ch04_alignment.table1(measured)
    assert list(t.index) == ["mae_timm_vs_ours", "sentence_encoders"]
    assert t.loc["mae_timm_vs_ours", "n_fit"] == 1000 and t.loc["mae_timm_vs_ours", "dim_a"] == 8
    assert {"components_a", "components_b", "variance_a", "variance_b"} <= set(t.columns)
    assert t.loc["mae_timm_vs_ours", "linear"] < 0.01 < t.loc["mae_timm_vs_ours", "rigid"]
    assert t.loc["mae_timm_vs_ours", "ica"] < t.loc["mae_timm_vs_ours", "rigid"] < t.loc["mae_timm_vs_ours", "permutation"]
    long = ch04_alignment.beside_paper(t)
    assert set(long.source) == {"ours", "paper"} and len(long) == 4 * 2 + 4
    assert long[(long.source == "paper") & (long.family == "ica")].error.item() == TABLE1["mae"]["ica"]


def test_order_links_decide_each_link_with_an_interval(planted):
    _, measured = planted
    links = ch04_alignment.order_links(measured, seed=0)
    assert len(links) == 6 and set(links.verdict) <= set(VERDICTS)
    mae = links[links.pair == "mae_timm_vs_ours"].set_index("link")
    assert mae.loc["perm > ICA", "verdict"] == "holds"
    assert mae.loc["ICA > rigid", "verdict"] == "fails"  # ICA undoes the non-orthogonal map, rigid cannot
    assert mae.loc["rigid > linear", "verdict"] == "holds"
    assert (mae.low <= mae.estimate).all() and (mae.estimate <= mae.high).all()
    assert mae.loc["perm > ICA", "paper"] == pytest.approx(TABLE1["mae"]["permutation"] - TABLE1["mae"]["ica"])
    assert (mae.n == 1000).all()
    same = links[links.pair == "sentence_encoders"]
    assert math.isnan(same.paper.iloc[0])
    assert (same[["estimate", "low", "high"]].abs() < 1e-9).all().all()  # identical embeddings
    assert ch04_alignment.ordering_verdict(mae.verdict) == "fails"
    assert ch04_alignment.ordering_verdict(["holds"] * 3) == "holds"
    assert ch04_alignment.ordering_verdict(["holds", "inconclusive", "holds"]) == "inconclusive"
    assert ch04_alignment.ordering_verdict([]) == "inconclusive"


def test_order_claims_follow_the_contract(planted):
    _, measured = planted
    claims = ch04_alignment.order_claims(ch04_alignment.order_links(measured, seed=0))
    assert set(claims) == {f"order_mae_timm_vs_ours_{link}" for link in ("permutation_ica", "ica_rigid", "rigid_linear")}
    for rec in claims.values():
        assert {"claim", "estimate", "low", "high", "verdict", "n", "method", "threshold", "paper",
                "section", "ours_label"} <= set(rec)
        assert rec["section"] == "ch04-verdict" and rec["method"] == "bootstrap"
        assert TABLE1_LABELS["mae"] in rec["claim"] and isinstance(rec["paper"], float)
    json.dumps(claims)


@pytest.fixture(scope="module")
def planted_replicates():
    """Three independent draws of the planted pair: three "trainings" of one pair."""
    reps = {"mae_timm_vs_ours": [ch04_alignment.Pair("mae_timm_vs_ours", *_planted(n=800, seed=s)) for s in range(3)]}
    return reps, ch04_alignment.measure_replicates(reps, ALL)


def test_replicates_are_the_unit_of_the_links_and_of_table1(planted_replicates):
    reps, by_rep = planted_replicates
    assert [len(v) for v in by_rep.values()] == [3]
    links = ch04_alignment.order_links(by_rep, seed=0).set_index("link")
    assert (links.n == 3).all() and (links.method == "t").all() and (links.unit == "replicates").all()
    per_rep = [np.mean(r.row_errors["permutation"] - r.row_errors["ica"]) for r in by_rep["mae_timm_vs_ours"]]
    assert links.loc["perm > ICA", "estimate"] == pytest.approx(np.mean(per_rep))
    assert links.loc["perm > ICA", "verdict"] == "holds" and links.loc["rigid > linear", "verdict"] == "holds"
    t = ch04_alignment.table1_replicates(by_rep)
    errs = [r.errors["rigid"] for r in by_rep["mae_timm_vs_ours"]]
    assert t.loc["mae_timm_vs_ours", "rigid"] == pytest.approx(np.mean(errs))
    assert t.loc["mae_timm_vs_ours", "rigid_sd"] == pytest.approx(np.std(errs, ddof=1))
    assert t.loc["mae_timm_vs_ours", "replicates"] == 3
    # the first replicate's result is reused, not computed again
    first = ch04_alignment.measure({k: v[0] for k, v in reps.items()}, ALL)
    again = ch04_alignment.measure_replicates(reps, ALL, first=first)
    assert again["mae_timm_vs_ours"][0] is first["mae_timm_vs_ours"]


def test_efficiency_is_tested_per_row_against_its_printed_value_with_fiellers_interval(planted_replicates):
    """The share of the gap ICA closes is mean(perm - ica) / mean(perm - rigid) over
    replicates with Fieller's interval, minus the row's own printed efficiency, decided as
    equivalence within half the paper's range."""
    from nearid.verdicts import fieller_interval

    _, by_rep = planted_replicates
    out = ch04_alignment.efficiency_claims(by_rep)
    rec = out["efficiency_mae_timm_vs_ours"]
    lo, hi = TABLE1_EFFICIENCY_RANGE
    assert rec["test"] == "equivalence" and rec["margin"] == pytest.approx((hi - lo) / 2)
    assert rec["method"] == "fieller" and rec["paper"] == 0.0
    reps = by_rep["mae_timm_vs_ours"]
    perm, ica, rigid = (np.array([r.errors[f] for r in reps]) for f in ("permutation", "ica", "rigid"))
    share, low, high = fieller_interval(perm - ica, perm - rigid)
    printed = ch04_alignment.paper_efficiency("mae_timm_vs_ours")
    assert rec["printed"] == pytest.approx(0.59) and rec["efficiency"] == pytest.approx(share)
    assert (rec["estimate"], rec["low"], rec["high"]) == pytest.approx((share - printed, low - printed, high - printed))
    # ICA undoes the planted map almost entirely here: the share is near 1, wholly above 59% + 17%
    assert rec["low"] > rec["margin"] and rec["verdict"] == "fails"
    assert len(rec["efficiencies"]) == len(reps)
    one = {"mae_timm_vs_ours": by_rep["mae_timm_vs_ours"][:1]}
    assert ch04_alignment.efficiency_claims(one) == {}  # one training: no interval over retraining


def test_paper_comparison_and_verdict_text(planted):
    _, measured = planted
    rows = ch04_alignment.paper_comparison(ch04_alignment.table1(measured))
    assert len(rows) == 5  # four families and the efficiency of the one paper-like pair
    assert {r["column"] for r in rows} == {"permutation", "ica", "rigid", "linear", "ICA efficiency"}
    assert all(r["table"] == "Table 1" and r["row"] == TABLE1_LABELS["mae"] for r in rows)
    eff = next(r for r in rows if r["column"] == "ICA efficiency")
    assert eff["paper"] == pytest.approx(0.59)
    assert ch04_alignment.verdict_text("holds", 0.0213, 0.0151, 0.0274) == "holds: +0.021 [+0.015, +0.027]"
    for row in TABLE1.values():
        assert ch04_alignment.ordering_holds(row)  # the paper's printed rows all satisfy it
    assert not ch04_alignment.ordering_holds({"permutation": 0.1, "ica": 0.2, "rigid": 0.05, "linear": 0.0})
    assert ch04_alignment.ordering_holds(pd.Series({"permutation": 0.3, "ica": 0.2, "rigid": 0.2, "linear": 0.1}))


def test_component_sensitivity(planted):
    pairs, measured = planted
    sens = ch04_alignment.component_sensitivity(pairs, measured, [2, 4, 64], ALL)
    assert len(sens) == 2 * 4 and sens.rule.sum() == 2
    mae = sens[sens.pair == "mae_timm_vs_ours"].set_index("setting")
    assert list(mae.index) == ["2", "4", "64", "rule"]
    assert mae.loc["2", "components_a"] == 2 and mae.loc["64", "components_a"] == 8  # capped at the rank
    assert mae.loc["rule", "ica"] == measured["mae_timm_vs_ours"].errors["ica"]
    assert mae.loc["2", "variance_a"] < mae.loc["64", "variance_a"] == pytest.approx(1.0)
    # all 8 sources: ICA recovers them and closes most of the gap; 2 of 8 cannot
    assert mae.loc["64", "ica_efficiency"] > 0.8 > mae.loc["2", "ica_efficiency"]


def test_fit_rows_trend(planted):
    pairs, _ = planted
    table, rows = ch04_alignment.fit_rows_trend(pairs["mae_timm_vs_ours"], [0.05, 0.2, 1.0], ALL, n_boot=200)
    assert list(table.fit_rows) == [50, 200, 1000]
    assert list(table.components_a) == [5, 8, 8]  # one component per ten rows, then the rank
    assert (table.low <= table.ica_efficiency).all() and (table.ica_efficiency <= table.high).all()
    assert set(rows) == {0.05, 0.2, 1.0} and all(len(r["ica"]) == 1000 for r in rows.values())
    v = ch04_alignment.trend_difference(rows, seed=0, n_boot=200)
    assert v.verdict == "holds" and v.estimate > 0  # more rows: more components, better ICA
    assert v.estimate == pytest.approx(table.ica_efficiency.iloc[-1] - table.ica_efficiency.iloc[0])


def test_table_and_trend_agree_at_the_full_fraction_to_the_last_digit(planted):
    """One code path per number: the trend's full fraction is Table 1's measurement, with
    the chapter's protocol (the declared FastICA subsample and iteration cap)."""
    pairs, _ = planted
    protocol = ch04_alignment.Protocol(fit_fraction=0.5, seed=0, ica_components=0.95, ica_max_rows=ICA_MAX_ROWS,
                                       ica_max_iter=ICA_MAX_ITER)
    for name, pair in pairs.items():
        table = ch04_alignment.table1(ch04_alignment.measure({name: pair}, protocol))
        trend, rows = ch04_alignment.fit_rows_trend(pair, [0.5, 1.0], protocol, n_boot=50)
        full = trend.set_index("fraction").loc[1.0]
        for family in ("permutation", "rigid", "ica"):
            assert full[family] == table.loc[name, family], (name, family)  # exactly, not approx
        assert full.ica_efficiency == table.loc[name, "ica_efficiency"] or (
            math.isnan(full.ica_efficiency) and math.isnan(table.loc[name, "ica_efficiency"]))
        assert full.fit_rows == table.loc[name, "n_fit"]
        # the sensitivity grid at the rule's own setting is the same measurement again
        again = ch04_alignment.compare_pair(pair, protocol)
        assert np.array_equal(again.row_errors["ica"], rows[1.0]["ica"])
        # so the chapter hands the table's result to the trend instead of fitting it twice
        reused, reused_rows = ch04_alignment.fit_rows_trend(pair, [0.5, 1.0], protocol, n_boot=50, full=again)
        assert reused.equals(trend)
        for frac in (0.5, 1.0):
            for family in ch04_alignment.TREND_FAMILIES:
                assert np.array_equal(reused_rows[frac][family], rows[frac][family])


def test_fit_rows_subset_keeps_the_evaluation_rows():
    from nearid.align import compare

    A, B = _planted(n=400, d=4)
    full, part = compare(A, B, seed=3), compare(A, B, seed=3, fit_rows=50)
    assert part.n_fit == 50 and part.n_eval == full.n_eval == 200
    assert compare(A, B, seed=3, fit_rows=200).errors == full.errors
    with pytest.raises(ValueError, match="fit_rows must lie in"):
        compare(A, B, fit_rows=201)
    with pytest.raises(ValueError, match="fit_rows must lie in"):
        compare(A, B, fit_rows=2)
    few = compare(A, B, seed=3, fit_rows=4)  # fewer fit rows than the width + 2: still every family
    assert few.n_fit == 4 and all(np.isfinite(v) for v in few.errors.values())


# --------------------------------------------------------------------------- tasks and parameters
def test_plan_has_one_task_per_pair_and_replicate_with_steps_and_dry_run():
    P = resolve("04", "quick")
    tasks = ch04_alignment.plan(P)
    # every pair that trains: P.replicates independent replicates; the packaged encoders: one
    assert [t.kwargs["pair"] for t in tasks] == [p for p in P.pairs for _ in range(1 if p == "sentence_encoders"
                                                                                     else P.replicates)]
    seeds = [t.kwargs["seed"] for t in tasks if t.kwargs["pair"] == "resnet18_seeds"]
    assert P.replicates == 5 and seeds == [0, 2, 4, 6, 8]  # models seeded 0-1, 2-3, ...: no seed shared
    assert all(t.kind == f"ch04:{t.kwargs['pair']}" and t.label for t in tasks)
    json.dumps([t.kwargs for t in tasks])  # plain values: they are the cache key
    by = {t.kwargs["pair"]: t for t in tasks}
    # steps count what max_steps caps: each model's (both models of a pair train as long)
    assert by["resnet18_seeds"].steps == 3 * math.ceil(3000 / 128)
    assert by["gpt_neox_seeds"].steps == 2 * math.ceil(4000 / 32)
    assert by["sentence_encoders"].steps == 0 and not by["sentence_encoders"].gpu and by["mae_timm_vs_ours"].gpu
    assert all(t.kwargs["max_steps"] is None for t in tasks)
    dry = {t.kwargs["pair"]: t for t in ch04_alignment.plan(resolve("04", "full", {"dry_run": True}))}
    assert all(t.kwargs["max_steps"] == 2 for t in dry.values())
    assert dry["mae_timm_vs_ours"].steps == 2 and dry["resnet18_seeds"].kwargs["n_eval"] == ch04_alignment.DRY_RUN_EVAL
    assert dry["gpt_neox_seeds"].kwargs["eval_windows"] == ch04_alignment.DRY_RUN_EVAL
    assert dry["resnet18_seeds"].kwargs["stem_stride"] == 1  # the full shapes, only fewer steps and rows
    with pytest.raises(ValueError, match="unknown pair 'gpt4'; valid: gpt_neox_seeds, mae_timm_vs_ours"):
        ch04_alignment.plan({"pairs": ["gpt4"], "seed": 0})


def test_embed_pair_task_runs_and_is_deterministic(mnist_root):
    P = resolve("04", "smoke", {"pairs": ["cnn_widths"], "mnist_train": 64, "resnet_train": 64, "mnist_eval": 40,
                                "clf_base_feature_dim": 24, "replicates": 1})
    tasks = ch04_alignment.plan(P)
    first = run_tasks(tasks, executor="inprocess", log=None)
    again = run_tasks(tasks, executor="inprocess", log=None)
    np.testing.assert_array_equal(first[0]["A"], again[0]["A"])
    pairs = ch04_alignment.collect_pairs(tasks, first)
    assert pairs["cnn_widths"].A.shape == (40, 16) and pairs["cnn_widths"].B.shape == (40, 24)
    assert "cnn_widths: A 16-d, B 24-d, 40 rows" in ch04_alignment.describe(pairs["cnn_widths"])
    with pytest.raises(ValueError, match="unknown pair"):
        ch04_alignment.embed_pair(pair="gpt4")


def test_pythia_task_without_checkpoints_trains_and_says_so(mnist_root):
    out = ch04_alignment.embed_pair(pair="gpt_neox_seeds", hidden=8, layers=1, context=8, train_windows=8,
                                    epochs=1, lr=1e-3, eval_windows=20, pretrained=["no/such/dir", "nor/this"],
                                    max_steps=1)
    assert out["A"].shape == (20, 8) and out["info"]["source"] == "trained"
    assert "not found" in out["info"]["note"] and out["info"]["seed0"]["steps"] == 1
    line = ch04_alignment.describe(ch04_alignment.Pair("gpt_neox_seeds", out["A"], out["B"], out["info"]))
    assert line.endswith("NOTE: checkpoints not found at ['no/such/dir', 'nor/this']: trained tiny GPT-NeoX "
                         "models instead"), "the page's model list says what stood in"


def test_profile_parameters():
    assert resolve("04", "quick").ica_components == ica.DEFAULT_COMPONENTS  # the library's rule
    for value, expected in ((0.5, 0.5), (16, 16), ("all", "all"), (1.0, 1.0)):
        got = resolve("04", "smoke", {"ica_components": value}).ica_components
        assert got == expected and type(got) is type(expected)
    for bad in (0, 1.5, "some", True, -3, [4]):
        with pytest.raises(InvalidParameterError, match="ica_components"):
            resolve("04", "smoke", {"ica_components": bad})
    with pytest.raises(InvalidParameterError, match="held-out Shakespeare"):
        resolve("04", "quick", {"lm_eval_windows": 9000, "lm_context": 64})
    with pytest.raises(InvalidParameterError, match="trend_fractions"):
        resolve("04", "quick", {"trend_fractions": [0.0, 1.0]})
    assert resolve("04", "quick", {"executor": "dask"}).executor == "dask"


def test_the_chapters_readings_follow_the_numbers():
    from nearid.experiments.ch04_alignment import linear_rigid_reading, permutation_reading, trend_reading

    assert "overfits" in linear_rigid_reading(1.3, 1.0) and "hypothesis" in linear_rigid_reading(1.3, 1.0)
    assert "near 1" in linear_rigid_reading(1.0, 1.0)
    assert linear_rigid_reading(0.5, 0.5).endswith("neither are the paper's.")
    assert linear_rigid_reading(0.5, 1.0).endswith("each other.")
    assert permutation_reading(0.1, 0.2).startswith("lower") and "not tested here" in permutation_reading(0.1, 0.2)
    assert permutation_reading(0.2, 0.2).startswith("at least as high")
    assert trend_reading(["holds", "holds", "fails"]).startswith("upward")
    assert trend_reading(["fails", "fails", "inconclusive"]).startswith("downward")
    assert trend_reading(["holds", "fails", "inconclusive", "inconclusive"]).startswith("nowhere")
    assert trend_reading([]).startswith("nowhere")


def test_links_that_involve_ica_carry_whether_its_fits_converged():
    links = pd.DataFrame([dict(pair="cnn_widths", link=link, higher=h, lower=lo, estimate=0.1, low=0.05, high=0.2,
                               verdict="holds", n=100, method="bootstrap", paper=0.05)
                          for link, h, lo in (("perm > ICA", "permutation", "ica"), ("ICA > rigid", "ica", "rigid"),
                                              ("rigid > linear", "rigid", "linear"))])
    out = ch04_alignment.order_claims(links, converged={"cnn_widths": (True, False)})
    assert out["order_cnn_widths_permutation_ica"]["ica_converged"] is False
    assert out["order_cnn_widths_ica_rigid"]["ica_converged"] is False
    assert "ica_converged" not in out["order_cnn_widths_rigid_linear"], "no ICA fit behind it"
    assert "ica_converged" not in ch04_alignment.order_claims(links)["order_cnn_widths_ica_rigid"]


def test_a_planned_run_embeds_a_share_of_the_held_out_inputs():
    """nearid plan prices a pair's embedding apart from its training (evaluate): a share
    embeds that share of the held-out inputs, never fewer than MIN_EVAL_ROWS; 1 embeds all."""
    kw = dict(pair="cnn_widths", seed=0, device="cpu", max_steps=1, n_train=64, n_eval=300, feature_dim=4,
              base_feature_dim=4, epochs=1, lr=1e-3, batch_size=32)
    assert ch04_alignment.embed_pair(**kw)["A"].shape[0] == 300
    assert ch04_alignment.embed_pair(**kw, evaluate=0.1)["A"].shape[0] == 30
    assert ch04_alignment.embed_pair(**kw, evaluate=0.0)["A"].shape[0] == ch04_alignment.MIN_EVAL_ROWS
    with pytest.raises(ValueError, match="evaluate must be a share"):
        ch04_alignment.embed_pair(**kw, evaluate=2.0)


def test_the_language_pairs_middle_layer_is_its_layer_by_layer_entry_bit_for_bit():
    """gpt_neox_pair embeds once, every layer, and takes the middle layer from there: the
    same numbers embed_windows gives with a pass of its own."""
    from nearid.models import language as lm

    text = "to be or not to be, that is the question. " * 40
    m = lm.TinyLM(seed=0, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64)
    ev = lm.eval_windows(lm.ByteTokenizer().encode(text), 16, 70)
    layers = lm.embed_windows_by_layer(m, ev)
    np.testing.assert_array_equal(layers[f"layer {lm.middle_layer(m.model)}"], lm.embed_windows(m, ev))


def test_evaluation_plan_prices_every_compare_pair_at_each_pairs_shape(tmp_path):
    """Full: 21 pair replicates (4 trained pairs x 5, the packaged encoders once) + 5 pairs x 5
    grid settings + 4 paper pairs x 4 trend fractions = 62 compare_pair calls, one kind per
    embedding shape; the invariance exercise's 3 versions
    of A, each up to FastICA's 1,000 iterations; the language pair's layer maps."""
    import inspect

    from nearid import align, planning
    from nearid.models.classifiers import ResNet18Classifier

    full = resolve("04", "full", {"pythia_paths": []})
    kinds = planning.group(ch04_alignment.evaluation_plan(full))
    pairs = [t for k, ts in kinds.items() if k.startswith("ch04 compare_pair") for t in ts]
    assert len(pairs) == len(full.pairs) == len({planning.kind_of(t) for t in pairs})
    assert sum(t.steps for t in pairs) == 21 + 5 * len(full.ica_grid) + 4 * len(full.trend_fractions) == 62
    assert all(planning.takes_max_steps(t) for t in pairs)
    for name, t in zip(full.pairs, pairs):
        shape = t.kwargs["shape"]
        assert (shape.rows, shape.dim_a, shape.dim_b) == ch04_alignment.embedding_shape(full, name)
        assert t.kwargs["protocol"] == ch04_alignment.alignment_protocol(full), "priced as the chapter aligns"
    assert ch04_alignment.embedding_shape(full, "gpt_neox_seeds") == (full.lm_eval_windows, full.lm_hidden,
                                                                      full.lm_hidden)
    assert ch04_alignment.embedding_shape(full, "mae_timm_vs_ours") == (full.mnist_eval, full.mae_embed_dim,
                                                                        full.mae_embed_dim)
    assert ch04_alignment.embedding_shape(full, "resnet18_seeds") == (full.mnist_eval, 512, 512)
    assert ch04_alignment.RESNET18_FEATURES == ResNet18Classifier(in_chans=1).feature_dim
    assert ch04_alignment.embedding_shape(full, "cnn_widths") == (full.mnist_eval, full.clf_feature_dim,
                                                                  full.clf_base_feature_dim)
    assert ch04_alignment.embedding_shape(full, "sentence_encoders") == (full.sentences, 384, 384)
    exercise = kinds["ch04 invariance exercise"]
    assert [t.kwargs["variant"] for t in exercise] == list(ch04_alignment.EXERCISE_VARIANTS)
    iterations = inspect.signature(align.compare).parameters["ica_max_iter"].default
    assert exercise[0].steps * ch04_alignment.EXERCISE_ITERATIONS_PER_UNIT == iterations
    (layers,) = kinds["ch04 layer matrices"]
    assert (layers.kwargs["rows"], layers.kwargs["width"], layers.kwargs["states"]) == (
        full.lm_eval_windows, full.lm_hidden, full.lm_layers + 1)

    folders = [tmp_path / "seed0", tmp_path / "seed1"]  # real checkpoints: their width and depth
    for f in folders:
        f.mkdir()
        (f / "config.json").write_text(json.dumps({"hidden_size": 768, "num_hidden_layers": 12}))
    with_lm = planning.group(ch04_alignment.evaluation_plan(full | {"pythia_paths": [str(f) for f in folders]}))
    assert (with_lm["ch04 layer matrices"][0].kwargs["width"], with_lm["ch04 layer matrices"][0].kwargs["states"]) \
        == (768, 13)
    dry = ch04_alignment.evaluation_plan(resolve("04", "full", {"dry_run": True, "pairs": ["mae_timm_vs_ours"]}))
    assert [t.kwargs["shape"].rows for t in dry[:1]] + [t.kwargs["rows"] for t in dry[1:]] \
        == [ch04_alignment.DRY_RUN_EVAL] * 4, "no language pair: no layer maps"

    small = dict(shape=ch04_alignment.StandIn(rows=200, dim_a=8, dim_b=6, decay=2.0), replicates=2, grid=[2, 4],
                 fractions=[0.5, 1.0])
    assert ch04_alignment.pair_alignments(**small, max_steps=1) == 1, "a plan times a few calls, then scales up"
    assert ch04_alignment.pair_alignments(**small) == 6
    assert ch04_alignment.invariance_exercise(rows=200, dim_a=6, dim_b=6, decay=2.0, variant="invertible",
                                              max_steps=3) == 3
    assert ch04_alignment.layer_matrices(rows=100, width=4, states=2) == 2


def test_stand_in_embeddings_keep_as_many_components_as_the_docstring_says():
    """Trained pairs' stand-ins: the 0.95 rule keeps about a dozen components whatever the
    width; the packaged encoders' (flat): nearly every one, so the rows-per-component cap binds."""
    rng = np.random.default_rng(0)

    def kept(X):
        var = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
        return int(np.searchsorted(np.cumsum(var) / var.sum(), 0.95) + 1)

    assert all(8 <= kept(ch04_alignment._stand_in(rng, 4000, d, ch04_alignment.TRAINED_DECAY)) <= 16
               for d in (64, 256))
    assert kept(ch04_alignment._stand_in(rng, 4000, 128, ch04_alignment.PACKAGED_DECAY)) >= 110


# --------------------------------------------------------------------------- shared subspace
def _low_rank_pair(n=1200, d=16, k=4, seed=0):
    """k Laplace sources with unequal scales spread over d units on both sides by different
    maps, plus small isotropic noise: k directions hold nearly all the variance."""
    rng = np.random.default_rng(seed)
    S = rng.laplace(size=(n, k)) * np.linspace(3, 1, k)
    A = S @ rng.normal(size=(k, d)) + 0.01 * rng.normal(size=(n, d))
    B = S @ rng.normal(size=(k, d)) + 0.01 * rng.normal(size=(n, d))
    return ch04_alignment.Pair("mae_timm_vs_ours", A, B, {"source": "test"})


def test_shared_subspace_keeps_the_larger_sides_count_fitted_on_fit_rows_only():
    from nearid.align import split_rows

    pair = _low_rank_pair()
    sub, k = ch04_alignment.shared_subspace(pair, 0.95, seed=0)
    assert k == 4 and sub.A.shape == sub.B.shape == (1200, 4) and sub.info == {"source": "test", "subspace_k": 4}
    fit, evaluation = split_rows(1200, 0.5, 0)
    # centred and decorrelated on the fit rows, variance in decreasing order, nothing lost
    np.testing.assert_allclose(sub.A[fit].mean(0), 0, atol=1e-10)
    cov = np.cov(sub.A[fit].T)
    np.testing.assert_allclose(cov - np.diag(np.diag(cov)), 0, atol=1e-8)
    assert np.all(np.diff(np.diag(cov)) < 0)
    # the evaluation rows play no part: changing them changes only their own projection
    moved = ch04_alignment.Pair(pair.name, pair.A.copy(), pair.B.copy())
    moved.A[evaluation] *= 5
    again, _ = ch04_alignment.shared_subspace(moved, 0.95, seed=0)
    np.testing.assert_allclose(again.A[fit], sub.A[fit], atol=1e-10)
    # k is the larger side's count: a B that needs more directions sets it for both
    wide = ch04_alignment.Pair(pair.name, pair.A, pair.B + 3 * np.random.default_rng(1).normal(size=pair.B.shape))
    assert ch04_alignment.shared_subspace(wide, 0.95, seed=0)[1] > 4
    assert ch04_alignment.shared_subspace(pair, 2, seed=0)[1] == 2
    # fit_rows: the subspace of the first that many fit rows
    few, _ = ch04_alignment.shared_subspace(pair, 0.95, seed=0, fit_rows=100)
    np.testing.assert_allclose(few.A[fit[:100]].mean(0), 0, atol=1e-10)
    # duplicate and constant columns count once, as in the ICA family's whitening: the same k
    # and the same subspace as without them (a unit copied twice would weigh its variance twice)
    padded = ch04_alignment.Pair(pair.name, np.hstack([pair.A, pair.A[:, :3], np.ones((1200, 2))]), pair.B)
    same, k_padded = ch04_alignment.shared_subspace(padded, 0.95, seed=0)
    assert k_padded == k
    np.testing.assert_allclose(np.abs(same.A), np.abs(sub.A), atol=1e-8)  # principal axes up to sign
    from nearid.ica import Whitener

    assert Whitener(0.95).fit(padded.A[fit]).n_components_ == Whitener(0.95).fit(pair.A[fit]).n_components_


def test_compare_pair_on_the_shared_subspace_puts_every_family_on_it():
    pair = _low_rank_pair()
    res = ch04_alignment.compare_pair(pair, ch04_alignment.Protocol(ica_components=2, subspace=0.95))
    assert (res.dim_a, res.dim_b) == (4, 4) and res.ica_components == (4, 4)  # ICA whitens all k, not the rule's 2
    full = ch04_alignment.compare_pair(pair, ch04_alignment.Protocol(ica_components=2))
    assert (full.dim_a, full.dim_b) == (16, 16) and full.ica_components == (2, 2)
    # the sides differ by a non-orthogonal map of independent sources: in the subspace ICA
    # recovers them (as the linear map does) and beats the best rotation
    assert max(res.errors["ica"], res.errors["linear"]) < 0.02 < res.errors["rigid"] < res.errors["permutation"]
    # the sensitivity asks about the full space and refuses subspace results
    with pytest.raises(ValueError, match="full-space"):
        ch04_alignment.component_sensitivity({"mae_timm_vs_ours": pair}, {"mae_timm_vs_ours": res}, [2])
