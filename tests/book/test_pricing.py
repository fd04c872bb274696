"""Work priced before it starts: a run whose steps are far beyond its chapter's known runs is
refused in well under a second unless --yes is given (nearid.book.pricing)."""

import json
import time

import pytest

from nearid.book import pricing
from nearid.book.profiles import resolve

CH = "02_isometric_dgp"


def _timings(tmp_path, wall_s=100.0, profile="quick", device="cpu (2 cores, 1 torch thread)"):
    (tmp_path / "timings.json").write_text(json.dumps([
        {"chapter": CH, "profile": profile, "overrides": {}, "status": "ok", "wall_s": wall_s, "device": device}]))
    return tmp_path


def test_a_run_is_priced_from_its_chapters_last_run_by_steps(tmp_path):
    out = _timings(tmp_path)
    base = pricing.price(CH, "quick", resolve(CH, "quick"), out)
    assert base.seconds == pytest.approx(100.0) and "last run here: quick, 100 s" in base.basis
    doubled = pricing.price(CH, "quick", resolve(CH, "quick", {"epochs": 2 * resolve(CH, "quick")["epochs"]}), out)
    assert doubled.steps > 1.9 * base.steps
    assert doubled.seconds == pytest.approx(100.0 * doubled.steps / base.steps)


def test_a_typo_is_refused_within_a_second_and_yes_lets_it_through(tmp_path, monkeypatch):
    monkeypatch.delenv(pricing.ENV_MAX_HOURS, raising=False)
    out = _timings(tmp_path)
    start = time.perf_counter()
    typo = pricing.price(CH, "quick", resolve(CH, "quick", {"epochs": 10 ** 5}), out)  # in bounds, 10^5 epochs: days
    with pytest.raises(pricing.CostRefused, match=r"over the 2.0 h limit .* --yes"):
        pricing.check([typo], yes=False)
    assert time.perf_counter() - start < 1.0
    pricing.check([typo], yes=True)
    pricing.check([pricing.price(CH, "quick", resolve(CH, "quick"), out)], yes=False)


def test_without_a_known_run_on_this_device_the_cost_is_unknown_and_not_refused(tmp_path):
    out = _timings(tmp_path)
    p = pricing.price(CH, "full", resolve(CH, "full"), out, device="cuda")
    assert p.seconds is None and "nearid plan" in p.describe()
    pricing.check([p], yes=False)


def test_the_fresh_clone_prices_from_the_reference_machine(tmp_path):
    p = pricing.price(CH, "quick", resolve(CH, "quick"), tmp_path)
    assert "reference 2-core CPU" in p.basis and p.seconds > 0


def test_the_threshold_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(pricing.ENV_MAX_HOURS, "0.5")
    assert pricing.max_seconds() == 1800
    monkeypatch.setenv(pricing.ENV_MAX_HOURS, "soon")
    with pytest.raises(ValueError, match="NEARID_MAX_HOURS must be a number"):
        pricing.max_seconds()


def test_the_runner_refuses_before_any_work_and_the_cli_says_so_with_rc_2(root, tmp_path, monkeypatch, capsys):
    from nearid.cli.main import main

    monkeypatch.delenv(pricing.ENV_MAX_HOURS, raising=False)
    out = _timings(tmp_path)
    from nearid.book import runner

    with pytest.raises(pricing.CostRefused, match="--yes"):
        runner.run_chapter_outcome(CH, "quick", {"epochs": 10 ** 5}, out_dir=out, root=root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timings.json"], "nothing ran, nothing written"
    monkeypatch.chdir(root)
    assert main(["run", "02", "-p", "epochs=100000"]) == 2
    err = capsys.readouterr().err
    assert "estimate: 02_isometric_dgp (quick)" in err and "pass --yes" in err


@pytest.mark.parametrize("chapter,override", [("02_isometric_dgp", {"n_train": 10 ** 7}),
                                              ("06_cell_microscopy", {"controls_per_batch": 10 ** 5})])
def test_data_larger_than_the_machine_is_refused_unless_yes(chapter, override, monkeypatch):
    monkeypatch.setattr(pricing, "machine_memory_mb", lambda: 2 * 1024.0)  # the size bounds keep data under 16 GB
    fits = pricing.price(chapter, "smoke", resolve(chapter, "smoke"))
    assert 0 < fits.data_mb < 1024
    pricing.check([fits], yes=False)
    huge = pricing.price(chapter, "smoke", resolve(chapter, "smoke", override))
    assert huge.data_mb > 2 * 1024
    with pytest.raises(pricing.CostRefused, match="its data alone takes about .* more than this machine's 2.0 GB"):
        pricing.check([huge], yes=False)
    pricing.check([huge], yes=True)


def test_chapter_05_data_grows_with_images_and_their_size():
    ch = "05_disentanglement"
    small = pricing.price(ch, "smoke", resolve(ch, "smoke")).data_mb
    bigger = pricing.price(ch, "smoke", resolve(ch, "smoke", {"image_size": 32})).data_mb
    assert bigger == pytest.approx(4 * small)


def test_a_smoke_run_does_not_price_quick_when_the_reference_can(tmp_path):
    out = _timings(tmp_path, wall_s=100.0, profile="smoke")
    quick = pricing.price(CH, "quick", resolve(CH, "quick"), out)
    assert "reference 2-core CPU" in quick.basis
    again = pricing.price(CH, "smoke", resolve(CH, "smoke"), out)
    assert "last run here: smoke" in again.basis and again.seconds == pytest.approx(100.0)


def test_a_chapter_whose_tasks_have_no_steps_is_priced_at_its_known_time(tmp_path):
    """Chapter 01's ICA fits are tasks without optimisation steps: priced as before they were
    tasks, at the reference machine's time, without a 'no steps to scale by' guess."""
    ch = "01_definitions"
    p = pricing.price(ch, "quick", resolve(ch, "quick"), tmp_path)
    assert p.tasks > 0 and p.steps is None
    assert "reference 2-core CPU" in p.basis and "no steps" not in p.basis and p.seconds > 0
