from nearid.book.runner import run_chapter

DATASETS = {"shapes3d", "mpi3d", "falcor3d", "isaac3d"}
MODELS = {"ae", "beta_vae", "beta_tcvae", "bioae", "ae_ica"}
EXTRA = {"ae_ica_all"}  # ICA on all 2K whitened latents, scored beside the main row
SCORES = {"infom", "infoe", "infoc", "dci_d", "mig"}


def test_chapter_05_smoke(tmp_path):
    res = run_chapter("05", profile="smoke", out_dir=tmp_path)
    assert res["profile"] == "smoke"
    assert res["seeds"] == [0, 1]
    assert set(res["table2"]) == DATASETS
    for ds, models in res["table2"].items():
        assert set(models) == MODELS | EXTRA, ds
        for m, scores in models.items():
            assert set(scores) == SCORES, (ds, m)
            for name in ("infom", "infoc", "dci_d", "mig"):
                assert 0.0 <= scores[name] <= 1.0, (ds, m, name, scores[name])
            assert -0.5 <= scores["infoe"] <= 1.0  # in-sample, can dip below 0 only by noise
    assert set(res["aggregated"]) == MODELS | EXTRA
    assert res["ica_components"] == "k"
    assert 0 <= res["ae_ica_beats_ae_infom"] <= res["n_datasets"] == 4
    assert set(res["paper_table2"]) == MODELS
