"""Every paper name our pages show for one of our results says what stands in for it."""

import json
from pathlib import Path

import pytest

from nearid import paper, standins
from nearid.book.scorecard import split_facet

REFERENCE = Path(__file__).parents[2] / "book" / "reference" / "quick"


def test_every_row_of_the_papers_tables_we_measure_has_a_stand_in():
    for name in [*paper.TABLE1_LABELS.values(), "Shapes3D", "MPI3D", "Falcor3D", "Isaac3D"]:
        assert standins.stand_in(name), name
    for short in ("CheXpert", "Pythia", "MAE", "ResNet"):
        assert standins.stand_in(short), "the summary names a pair by its first word"


def test_every_subject_of_a_recorded_verdict_is_a_known_name():
    """The subjects the summary shows for the paper's tables (a claim text's "A -> B: " or
    "(Dataset)", chapters 04 and 05's reference results) each resolve to a stand-in or to a
    mean of ours."""
    seen = 0
    for path in sorted(REFERENCE.glob("0[45]_*.json")):
        for block in ("verdicts", "hypotheses"):
            for rec in (json.loads(path.read_text()).get(block) or {}).values():
                _, facet = split_facet(rec["claim"])
                if facet:
                    standins.stand_in(facet)  # raises for a name without an entry
                    seen += 1
    assert seen >= 20


def test_labels_and_refusals():
    assert standins.labelled("CheXpert") == "CheXpert (stand-in: MNIST CNNs, two widths)"
    assert standins.labelled("CheXpert-small -> CheXpert-base") == \
        "CheXpert-small -> CheXpert-base (stand-in: MNIST CNNs, two widths)"
    assert standins.labelled("mean over datasets") == "mean over datasets"
    assert standins.labelled("delta -> 0") == "delta -> 0", "a subject of ours is left as it is"
    with pytest.raises(KeyError, match="no stand-in"):
        standins.stand_in("dSprites")
