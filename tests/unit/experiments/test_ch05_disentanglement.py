import numpy as np
import pandas as pd
import pytest

from nearid.experiments import ch05_disentanglement


@pytest.fixture(scope="module")
def tiny():
    return ch05_disentanglement.run_benchmark(datasets=["shapes3d"], seeds=[0], image_size=16, n_train=130,
                                              n_eval=80, epochs=1, width=4, hidden=16, supersample=1, log=None)


def test_benchmark_rows_and_ica_variants(tiny):
    models = set(tiny.scores.model)
    assert models == {*ch05_disentanglement.MODELS, "ae_ica_all"}
    assert set(tiny.scores.columns) >= {"dataset", "model", "seed", *ch05_disentanglement.SCORES}
    nmi = tiny.nmi[("shapes3d", "ae_ica", 0)]
    assert nmi.shape == (6, 6)  # K factors x K components after whitening onto K
    # "all" whitens onto all 2K = 12 directions (130 training rows allow up to 13)
    assert tiny.nmi[("shapes3d", "ae_ica_all", 0)].shape == (6, 12)


def test_all_components_variant_has_no_extra_row():
    res = ch05_disentanglement.run_benchmark(datasets=["shapes3d"], seeds=[0], models=["ae", "ae_ica"],
                                             image_size=16, n_train=130, n_eval=64, epochs=1, width=4,
                                             hidden=16, supersample=1, ica_components="all", log=None)
    assert set(res.scores.model) == {"ae", "ae_ica"}
    assert res.nmi[("shapes3d", "ae_ica", 0)].shape == (6, 12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="ica_components"):
        ch05_disentanglement.run_benchmark(datasets=["shapes3d"], ica_components="half", log=None)
    with pytest.raises(ValueError, match="unknown datasets"):
        ch05_disentanglement.run_benchmark(datasets=["dsprites"], log=None)
    with pytest.raises(ValueError, match="unknown models"):
        ch05_disentanglement.run_benchmark(datasets=["shapes3d"], models=["vae"], log=None)


def test_summarise_and_payload():
    rows = [{"dataset": d, "model": m, "seed": s, **{k: v for k in ch05_disentanglement.SCORES}}
            for d, v0 in (("shapes3d", 0.2), ("mpi3d", 0.4)) for m in ("ae", "ae_ica")
            for s, v in ((0, v0), (1, v0 + 0.2))]
    summary = ch05_disentanglement.summarise(pd.DataFrame(rows))
    payload = ch05_disentanglement.table2_payload(summary, datasets=["shapes3d", "mpi3d", "aggregated"])
    assert payload["shapes3d"]["ae"]["infom"] == pytest.approx(0.3)
    assert payload["aggregated"]["ae_ica"]["infom"] == pytest.approx(0.4)
    std = ch05_disentanglement.table2_payload(summary, stat="std", datasets=["mpi3d"])
    assert std["mpi3d"]["ae"]["infom"] == pytest.approx(np.std([0.4, 0.6], ddof=1))
    with pytest.raises(ValueError, match="lack columns"):
        ch05_disentanglement.summarise(pd.DataFrame(rows).drop(columns="mig"))
