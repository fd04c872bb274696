"""The registry of claims (nearid.claims): well-formed, and tied both ways to what the
chapters decide, so no verdict reaches the book undeclared and no declared claim goes missing."""

import json
from pathlib import Path

import pytest
import yaml

from nearid import claims
from nearid.book.results import CLAIM_BLOCKS

REFERENCE = Path(__file__).resolve().parents[2] / "book" / "reference"


def _decided(profile):
    out = {}
    for path in sorted((REFERENCE / profile).glob("0[1-6]_*.json")):
        doc = json.loads(path.read_text())
        for block in CLAIM_BLOCKS:
            for cid, rec in (doc.get(block) or {}).items():
                out[cid] = (path.stem, rec["section"])
    return out


@pytest.mark.parametrize("profile", ["smoke", "quick"])
def test_every_verdict_of_every_chapter_is_declared_in_its_chapter_and_section(profile):
    registry = claims.registry()
    for cid, (chapter, section) in _decided(profile).items():
        assert cid in registry, f"{chapter} decides {cid!r}, which the registry does not declare"
        assert (registry[cid].chapter, registry[cid].section) == (chapter, section), cid


def test_every_declared_claim_is_decided_in_the_quick_book():
    """The book's default profile decides every claim of the registry (smoke may skip a few:
    chapter 01's smoke run has no Gaussian sources)."""
    assert set(claims.registry()) == set(_decided("quick"))


def test_the_quick_book_meets_every_design_floor():
    """The default profile trains enough units for every claim whose minimum is a design floor
    (no power calculation: the paper gives no number, or the claim is not counted): no such
    verdict of the quick reference rests on fewer units than its registry entry declares."""
    registry = claims.registry()
    short = []
    for path in sorted((REFERENCE / "quick").glob("0[1-6]_*.json")):
        doc = json.loads(path.read_text())
        for block in CLAIM_BLOCKS:
            for cid, rec in (doc.get(block) or {}).items():
                power = registry[cid].power or {}
                if "n" not in power and rec.get("n") is not None and rec["n"] < registry[cid].min_n:
                    short.append((cid, rec["n"], registry[cid].min_n))
    assert not short, short


def test_every_counted_minimum_comes_from_its_declared_power_calculation():
    """Issue 35, item 5: each counted claim's min_n is the n its recorded calculation gives
    (redone here from the recorded spread and effect), or a floor with the reason there is
    none; claims not counted carry no calculation."""
    from nearid.verdicts import units_for_spread

    for c in claims.registry().values():
        if not c.counts_as_paper_claim:
            assert c.power is None, c.id
            continue
        assert c.power, f"{c.id}: a counted claim declares its power calculation (or why there is none)"
        if "none" in c.power:
            continue
        n = units_for_spread(c.power["sd"], c.power["effect"], c.power["method"],
                             equivalence=c.test == "equivalence")
        assert int(n) == c.power["n"], c.id
        assert c.min_n == max(int(n), claims.POWER_FLOOR), c.id


def test_a_power_calculation_that_disagrees_with_min_n_is_refused(tmp_path):
    counted = {**BASE, "kind": "paper_number", "paper": {"where": "Table 1", "words": "A > B"}}
    plan = {"pilot": "p", "method": "t", "sd": 0.1, "effect": 0.05, "n": 34}
    assert claims.load(_write(tmp_path, [{**counted, "min_n": 34, "power": plan}]))["a"].power == plan
    with pytest.raises(ValueError, match="min_n 5 is not the power calculation's 34"):
        claims.load(_write(tmp_path, [{**counted, "min_n": 5, "power": plan}]))
    with pytest.raises(ValueError, match="min_n 5 is not the power calculation's 3"):
        claims.load(_write(tmp_path, [{**counted, "min_n": 5, "power": {**plan, "n": 2}}]))
    with pytest.raises(ValueError, match=r"power lacks \['sd'\]"):
        claims.load(_write(tmp_path, [{**counted, "min_n": 34, "power": {k: v for k, v in plan.items() if k != "sd"}}]))
    with pytest.raises(ValueError, match="only the claims the headline counts"):
        claims.load(_write(tmp_path, [{**BASE, "power": {"none": "no number"}}]))


def test_the_registry_declares_what_the_issue_asks_of_every_entry():
    for c in claims.registry().values():
        assert c.unit and c.min_n >= 2 and c.protocol, c.id
        if c.kind in ("paper_claim", "paper_number", "paper_tie"):
            assert c.paper["where"] and c.paper["words"], c.id
        if c.kind == "paper_tie":
            assert not c.counts_as_paper_claim


def _write(tmp_path, entries):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": entries}))
    return path


BASE = dict(id="a", chapter="09_x", section="ch09-v", kind="method_check", test="superiority", margin=0.0,
            unit="seeds", min_n=3, retraining="resampled", declared="abc1234, 2026-12-05 12:00 UTC")


@pytest.mark.parametrize("change, match", [
    ({"kind": "claim"}, "kind 'claim'; valid: paper_claim"),
    ({"test": "bigger"}, "test 'bigger'; valid: superiority, non_inferiority, equivalence"),
    ({"colour": "red"}, r"unknown fields \['colour'\]"),
    ({"kind": "paper_claim"}, "names where the paper says it"),
    ({"retraining": "not resampled"}, "declares min_trainings"),
    ({"history": [{"until": "abc1234", "verdict": "holds"}]}, r"history entry 1 lacks \['protocol'\]"),
    ({"declared": None}, "declared is missing"),
    ({"first_result": "yesterday"}, "a registry stamp reads 'commit, YYYY-MM-DD HH:MM UTC', got 'yesterday'"),
    ({"protocol": [{"unit": "seeds"}]}, "protocol holds {'unit': 'seeds'}, not a line of text"),
    ({"history": [{"until": "abc1234", "verdict": "holds", "protocol": ["a", {"unit": "pairs"}]}]},
     "history entry 1's protocol holds"),
])
def test_a_malformed_entry_is_refused_with_its_name(tmp_path, change, match):
    with pytest.raises(ValueError, match=match):
        claims.load(_write(tmp_path, [{**BASE, **change}]))


