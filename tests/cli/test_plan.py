"""`nearid plan` against the chapter contract (experiment module `plan(P) -> list[Task]`),
with a fake experiment module whose tasks are small functions from tests/task_functions.py."""

import json
import types

import pytest

import task_functions as tf
from nearid import planning
from nearid.cli import main as cli
from nearid.tasks import Task

SEEN = {}


def _fake_plan(P):
    SEEN["P"] = P
    tasks = [Task(tf.sleepy, {"seconds": 0.05, "per_step": 0.01, "seed": s}, kind="train_ae", label=f"ae seed {s}",
                  steps=P.epochs * 10) for s in range(P.seeds)]
    tasks += [Task(tf.sleepy, {"seconds": 0.05, "seed": s}, kind="embed", label=f"embed {s}") for s in range(3)]
    return tasks


def _only_03(monkeypatch):
    fake = types.SimpleNamespace(plan=_fake_plan)
    monkeypatch.setattr(planning, "experiment_module", lambda number: fake if number == "03" else None)


def test_plan_one_chapter_lists_kinds_and_estimates(monkeypatch, capsys, tmp_path):
    _only_03(monkeypatch)
    out_json = tmp_path / "plan.json"
    assert cli.main(["plan", "03", "--profile", "smoke", "-p", "seeds=4", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert SEEN["P"].seeds == 4 and SEEN["P"].epochs == 2, "plan gets the resolved parameters, overrides applied"
    assert "03_bilipschitz: 7 tasks" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and line.split()}
    assert lines["train_ae"].split()[1:3] == ["4", "20"] and lines["embed"].split()[1:3] == ["3", "-"]
    assert "estimate:" in out and "peak memory per worker" in out
    report = json.loads(out_json.read_text())
    ch = report["chapters"]["03_bilipschitz"]
    assert report["complete"] and ch["tasks"] == 7
    train = ch["kinds"][0]
    m = train["measurement"]
    assert train["steps"] == 80 and m["steps"][0] == 2 and 10 <= m["steps"][1] <= 20, "k2 grows for quick steps"
    assert train["estimate_s"] == m["once_s"] + 4 * m["setup_s"] + 80 * m["step_s"]


def test_plan_the_whole_book_says_which_chapters_have_no_plan(monkeypatch, capsys):
    _only_03(monkeypatch)
    assert cli.main(["plan", "--profile", "smoke", "--workers", "4"]) == 0
    out = capsys.readouterr().out
    assert "01_definitions: its experiment module has no plan(P) and no evaluation_plan(P); not estimated" in out
    assert "03_bilipschitz: 5 tasks" in out
    total = [line for line in out.splitlines() if line.startswith("total:")]
    assert len(total) == 1 and "with 4 workers at least" in total[0] and "not estimated: 01_definitions" in total[0]
    assert "own evaluation not estimated: 03_bilipschitz" in total[0]


def _evaluate(P):
    return [Task(tf.sleepy, {"seconds": 0.05, "per_step": 0.01}, kind="align", label="align pairs", steps=40)]


def test_plan_times_a_chapters_own_evaluation_and_keeps_it_in_the_kernel(monkeypatch, capsys, tmp_path):
    """evaluation_plan(P): timed like tasks (cut to k1 and k2 units, scaled to all 40), reported
    apart, and not divided among workers; a chapter with only an evaluation is planned too."""
    fake = types.SimpleNamespace(plan=_fake_plan, evaluation_plan=_evaluate)
    only_eval = types.SimpleNamespace(evaluation_plan=_evaluate)
    modules = {"03": fake, "01": only_eval}
    monkeypatch.setattr(planning, "experiment_module", lambda number: modules.get(number))
    out_json = tmp_path / "plan.json"
    assert cli.main(["plan", "01", "03", "--profile", "smoke", "--workers", "4", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "align (evaluation)" in out and "01_definitions: 0 tasks" in out
    report = json.loads(out_json.read_text())
    ch = report["chapters"]["03_bilipschitz"]
    train, embed, align = ch["kinds"]
    assert [k["stage"] for k in ch["kinds"]] == ["tasks", "tasks", "evaluation"] and ch["evaluation_listed"]
    m = align["measurement"]
    assert m["steps"][0] == 2 and 10 <= m["steps"][1] <= 40, "the evaluation is cut to a few units"
    assert align["estimate_s"] == pytest.approx(m["once_s"] + m["setup_s"] + 40 * m["step_s"])
    assert ch["evaluation_s"] == align["estimate_s"] and ch["tasks_s"] == train["estimate_s"] + embed["estimate_s"]
    assert report["evaluation_s"] == pytest.approx(ch["evaluation_s"] + report["chapters"]["01_definitions"]["evaluation_s"])
    total = next(line for line in out.splitlines() if line.startswith("total:"))
    assert "the evaluation stays in the kernel" in total and "not estimated" not in total


def test_plan_fails_when_a_kind_cannot_be_timed(monkeypatch, capsys):
    def plan(P):
        return [Task(tf.sleepy, {"seconds": 30}, kind="slow", label="slow")]

    monkeypatch.setattr(planning, "experiment_module", lambda n: types.SimpleNamespace(plan=plan) if n == "02" else None)
    assert cli.main(["plan", "02", "--profile", "smoke", "--timeout", "1"]) == 1
    assert "not timed: timed out after 1 s" in capsys.readouterr().out


def test_plan_rejects_bad_input(capsys):
    assert cli.main(["plan", "03", "--profile", "huge"]) == 2
    assert "unknown profile" in capsys.readouterr().err
    assert cli.main(["plan", "03", "--steps", "5,2"]) == 2
    assert "k1 < k2" in capsys.readouterr().err
    assert cli.main(["plan", "03", "--jobs", "0"]) == 2
    assert "--jobs must be at least 1, got 0" in capsys.readouterr().err
    assert cli.main(["plan", "03", "--evaluate-share", "1.5"]) == 2
    assert "--evaluate-share must be in (0, 1], got 1.5" in capsys.readouterr().err


def test_plan_columns_line_up_whatever_the_kind_names():
    """Widths come from the cells: a long kind name pushes every row's columns, not one row's."""
    ok = planning.Measurement(label="a", steps=(2, 10), seconds=[1, 1, 2], once_s=0.12, setup_s=1.5,
                              step_s=0.0123, peak_rss_mb=812, device="cpu")
    plans = [planning.KindPlan("train_ae", 4, 80, False, ok, 123.0),
             planning.KindPlan("train_vae_beta_tcvae_disentangle", 12, 1200, True, ok, 4000.0),
             planning.KindPlan("embed", 3, None, False, planning.Measurement(label="e", steps=None, error="boom"))]
    lines = planning.format_chapter("05_disentanglement: 19 tasks", plans).splitlines()
    header, rows = lines[1], lines[2:4]
    for column in ("tasks", "steps/task", "estimate", "GPU peak"):  # right-aligned under their headings
        end = header.index(column) + len(column)
        assert all(row[end - 1] != " " and (len(row) == end or row[end] == " ") for row in rows), (column, lines)
    assert len({len(row) for row in [header, *rows]}) == 1
    assert lines[4].split()[:3] == ["embed", "3", "-"] and "not timed: boom" in lines[4]
