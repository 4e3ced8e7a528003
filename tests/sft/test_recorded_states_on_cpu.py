"""CODA Stage-1 recorded states on run directories written with the project's trajectory writer: which episodes and
steps become labelled states (successes, or CODA's judge rule), their history and screenshots, the verl rows, the
judge file's one-line errors and the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from verl_cua.actions.types import GUIAction
from verl_cua.envs.trajectory import RUN, read_episode, read_result, write_index, write_json
from verl_cua.sft.judge import read_judgements
from verl_cua.sft.recorded_states import collect_states, main, recorded_states, state_rows
from verl_cua.testing.viewer_runs import act, screenshot, write_episode

SIZE = (64, 36)  # the screenshots' size (the actions' screen stays viewer_runs.SCREEN)
ROOT = Path(__file__).resolve().parents[2]
CLICK, TYPE, KEYS = act("click", x=960, y=540), act("type", text="hello"), act("key", keys=["ctrl", "s"])
SUCCESSES = {"chrome/good": 3, "chrome/good2": 2, "chrome/good3": 2, "chrome/gaps": 3}  # key -> steps
CLEAN = {"Correctness": True, "Redundant": [], "First_Error_Step": None, "Correct_Action": None}


def write_run(run: Path) -> Path:
    """Four successes (one with an invalid step 2), a failure, an infra failure and an unfinished episode."""
    write_episode(run, "chrome/good", [[CLICK], [TYPE], [KEYS]], "success", image_size=SIZE)
    write_episode(run, "chrome/good2", [[CLICK], [act("done")]], "success", image_size=SIZE)
    write_episode(run, "chrome/good3", [[TYPE], [KEYS]], "success", image_size=SIZE)
    write_episode(run, "chrome/gaps", [[CLICK], [], [TYPE]], "success", image_size=SIZE)
    write_episode(run, "chrome/bad", [[CLICK], [KEYS]], "failure", image_size=SIZE)
    write_episode(run, "chrome/broken", [[CLICK]], "infra_failure", image_size=SIZE)
    write_episode(run, "chrome/cut", [[CLICK]], None, image_size=SIZE)
    return run


@pytest.fixture
def run(tmp_path) -> Path:
    return write_run(tmp_path / "run")


def judge_file(path: Path, entries: dict[str, dict], **extra) -> Path:
    path.write_text("".join(json.dumps({"episode": key, **value, **extra}) + "\n" for key, value in entries.items()))
    return path


def keys(states) -> set[tuple[str, int]]:
    return {(Path(s.episode).relative_to(Path(s.episode).parents[1]).as_posix(), s.step) for s in states}


def test_success_labels_are_the_successful_episodes_valid_steps_with_their_own_actions(run):
    states, skipped = collect_states([run])
    want = {(k, i) for k, n in SUCCESSES.items() for i in range(1, n + 1)} - {("chrome/gaps", 2)}
    assert keys(states) == want and len(states) == len(want)
    assert skipped == {"episode: not a success": 1, "episode: infra_failure": 1, "episode: unfinished": 1,
                       "step: invalid": 1}  # fmt: skip
    for s in states:
        line = read_episode(s.episode).steps[s.step - 1]
        assert s.target == GUIAction.from_dict(line["action"]["actions"][0]).to_dict() == line["action"]["actions"][0]
        assert s.label_source == "success" and s.env == "osworld" and s.screen == (1920, 1080)
        assert s.task == read_result(s.episode)["task"] and s.instruction == "Sum column A into A10."
        assert len(s.history) == s.step - 1


def test_history_and_screenshots_point_at_the_right_steps(run):
    states = {(Path(s.episode).name, s.step): s for s in recorded_states([run])}
    first, last = states["gaps", 1], states["gaps", 3]
    assert first.history == () and first.screenshots[0] is None
    assert last.history == (
        ("Step 1: I act on the button.", "pyautogui.click(960, 540)"),
        ("Thought: step 2.\nAction: ...", "invalid: no action found in the output"),
    )
    assert states["good", 3].history[1] == ("Step 2: I act on the button.", "pyautogui.write('hello')")
    for s in states.values():
        previous, current = s.screenshots
        assert Path(current) == run / "chrome" / Path(s.episode).name / f"step_{s.step - 1:03d}.png"
        assert Image.open(current).tobytes() == screenshot(s.step - 1, SIZE).tobytes()
        if s.step > 1:
            assert Path(previous).name == f"step_{s.step - 2:03d}.png" and Path(previous).is_file()
            assert Image.open(previous).tobytes() == screenshot(s.step - 2, SIZE).tobytes()
    short = {(Path(s.episode).name, s.step): s for s in recorded_states([run], max_history=1)}
    assert short["gaps", 3].history == last.history[-1:] and short["gaps", 1].history == ()


def test_judge_labels_follow_codas_rule_and_differ_from_success_labels(run, tmp_path):
    judged = {
        "chrome/good": CLEAN,
        "chrome/good2": {**CLEAN, "Correctness": False},
        "chrome/good3": {**CLEAN, "Redundant": [1]},
        "chrome/gaps": {**CLEAN, "First_Error_Step": 2},
        "chrome/bad": {**CLEAN, "First_Error_Step": ""},  # the judge, not the evaluator's status, decides
        "chrome/broken": CLEAN,  # an infra failure is never used
    }
    states, skipped = collect_states([run], labels="judge", judge_file=judge_file(tmp_path / "judge.jsonl", judged))
    assert keys(states) == {("chrome/good", 1), ("chrome/good", 2), ("chrome/good", 3), ("chrome/bad", 1),
                            ("chrome/bad", 2)}  # fmt: skip
    assert {s.label_source for s in states} == {"judge"}
    assert skipped == {"episode: judged not correct": 1, "episode: judged with redundant steps": 1,
                       "episode: judged with a first error step": 1, "episode: infra_failure": 1,
                       "episode: unfinished": 1}  # fmt: skip
    by_success = keys(recorded_states([run]))  # the negative control: the same episodes, labelled by success
    assert {k for k, _ in by_success} - {k for k, _ in keys(states)} == {"chrome/good2", "chrome/good3", "chrome/gaps"}
    assert {k for k, _ in keys(states)} - {k for k, _ in by_success} == {"chrome/bad"}
    mapping = tmp_path / "judge.json"  # the .json form: {episode: judgement}
    mapping.write_text(json.dumps({"chrome/good": CLEAN}))
    assert keys(recorded_states([run], labels="judge", judge_file=mapping)) == keys(states) - {
        ("chrome/bad", 1),
        ("chrome/bad", 2),
    }


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"episode": "chrome/good", "Correctness": true', ""], "line 1: not JSON"),
        ([json.dumps({"episode": "chrome/good", **CLEAN}), "[1]"], "line 2: a judgement is a JSON object"),
        ([json.dumps({"episode": "chrome/good", **CLEAN, "Correctness": "yes"})], "line 1: Correctness must be"),
        ([json.dumps({"episode": "chrome/good", **CLEAN, "Redundant": "2"})], "line 1: Redundant must be a list"),
        ([json.dumps({"episode": "chrome/good", **CLEAN, "Redundant": [0]})], "line 1: Redundant must be a list"),
        ([json.dumps({"episode": "chrome/good", **CLEAN, "First_Error_Step": 0})], "line 1: First_Error_Step must"),
        ([json.dumps({"episode": "chrome/good", "Correctness": True, "Redundant": []})], "missing First_Error_Step"),
        ([json.dumps({"episode": "/abs/good", **CLEAN})], "line 1: 'episode' must be an episode directory"),
        (["", json.dumps({"episode": "chrome/nope", **CLEAN})], "line 2: episode 'chrome/nope' is in none of"),
        ([json.dumps({"episode": "chrome/good", **CLEAN})] * 2, "line 2: episode 'chrome/good' is judged twice"),
    ],
)
def test_bad_judge_lines_are_one_line_naming_the_line(run, tmp_path, lines, message):
    path = tmp_path / "judge.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        recorded_states([run], labels="judge", judge_file=path)
    assert message in str(info.value) and "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_key_in_several_runs_needs_the_judgements_run(tmp_path):
    one, two = write_run(tmp_path / "one"), tmp_path / "two"
    write_episode(two, "chrome/good", [[CLICK]], "success", image_size=SIZE)
    path = judge_file(tmp_path / "judge.jsonl", {"chrome/good": CLEAN})
    with pytest.raises(ValueError, match='in several runs .* add "run" to say which'):
        recorded_states([one, two], labels="judge", judge_file=path)
    states = recorded_states([one, two], labels="judge", judge_file=judge_file(path, {"chrome/good": CLEAN}, run="two"))
    assert [(Path(s.episode).parents[1].name, s.step) for s in states] == [("two", 1)]
    assert read_judgements(path)["two", "chrome/good"].clean


def test_missing_runs_screenshots_and_bad_options_are_one_line_errors(run, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        recorded_states([run, tmp_path / "nowhere"])  # a requested run is never dropped silently
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no episode"):
        recorded_states([tmp_path / "empty"])
    with pytest.raises(ValueError, match="valid: success, judge"):
        recorded_states([run], labels="all")
    with pytest.raises(ValueError, match="needs a judge file"):
        recorded_states([run], labels="judge")
    with pytest.raises(FileNotFoundError, match="judge file .* does not exist"):
        recorded_states([run], labels="judge", judge_file=tmp_path / "none.jsonl")
    (run / "chrome" / "good" / "step_001.png").unlink()
    with pytest.raises(ValueError, match=r"chrome/good: step 2: screenshot .*step_001.png is missing"):
        recorded_states([run])


def test_training_trace_index_and_its_step_run_json(tmp_path):
    step = tmp_path / "trace" / "step_000001"
    write_episode(step, "chrome/kept", [[CLICK], [TYPE]], "success", image_size=SIZE, trace=True)
    write_episode(step, "chrome/rerun", [[CLICK]], "success", image_size=SIZE, trace=True)  # not in the index
    write_index(step, ["chrome/kept"])
    write_json(step / RUN, {"env": "miniwob"})
    result = read_result(step / "chrome" / "kept")
    result.pop("env")  # as the trainer's trace writes it: the env is in the step's run.json
    write_json(step / "chrome" / "kept" / "result.json", result)
    states = recorded_states([tmp_path / "trace"])
    assert [(Path(s.episode).name, s.step, s.env) for s in states] == [("kept", 1, "miniwob"), ("kept", 2, "miniwob")]


def test_rows_are_json_and_their_ground_truth_is_the_target(run):
    states = recorded_states([run])
    rows = state_rows(states, agent_name="coda_planner")
    assert json.loads(json.dumps(rows)) == rows
    for i, (row, s) in enumerate(zip(rows, states, strict=True)):
        assert GUIAction.from_dict(json.loads(row["reward_model"]["ground_truth"])) == GUIAction.from_dict(s.target)
        assert row["reward_model"]["style"] == "rule" and row["agent_name"] == "coda_planner"
        assert row["data_source"] == "recorded_states" and row["prompt"][0]["role"] == "user"
        extra = row["extra_info"]
        assert (extra["task"], extra["env"], extra["index"]) == (s.task, s.env, i)
        coda = extra["coda_state"]
        assert coda["step"] == s.step and len(coda["history"]) == s.step - 1 and coda["screen"] == [1920, 1080]
        assert coda["screenshots"] == {"previous": s.screenshots[0], "current": s.screenshots[1]}


def test_cli_writes_parquet_or_jsonl_and_prints_one_line(run, tmp_path, capsys, monkeypatch):
    out = tmp_path / "rows.parquet"
    assert main([str(run), "--labels", "success", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and line.startswith("9 states from 4 episodes of 1 runs -> ")
    assert "1 episode not a success" in line and "1 step invalid" in line
    frame = pd.read_parquet(out)
    assert len(frame) == 9 and list(frame["extra_info"].map(lambda e: e["index"])) == list(range(9))
    gt = [GUIAction.from_dict(json.loads(r["ground_truth"])).to_dict() for r in frame["reward_model"]]
    assert gt == [s.target for s in recorded_states([run])]
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # no parquet engine: jsonl beside, with the install line
    assert main([str(run), "--out", str(tmp_path / "other.parquet")]) == 0
    captured = capsys.readouterr()
    assert "pip install" in captured.err and len(captured.err.strip().splitlines()) == 1
    rows = [json.loads(x) for x in (tmp_path / "other.jsonl").read_text().splitlines()]
    assert len(rows) == 9 and str(tmp_path / "other.jsonl") in captured.out


def test_cli_bad_input_is_one_line_and_exit_2(run, tmp_path, capsys):
    bad = tmp_path / "judge.jsonl"
    bad.write_text(json.dumps({"episode": "chrome/good", **CLEAN, "Correctness": 1}) + "\n")
    cases = [
        ([str(run), "--labels", "judge", "--judge", str(bad), "--out", str(tmp_path / "r.jsonl")], "Correctness"),
        ([str(run), str(tmp_path / "missing"), "--out", str(tmp_path / "r.jsonl")], "does not exist"),
        ([str(run), "--labels", "judge", "--out", str(tmp_path / "r.jsonl")], "needs a judge file"),
        ([str(run), "--out", str(tmp_path / "r.csv")], "valid: .parquet, .jsonl"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and message in err and err.startswith("verl-cua recorded-states: ")
    assert not (tmp_path / "r.jsonl").exists()


def test_module_runs_as_a_script(run, tmp_path):
    out = tmp_path / "rows.jsonl"
    done = subprocess.run([sys.executable, "-m", "verl_cua.sft.recorded_states", str(run), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and len(out.read_text().splitlines()) == 9


def test_a_target_box_is_the_smallest_small_element_under_the_click_and_none_for_containers():
    from verl_cua.envs.observation import Element
    from verl_cua.sft.recorded_states import target_box

    screen = (160, 210)
    page, button = Element("body", (0, 0, 160, 210)), Element("button", (40, 60, 40, 20), text="ok")
    click = {"kind": "click", "x": 50, "y": 70}
    assert target_box(click, [page, button], screen) == (40, 60, 79, 79)
    assert target_box(click, [page], screen) is None  # only the page holds it: a container is no exact hit
    assert target_box({"kind": "type", "text": "x"}, [button], screen) is None
    assert target_box({"kind": "click", "x": 10, "y": 10}, [page, button], screen) is None
