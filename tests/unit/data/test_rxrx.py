"""RxRx3-core loader on tiny files written in the real schema."""

import numpy as np
import pandas as pd
import pytest

from nearid.data.rxrx import METADATA_COLUMNS, SchemaError, load_rxrx3_core


def write_tiny(tmp_path, dim=6, drop_meta=None, rename_feats=False):
    rows = []
    for exp in ("gene-001", "gene-002"):
        for k, (gene, treat) in enumerate([("PLK1", "PLK1_guide_1"), ("PLK1", "PLK1_guide_2"),
                                           ("HCK", "HCK_guide_1"), ("SRC", "SRC_guide_1"),
                                           ("EMPTY_control", "EMPTY_control")]):
            rows.append((f"{exp}_1_A0{k}", exp, 1, f"A0{k}", gene, treat, "", np.nan, "CRISPR", "HUVEC"))
    for k in range(3):  # CRISPR_control wells live in compound experiments
        rows.append((f"compound-001_2_B0{k}", "compound-001", 2, f"B0{k}", "", "CRISPR_control",
                     "", np.nan, "COMPOUND", "HUVEC"))
    rows.append(("compound-001_2_C01", "compound-001", 2, "C01", "", "Dequalinium", "CC", 0.25,
                 "COMPOUND", "HUVEC"))
    meta = pd.DataFrame(rows, columns=list(METADATA_COLUMNS))
    if drop_meta:
        meta = meta.drop(columns=[drop_meta])
    rng = np.random.default_rng(0)
    emb = pd.DataFrame(rng.normal(size=(len(meta), dim)),
                       columns=[(f"f{k}" if rename_feats else f"feature_{k}") for k in range(dim)])
    emb.insert(0, "well_id", meta["well_id"].to_numpy())
    meta_path, emb_path = tmp_path / "metadata_rxrx3_core.csv", tmp_path / "emb.parquet"
    meta.to_csv(meta_path, index=False)
    emb.to_parquet(emb_path)
    return emb_path, meta_path, emb


def test_loads_genes_and_controls(tmp_path):
    emb_path, meta_path, emb = write_tiny(tmp_path)
    X, wells = load_rxrx3_core(emb_path, meta_path, genes=("PLK1", "HCK"))
    assert X.shape == (2 * 3 + 3, 6)
    assert list(wells.columns) == ["well_id", "batch", "gene", "guide", "is_control"]
    assert wells.is_control.sum() == 3
    assert set(wells.guide[~wells.is_control]) == {"PLK1_guide_1", "PLK1_guide_2", "HCK_guide_1"}
    assert set(wells.batch) == {"gene-001", "gene-002", "compound-001"}
    row = emb.set_index("well_id").loc["gene-002_1_A02"].to_numpy()
    np.testing.assert_allclose(X[wells.well_id.tolist().index("gene-002_1_A02")], row)
    # other control definitions and batch columns
    X2, w2 = load_rxrx3_core(emb_path, meta_path, genes=("PLK1",),
                             control_treatments=("EMPTY_control",), batch_column="plate")
    assert w2.is_control.sum() == 2 and set(w2.batch) == {"1"}


def test_schema_errors(tmp_path):
    emb_path, meta_path, _ = write_tiny(tmp_path, drop_meta="treatment")
    with pytest.raises(SchemaError, match="treatment"):
        load_rxrx3_core(emb_path, meta_path)
    emb_path, meta_path, _ = write_tiny(tmp_path, rename_feats=True)
    with pytest.raises(SchemaError, match="feature_"):
        load_rxrx3_core(emb_path, meta_path, genes=("PLK1",))
    emb_path, meta_path, _ = write_tiny(tmp_path)
    with pytest.raises(SchemaError, match="expected 384"):
        load_rxrx3_core(emb_path, meta_path, genes=("PLK1",), dim=384)
    with pytest.raises(ValueError, match="MTOR"):
        load_rxrx3_core(emb_path, meta_path, genes=("MTOR",))
    with pytest.raises(FileNotFoundError, match="Hugging Face"):
        load_rxrx3_core(tmp_path / "missing.parquet", meta_path)
