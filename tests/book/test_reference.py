"""`nearid verify`: a build's numbers and verdicts against the committed reference results."""

import json
import shutil

import pytest

from nearid.book import profiles, reference, runner
from nearid.cli.main import main

PORTABLE = {"mode": "portable", "portable": True, "problems": [], "cpu": "Some CPU", "settings": {"X": "1"}}


def _doc(profile="smoke", estimate=0.25, verdict="holds", seconds=3.0, cpu="Some CPU"):
    return {"profile": profile, "seconds": seconds, "kernels": {**PORTABLE, "cpu": cpu},
            "table": {"mae": {"rigid": 0.125, "ica": [0.5, 0.25]}},
            "verdicts": {"claim_a": {"estimate": estimate, "low": 0.1, "high": 0.4, "verdict": verdict, "n": 3}}}


def _write(folder, docs):
    folder.mkdir(parents=True, exist_ok=True)
    for key, doc in docs.items():
        (folder / f"{key}.json").write_text(json.dumps(doc))


@pytest.fixture
def book(tmp_path, monkeypatch):
    """A checkout-like root whose reference and executed folders hold every chapter. Only
    their JSON: the command's check that the current code made them (each chapter's .key, the
    cache key) is tested in test_hardening.py, and passes here."""
    monkeypatch.setattr(runner, "result_problem", lambda *args, **kwargs: None)
    keys = list(profiles.CHAPTERS)
    _write(tmp_path / "book" / "reference" / "smoke", {k: _doc() for k in keys})
    _write(tmp_path / "book" / "executed", {k: _doc(seconds=99.0, cpu="Other CPU") for k in keys})
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    return tmp_path, keys


def test_wall_clock_and_machine_fields_are_not_compared(book):
    root, keys = book
    rep = reference.verify(root / "book" / "executed", root / "book" / "reference" / "smoke", "smoke")
    assert rep.ok and rep.chapters == sorted(keys)
    assert rep.compared == len(keys) * 12  # every leaf but seconds and kernels.cpu
    assert "matches the reference" in rep.text()


def test_every_difference_is_reported_with_its_path_and_both_values(book):
    root, keys = book
    _write(root / "book" / "executed", {keys[0]: _doc(estimate=0.2500001, verdict="fails")})
    rep = reference.verify(root / "book" / "executed", root / "book" / "reference" / "smoke", "smoke")
    assert not rep.ok
    by_path = {d.path: d for d in rep.differences}
    assert set(by_path) == {"verdicts.claim_a.estimate", "verdicts.claim_a.verdict"}
    assert by_path["verdicts.claim_a.verdict"].kind == "verdict"
    text = rep.text()
    assert f'VERDICT {keys[0]}: verdicts.claim_a.verdict: build "fails" vs reference "holds"' in text
    assert f"{keys[0]}: verdicts.claim_a.estimate: build 0.2500001 vs reference 0.25" in text
    # a tolerance forgives the number, never the verdict
    rep = reference.verify(root / "book" / "executed", root / "book" / "reference" / "smoke", "smoke", rtol=1e-5)
    assert [d.path for d in rep.differences] == ["verdicts.claim_a.verdict"]


def test_structure_differences_and_missing_files(book):
    root, keys = book
    doc = _doc()
    del doc["table"]["mae"]["rigid"]
    doc["table"]["mae"]["ica"].append(1.0)
    doc["new"] = None
    _write(root / "book" / "executed", {keys[1]: doc})
    (root / "book" / "executed" / f"{keys[2]}.json").unlink()
    _write(root / "book" / "executed", {keys[3]: _doc(profile="quick")})
    rep = reference.verify(root / "book" / "executed", root / "book" / "reference" / "smoke", "smoke")
    kinds = {(d.path, d.kind) for d in rep.differences}
    assert ("table.mae.rigid", "missing") in kinds and ("new", "extra") in kinds
    assert ("table.mae.ica (length)", "value") in kinds
    assert any(keys[2] in p and "not executed" in p for p in rep.problems)
    assert any(keys[3] in p and "profile 'quick'" in p for p in rep.problems)
    numbers = reference.compare_json({"a": True, "b": 1, "c": float("nan")}, {"a": 1, "b": 1.0, "c": float("nan")})[1]
    assert [d.path for d in numbers] == ["a"]  # a bool is not the number 1; an int is its float
    ordering = reference.compare_json({"ordering": {"mae": "fails"}}, {"ordering": {"mae": "holds"}})[1]
    assert [d.kind for d in ordering] == ["verdict"]


