import numpy as np
import pandas as pd
import pytest

from nearid import disentangle


@pytest.fixture(scope="module")
def tiny():
    return disentangle.run_benchmark(["shapes3d"], seeds=[0], image_size=16, n_train=96, n_eval=80,
                                     epochs=1, width=4, hidden=16, supersample=1, log=None)


def test_benchmark_rows_and_ica_variants(tiny):
    models = set(tiny.scores.model)
    assert models == {*disentangle.MODELS, "ae_ica_all"}
    assert set(tiny.scores.columns) >= {"dataset", "model", "seed", *disentangle.SCORES}
    nmi = tiny.nmi[("shapes3d", "ae_ica", 0)]
    assert nmi.shape == (6, 6)  # K factors x K components after whitening onto K
    assert tiny.nmi[("shapes3d", "ae_ica_all", 0)].shape == (6, 12)


def test_all_components_variant_has_no_extra_row():
    res = disentangle.run_benchmark(["shapes3d"], seeds=[0], models=["ae", "ae_ica"], image_size=16,
                                    n_train=64, n_eval=64, epochs=1, width=4, hidden=16,
                                    supersample=1, ica_components="all", log=None)
    assert set(res.scores.model) == {"ae", "ae_ica"}
    assert res.nmi[("shapes3d", "ae_ica", 0)].shape == (6, 12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="ica_components"):
        disentangle.run_benchmark(["shapes3d"], ica_components="half", log=None)
    with pytest.raises(ValueError, match="unknown datasets"):
        disentangle.run_benchmark(["dsprites"], log=None)
    with pytest.raises(ValueError, match="unknown models"):
        disentangle.run_benchmark(["shapes3d"], models=["vae"], log=None)


def test_summarise_and_payload():
    rows = [{"dataset": d, "model": m, "seed": s, **{k: v for k in disentangle.SCORES}}
            for d, v0 in (("shapes3d", 0.2), ("mpi3d", 0.4)) for m in ("ae", "ae_ica")
            for s, v in ((0, v0), (1, v0 + 0.2))]
    summary = disentangle.summarise(pd.DataFrame(rows))
    payload = disentangle.table2_payload(summary, datasets=["shapes3d", "mpi3d", "aggregated"])
    assert payload["shapes3d"]["ae"]["infom"] == pytest.approx(0.3)
    assert payload["aggregated"]["ae_ica"]["infom"] == pytest.approx(0.4)
    std = disentangle.table2_payload(summary, stat="std", datasets=["mpi3d"])
    assert std["mpi3d"]["ae"]["infom"] == pytest.approx(np.std([0.4, 0.6], ddof=1))
    with pytest.raises(ValueError, match="lack columns"):
        disentangle.summarise(pd.DataFrame(rows).drop(columns="mig"))