def test_a_repeated_or_incomplete_entry_is_refused(tmp_path):
    with pytest.raises(ValueError, match="declared twice"):
        claims.load(_write(tmp_path, [BASE, BASE]))
    with pytest.raises(ValueError, match=r"missing fields \['min_n'\]"):
        claims.load(_write(tmp_path, [{k: v for k, v in BASE.items() if k != "min_n"}]))


def test_every_entry_says_when_it_was_declared_and_when_its_first_result_came():
    """The registry was created after the book's first results: its entries of that day say
    so (declared after the first result); an entry added later is declared before it, or
    has no result yet."""
    entries = claims.registry().values()
    assert all(c.declared for c in entries)
    first_day = [c for c in entries if c.declared.startswith("2b7c2ea")]
    assert first_day and all(c.declared_before_result is False for c in first_day)
    entry = claims.Claim(**{**BASE, "first_result": "def5678, 2026-12-05 13:00 UTC"})
    assert entry.declared_before_result is True
    assert claims.Claim(**BASE).declared_before_result is None, "no result yet: declared before it"


def test_history_rows_put_each_earlier_protocol_beside_the_current_one():
    rows = claims.history_rows()
    ids = {r["claim_id"] for r in rows}
    assert "auroc_ica_gt_pca" in ids and "order_cnn_widths_ica_rigid" in ids
    row = next(r for r in rows if r["claim_id"] == "auroc_ica_gt_pca")
    assert row["until"].startswith("40c7a93") and "every direction" in row["protocol_then"]
    assert "ica_components 16" in row["protocol_now"] and row["verdict_then"].startswith("holds")


def test_the_margins_of_chapter_05_are_the_papers_largest_seed_spread_of_each_metric():
    """"Comparable" and "the same" in chapter 05 are read within the largest standard
    deviation over seeds that the paper reports for that metric (its Table 5: InfoM 0.05,
    InfoE 0.02, InfoC 0.06), declared in the registry."""
    from nearid import paper

    largest = {metric: max(row[j][1] for row in paper.TABLE5_SHAPES3D.values())
               for j, metric in enumerate(("infom", "infoe", "infoc"))}
    assert largest == {"infom": 0.05, "infoe": 0.02, "infoc": 0.06}
    ch05 = [c for c in claims.registry().values() if c.chapter == "05_disentanglement"]
    decided_within = [c for c in ch05 if c.test != "superiority" and c.kind != "method_check"]
    assert decided_within and all(c.margin == largest[next(m for m in largest if f"_{m}_" in c.id)]
                                  for c in decided_within), [(c.id, c.margin) for c in decided_within]
    assert {c.test for c in ch05 if c.kind == "paper_tie"} == {"equivalence"}
    assert {c.test for c in ch05 if c.id.startswith(("ica_vs_beta", "ica_vs_bioae"))} == {"non_inferiority"}


def test_a_section_states_its_shared_fields_once_and_an_entry_keeps_its_own(tmp_path):
    path = tmp_path / "claims.yaml"
    shared = {"unit": "seeds, Student's t", "protocol": ["InfoMEC as Hsu et al."]}
    own = {**BASE, "id": "b", "protocol": ["its own"]}
    bare = {k: v for k, v in BASE.items() if k != "unit"}
    path.write_text(yaml.safe_dump({"sections": {"ch09-v": shared}, "claims": [bare, own]}))
    got = claims.load(path)
    assert got["a"].unit == shared["unit"] and got["a"].protocol == ("InfoMEC as Hsu et al.",)
    assert got["b"].unit == "seeds" and got["b"].protocol == ("its own",)


@pytest.mark.parametrize("sections, match", [
    ({"ch09-typo": {"unit": "seeds"}}, "sections.ch09-typo names a section no claim is in"),
    ({"ch09-v": ["unit: seeds"]}, r"sections maps each section's name to its shared fields"),
    ({"ch09-v": {"margin": 0.1}}, r"may state chapter, unit, retraining, min_trainings, protocol for its claims, "
                                  r"not \['margin'\]"),
])
def test_a_section_default_a_claim_should_state_itself_is_refused(tmp_path, sections, match):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"sections": sections, "claims": [BASE]}))
    with pytest.raises(ValueError, match=match):
        claims.load(path)


def test_the_expanded_registry_is_the_registry_written_out_claim_by_claim(tmp_path):
    """Writing every section's fields into each of its claims and dropping ``sections`` reads
    as the same 58-odd claims: the shared blocks are an abbreviation, nothing more. And no claim
    restates what its section states (the block would then be typed twice again)."""
    doc = yaml.safe_load(claims.REGISTRY.read_text())
    sections = doc.pop("sections")
    for raw in doc["claims"]:
        for name, value in sections.get(raw["section"], {}).items():
            assert raw.get(name) != value, f"{raw['id']} restates its section's {name}"
            raw.setdefault(name, value)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert claims.load(path) == claims.registry()