def test_update_writes_a_reference_only_from_a_complete_portable_build(book, tmp_path):
    root, keys = book
    ref = tmp_path / "new_reference"
    assert reference.update(root / "book" / "executed", ref, "smoke") == sorted(keys)
    assert json.loads((ref / f"{keys[0]}.json").read_text())["seconds"] == 99.0
    assert reference.verify(root / "book" / "executed", ref, "smoke").ok
    with pytest.raises(ValueError, match="profile 'smoke', not 'quick'"):
        reference.update(root / "book" / "executed", ref, "quick")
    native = _doc()
    native["kernels"] = {"mode": "native", "portable": False, "problems": ["NEARID_NATIVE_KERNELS is set"]}
    _write(root / "book" / "executed", {keys[0]: native})
    with pytest.raises(ValueError, match="not computed with portable kernels .NEARID_NATIVE_KERNELS is set"):
        reference.update(root / "book" / "executed", ref, "smoke")
    _write(root / "book" / "executed", {keys[0]: _doc()})
    (root / "book" / "executed" / f"{keys[4]}.json").unlink()
    with pytest.raises(ValueError, match=f"lack {keys[4]}"):
        reference.update(root / "book" / "executed", ref, "smoke")


def test_update_with_only_rewrites_those_chapters_and_keeps_the_rest(book, monkeypatch, capsys):
    """`nearid verify --update --only 07` once rewrote all seven chapters (their wall-clock
    fields changing in the diff): --only now holds for --update too."""
    root, keys = book
    monkeypatch.setenv("NEARID_ROOT", str(root))
    ref = root / "book" / "reference" / "smoke"
    before = {k: (ref / f"{k}.json").read_text() for k in keys}
    assert main(["verify", "--profile", "smoke", "--update", "--only", keys[-1][:2]]) == 0
    assert f"rewritten from 1 chapters: {keys[-1]}" in capsys.readouterr().out
    assert json.loads((ref / f"{keys[-1]}.json").read_text())["seconds"] == 99.0
    assert all((ref / f"{k}.json").read_text() == before[k] for k in keys[:-1])
    (root / "book" / "executed" / f"{keys[0]}.json").unlink()
    with pytest.raises(FileNotFoundError, match=f"no executed results for {keys[0]}"):
        reference.update(root / "book" / "executed", ref, "smoke", chapters=[keys[0]])


