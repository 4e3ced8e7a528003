"""bench.coda's bookkeeping (its training runs are the recipes', tests/recipes): both arms run the same shared
variables, seed for seed, each with its own recipe; a planner's thought is played by the grounding stand-in on the
layout it is scored on (so naming one element everywhere is blind); bad arguments are one line; coda.json holds both
arms' runs with their grounding and the table prints the anchor, the blind baseline and the initial gaps."""

import json
from dataclasses import dataclass, field

import pytest

from bench import coda
from bench.grounding import planner_click, text_hit_matrix
from bench.learn import LearningRun, recipe_defaults
from verl_cua.envs.observation import Element
from verl_cua.eval.grounding import gap_interval


def test_both_recipes_default_the_shared_variables_alike():
    alone, planner = recipe_defaults(coda.ALONE_RECIPE), recipe_defaults(coda.CODA_RECIPE)
    differ = {k: (alone[k], planner[k]) for k in coda.SHARED if alone[k] != planner[k]}
    assert set(differ) <= set(coda.SETTING), differ  # only what the bench sets for both anyway
    setting = coda.setting_for(steps=7, sets=["LR=1e-3"])
    assert setting["STEPS"] == setting["SAVE_FREQ"] == "7" and setting["LR"] == "1e-3"
    assert setting["OBSERVATION"] == "screenshot_a11y_tree" and setting["TASKS"] == "click-button"


def test_the_arms_differ_only_in_who_acts():
    (alone_recipe, alone_planner, alone_overrides), (coda_recipe, coda_planner, _) = coda.ARMS.values()
    assert alone_recipe.is_file() and coda_recipe.is_file() and not alone_planner and coda_planner
    text = coda_recipe.read_text()
    assert all(o in text for o in alone_overrides)  # CODA's loss knobs: the CODA recipe's own, given to GRPO too


@pytest.mark.parametrize(
    "argv, line", [(["--set", "NOPE=1"], "--set wants NAME=VALUE"), (["--arms", "coda,gipgo"], "unknown arm(s) gipgo")]
)
def test_bad_arguments_are_one_line(argv, line, capsys):
    assert coda.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert line in err and len(err.splitlines()) == 1


@dataclass
class Page:
    """A layout as bench.grounding sees it: its elements (screen pixels) and screen."""

    elements: list
    screen: tuple = (160, 210)
    instruction: str = 'Click on the "OK" button.'
    extra: dict = field(init=False)

    def __post_init__(self):
        self.extra = {"elements": self.elements}


def _page(ok_at: int) -> Page:
    return Page([Element(tag="button", box=(ok_at, 50, 20, 10), text="OK"),
                 Element(tag="button", box=(100 - ok_at, 90, 20, 10), text="Cancel")])  # fmt: skip


def test_a_thought_is_played_on_the_layout_it_is_scored_on_so_naming_one_element_everywhere_is_blind():
    pages = [_page(10), _page(60)]
    assert planner_click('Thought: click "OK"\nAction: click', pages[1], 1) == (70.5, 55.5)  # the centre, task px
    assert planner_click("Thought: hmm\nAction: click", pages[0], 1) is None  # names nothing: the stand-in waits
    targets = [(10, 50, 30, 60), (60, 50, 80, 60)]  # both layouts want "OK", at different places
    blind = gap_interval(text_hit_matrix([['click "OK"']] * 2, pages, targets, 1, planner_click))
    assert blind["own"] == 1.0 and blind["gap"] == 0.0  # the same name everywhere: a hit everywhere, no gap
    wants = [(10, 50, 30, 60), (40, 90, 60, 100)]  # layout 0 wants OK, layout 1 Cancel; a reader names each
    reads = gap_interval(text_hit_matrix([['click "OK"'], ['click "Cancel"']], pages, wants, 1, planner_click))
    assert reads["own"] == 1.0 and reads["gap"] == 1.0