def test_the_command(book, monkeypatch, capsys):
    root, keys = book
    monkeypatch.setenv("NEARID_ROOT", str(root))
    assert main(["verify", "--profile", "smoke"]) == 0
    assert "matches the reference" in capsys.readouterr().out
    _write(root / "book" / "executed", {keys[0]: _doc(estimate=0.3)})
    assert main(["verify", "--profile", "smoke"]) == 1
    assert "verdicts.claim_a.estimate: build 0.3 vs reference 0.25" in capsys.readouterr().out
    assert main(["verify", "--profile", "smoke", "--atol", "0.1"]) == 0
    assert main(["verify", "--profile", "smoke", "--only", keys[1][:2], keys[2]]) == 0  # the others only
    assert "2 chapters" in capsys.readouterr().out
    assert main(["verify", "--profile", "smoke", "--update"]) == 0
    assert f"rewritten from {len(keys)} chapters" in capsys.readouterr().out
    assert main(["verify", "--profile", "smoke"]) == 0
    assert main(["verify", "--profile", "nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err
    shutil.rmtree(root / "book" / "reference")
    assert main(["verify", "--profile", "quick"]) == 1
    assert "no reference results" in capsys.readouterr().out


@pytest.mark.parametrize("profile", ["smoke", "quick"])
def test_the_committed_reference_is_complete_and_portable(root, profile):
    """What readers verify against: every chapter, that profile, portable kernels."""
    files = sorted((root / "book" / "reference" / profile).glob("*.json"))
    assert [f.stem for f in files] == sorted(profiles.CHAPTERS)
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["profile"] == profile, f
        assert doc["kernels"]["portable"] is True and doc["kernels"]["mode"] == "portable", f
        assert doc["params"] == profiles.resolve(f.stem, profile), f  # the profile as it stands


def test_an_alternate_reference_is_exact_and_says_so(book, monkeypatch, capsys):
    """Where the portable kernels are known not to be enough on one kind of CPU, a chapter may
    match an alternate recorded whole on that CPU, with the CPU and the reason in its index;
    the report names it. A build matching neither is reported against the primary."""
    root, keys = book
    monkeypatch.setenv("NEARID_ROOT", str(root))
    ex, ref = root / "book" / "executed", root / "book" / "reference" / "smoke"
    _write(ex, {keys[3]: _doc(estimate=0.3)})
    assert not reference.verify(ex, ref, "smoke").ok
    assert main(["verify", "--profile", "smoke", "--update", "--only", keys[3][:2], "--alternate", "zen5"]) == 2
    assert "needs --update and --why" in capsys.readouterr().err
    assert main(["verify", "--profile", "smoke", "--update", "--only", keys[3][:2], "--alternate", "zen5",
                 "--why", "trains to other weights there"]) == 0
    assert "alternate references 'zen5'" in capsys.readouterr().out
    index = json.loads((ref / "alternates" / "index.json").read_text())
    assert index[f"{keys[3]}.zen5.json"]["why"] == "trains to other weights there" and index[f"{keys[3]}.zen5.json"]["cpu"]
    assert json.loads((ref / f"{keys[3]}.json").read_text())["verdicts"]["claim_a"]["estimate"] == 0.25  # primary kept
    rep = reference.verify(ex, ref, "smoke")
    assert rep.ok and keys[3] in rep.alternates
    assert f"note: {keys[3]} matches its alternate reference {keys[3]}.zen5.json" in rep.text()
    _write(ex, {keys[3]: _doc()})  # the primary's numbers: matched without the alternate
    rep = reference.verify(ex, ref, "smoke")
    assert rep.ok and not rep.alternates
    _write(ex, {keys[3]: _doc(estimate=0.35)})  # neither: the differences from the primary
    rep = reference.verify(ex, ref, "smoke")
    assert [d.reference for d in rep.differences] == [0.25]
    (ref / "alternates" / "index.json").write_text("{}")  # an alternate must say why it exists
    with pytest.raises(ValueError, match="needs an entry"):
        reference.verify(ex, ref, "smoke")
    with pytest.raises(ValueError, match="per chapter"):
        reference.update(ex, ref, "smoke", alternate=("zen5", "why"))


def test_cpu_signature_tells_zen_generations_apart():
    info = "model name\t: AMD EPYC\ncpu family\t: 26\nmodel\t\t: 2\nflags\t\t: fpu avx2 avx512f\n"
    assert reference.cpu_signature("AMD EPYC", info) == "AMD EPYC (family 26, model 2; AVX-512)"
    info3 = "cpu family\t: 25\nmodel\t\t: 1\nflags\t\t: fpu avx2\n"
    assert reference.cpu_signature("AMD EPYC", info3) == "AMD EPYC (family 25, model 1; no AVX-512)"
    assert reference.cpu_signature("Some CPU", "") == "Some CPU"