def test_the_planners_references_a_fixed_name_and_the_quoted_one():
    ok = [(_page(10), (10, 50, 30, 60)), (_page(60), (60, 50, 80, 60))]  # the target is "OK" on both
    cancel = _page(10)
    cancel.instruction = 'Click on the "Cancel" button.'
    train = [*ok, ok[0]]  # "OK" wins the training layouts 3 to 0
    heldout = [*ok, (cancel, (90, 90, 110, 100))]  # the third wants Cancel, at (90, 90)
    refs = coda.name_baselines(train, heldout, 1)
    assert refs["fixed_name"] == "OK" and refs["fixed_train_rate"] == 1.0
    assert refs["fixed_heldout_rate"] == pytest.approx(2 / 3)  # blind to the instruction: misses the Cancel layout
    assert refs["quoted_heldout_rate"] == 1.0  # copying the quote through the stand-in hits all three
    cancel.instruction = "Click the button."  # no quote: nothing named, no hit
    assert coda.name_baselines(train, heldout, 1)["quoted_heldout_rate"] == pytest.approx(2 / 3)


def test_main_runs_both_arms_seed_for_seed_and_reports(tmp_path, monkeypatch, capsys):
    calls = []
    gap = {"own": 0.3, "cross": 0.2, "gap": 0.1, "gap_low": 0.0, "gap_high": 0.2, "layouts": 4, "samples": 4}

    def train(out, *overrides, recipe, **settings):
        calls.append((out.name, recipe.name, overrides, settings["SEED"], settings["MODEL_PATH"]))
        return LearningRun([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.5], 60.0, [{}] * 6)

    monkeypatch.setattr(coda, "train", train)
    monkeypatch.setattr(coda, "trained_grounding", lambda run_dir, setting, planner: {**gap, "planner": planner})
    monkeypatch.setattr(coda, "grounding", lambda *a, planner, **kw: {**gap, "planner": planner})
    monkeypatch.setattr(coda, "require", lambda *a: None)
    refs = {"fixed_name": "OK", "fixed_train_rate": 0.3, "fixed_heldout_rate": 0.25, "quoted_heldout_rate": 0.97}
    monkeypatch.setattr(coda, "measure_name_baselines", lambda setting: refs)
    monkeypatch.setattr("verl_cua.eval.blind_baseline.blind_baseline", lambda *a: {
        "point": [1, 2], "train_rate": 0.2, "heldout_rate": 0.19, "uniform_rate": 0.05})  # fmt: skip
    monkeypatch.setattr("verl_cua.testing.planner_reading.planner_model", lambda **kw: tmp_path / "model")
    assert coda.main(["--seeds", "2", "--steps", "6", "--out", str(tmp_path), "--no-plot"]) == 0
    assert [(c[0], c[1], c[3]) for c in calls] == [
        ("grpo_alone-seed0", "run_tiny_grpo_miniwob_cpu.sh", 0), ("coda-seed0", "run_tiny_coda_miniwob_cpu.sh", 0),
        ("grpo_alone-seed1", "run_tiny_grpo_miniwob_cpu.sh", 1), ("coda-seed1", "run_tiny_coda_miniwob_cpu.sh", 1),
    ]  # fmt: skip
    assert len({c[4] for c in calls}) == 1  # one model for both arms
    record = json.loads((tmp_path / "coda.json").read_text())
    assert [(r["estimator"], r["grounding"]["planner"]) for r in record["runs"]] == [
        ("grpo_alone", False), ("coda", True), ("grpo_alone", False), ("coda", True)]  # fmt: skip
    assert record["initial_grounding"]["coda"]["planner"] and not record["initial_grounding"]["grpo_alone"]["planner"]
    out = capsys.readouterr().out
    assert "grpo_alone" in out and "coda" in out and "blind baseline" in out and "initial model as coda" in out
    assert "a fixed name ('OK', fitted on 200 training layouts) 0.25" in out and "quoted name 0.97" in out
    assert record["name_baselines"] == refs
    calls.clear()
    assert coda.main(["--seeds", "2", "--steps", "6", "--out", str(tmp_path), "--no-plot"]) == 0
    assert calls == []  # a rerun with the same setting keeps the finished runs
