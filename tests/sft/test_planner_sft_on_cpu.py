"""CODA Stage 2 on the SFT ladder: planner-mode training traces (written with the trainer's own trace classes, as
gui_agent's planner loop writes them) become `verl-cua sft-data --planner coda` rows: one per kept step, the prompt
`planner_messages` at that step (at most two screenshots, the `Task:` line, the history as text), the target the
step's thought and executed action; success or a judge file selects the episodes (an unapproved one never appears);
verl's own SFT dataset reads the rows. The trainer's own step is not run here, because the dataset check covers what
the trainer reads (its tokens, loss mask and screenshots)."""

import io
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from PIL import Image
from transformers import AutoProcessor

from verl_cua.actions import parse_action
from verl_cua.actions.conversation import model_image_size
from verl_cua.actions.planner import CODA, PlanStep, planner_messages, split_plan, step_reply
from verl_cua.actions.types import GUIAction, ParsedAction
from verl_cua.cli import main as cli
from verl_cua.envs.trajectory import RUN, EpisodeWriter, step_record, write_json
from verl_cua.integrations.verl.trace.episodes import open_trace
from verl_cua.sft.card import read_card
from verl_cua.sft.data import SFTDataConfig, build, verl_messages
from verl_cua.testing.viewer_runs import screenshot

SCREEN = (1280, 720)  # the desktop
SEEN = (640, 360)  # the screenshots as the source planner saw them (what the trace keeps)
INSTRUCTION = "Type hello into the search box, then say how many results there are."
REJECTED = "(rejected: HTTP 400: the request is too long)"
GOOD = [  # (thought, executed action text, kind): a click, a plan the executor rejected, typing, an ANS answer
    ("Click the search box at the top to focus it.", "click(start_box='(320,40)')", "act"),
    ("Type hello into the focused search box, then press enter to search.", REJECTED, "rejected"),
    ("Type hello into the focused search box.", "type(content='hello')", "act"),
    ("The page says 42 results, so I answer 42.", "ANS 42", "answer"),
]
TABLE = "Elements on the screen:\nid\trole\tname\n1\ttextbox\tSearch\n2\tbutton\tGo"  # a step's `elements_text`
OWN = ["click(start_box='(9,9)')", "type(content='bye')", "hotkey(key='ctrl a')", "ANS 42"]  # the planner's own
REDUNDANT = [("Scroll the unapproved page down once.", "scroll(start_box='(320,180)', direction='down')", "act")]


def parsed_step(thought: str, executed: str, kind: str) -> ParsedAction:
    """The parsed action gui_agent's planner loop records for a step (the planner loop's `_decide`)."""
    if kind == "answer":
        answer = GUIAction("done", text=executed.removeprefix("ANS "))
        return ParsedAction(valid=True, actions=[answer], thought=thought, format="planner")
    if kind == "rejected":
        return ParsedAction(valid=False, error="the executor rejected the plan: HTTP 400", format="planner")
    parsed = parse_action(f"Thought: {thought}\nAction: {executed}", format="uitars", screen=SCREEN, image=SEEN)
    parsed.thought = thought
    assert parsed.valid, parsed.error
    return parsed


def planner_episode(trace: Path, task: str, uid: str, steps, outcome: str, *, offset: int = 0, reads=None) -> str:
    """One planner-mode episode in a training trace (`EpisodeTrace`, as the planner loop writes it: the model text is
    `"{thought}\\nAction: {executed}"`, `reads` each step's element table or None); returns its episode key."""
    kwargs = {"uid": uid, "session_id": 0, "global_steps": 1, "extra_info": {"task_id": task}}
    ep_trace = open_trace({"dir": str(trace)}, kwargs, task)
    for i, (thought, executed, kind) in enumerate(steps):
        ep_trace.step(seen=screenshot(offset + i, SEEN), screen=SCREEN, text=f"{thought}\nAction: {executed}",
                      parsed=parsed_step(thought, executed, kind), info={}, reward=0.0, model_s=0.1, env_s=0.1,
                      read=None if reads is None else reads[i])  # fmt: skip
    score = 1.0 if outcome == "success" else 0.0
    ep = SimpleNamespace(instruction=INSTRUCTION, infra_failure=outcome == "infra", success=outcome == "success",
                         score=score, steps=len(steps), invalid=sum(k == "rejected" for *_, k in steps),
                         infra_error="executor: down" if outcome == "infra" else None, generate_seconds=0.1,
                         env_seconds=0.1)  # fmt: skip
    ep_trace.finish(ep, 0.0 if outcome == "infra" else score, screenshot(99, SEEN), "done")
    return ep_trace.dir.relative_to(trace).as_posix()


def write_trace(trace: Path) -> dict[str, str]:
    """A success (with a rejected plan), a failure, a success the judge calls redundant, an unjudged success and an
    infra failure; {name: episode key}."""
    episodes = {
        "good": ("search-seed1", "aaaa1111-0000", GOOD, "success", 0),
        "failed": ("search-seed2", "bbbb2222-0000", GOOD[:1], "failure", 10),
        "redundant": ("search-seed3", "cccc3333-0000", REDUNDANT * 2, "success", 20),
        "unjudged": ("search-seed4", "dddd4444-0000", REDUNDANT, "success", 30),
        "infra": ("search-seed5", "eeee5555-0000", GOOD[:1], "infra", 40),
    }
    return {name: planner_episode(trace, *spec[:4], offset=spec[4]) for name, spec in episodes.items()}


@pytest.fixture(scope="module")
def model():
    from verl_cua.testing.tiny_models import build_tiny_model

    path = str(build_tiny_model("qwen25vl"))
    return path, AutoProcessor.from_pretrained(path)


@pytest.fixture
def trace(tmp_path):
    return tmp_path / "trace", write_trace(tmp_path / "trace")


def judge_file(path: Path, keys: dict[str, str]) -> Path:
    """CODA's judge schema: the good episode clean, the failure judged correct, the redundant one with a redundant
    step; the unjudged success is not in the file."""
    clean = {"Correctness": True, "Redundant": [], "First_Error_Step": None}
    entries = [{"episode": keys["good"], **clean}, {"episode": keys["failed"], **clean},
               {"episode": keys["redundant"], **clean, "Redundant": [2]}]  # fmt: skip
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def make(model, tmp_path, trace_dir, **kwargs):
    path, processor = model
    out = tmp_path / "planner.parquet"
    config = SFTDataConfig(runs=[str(trace_dir)], format="uitars", model=path, out=str(out), planner="coda", **kwargs)
    return build(config, processor), pd.read_parquet(out), out


def decoded(cell) -> Image.Image:
    return Image.open(io.BytesIO(cell["bytes"])).convert("RGB")


def by_step(rows: pd.DataFrame, source: str) -> dict[int, tuple[list[dict], list]]:
    """{recorded step index: (messages, images)} of one episode's rows."""
    mine = rows[rows["source"] == source]
    return {int(r["step_index"]): (r["messages"].tolist(), list(r["images"])) for _, r in mine.iterrows()}


def test_success_rows_are_the_planners_context_per_kept_step_and_its_reply(model, tmp_path, trace):
    trace_dir, keys = trace
    start = time.perf_counter()
    card, rows, _out = make(model, tmp_path, trace_dir)
    seconds = time.perf_counter() - start
    good = f"{trace_dir}::{keys['good']}"
    assert set(rows["source"]) == {good, f"{trace_dir}::{keys['redundant']}", f"{trace_dir}::{keys['unjudged']}"}
    assert card["skipped"] == {"infra_failure": 1, "not a success": 1}  # the failure and the infra failure
    steps = by_step(rows, good)
    assert sorted(steps) == [0, 2, 3]  # the rejected plan (step 2 of 4) is no target
    image_size = model_image_size(model[1].image_processor, SCREEN, 50176)
    shots = [screenshot(i, SEEN).resize(image_size) for i in range(len(GOOD))]
    for index, (messages, images) in steps.items():
        thought, executed, _ = GOOD[index]
        assert messages[-1] == {"role": "assistant", "content": f"{thought}\nAction: {executed}"}
        assert split_plan(messages[-1]["content"], CODA).thought == thought  # the planner loop reads it back
        history = [PlanStep(t, e, shots[i]) for i, (t, e, _) in enumerate(GOOD[:index])]
        want, want_images = verl_messages(planner_messages(CODA, INSTRUCTION, history, shots[index]))
        assert messages[:-1] == want and len(images) == len(want_images) == min(index + 1, 2)
        assert [decoded(c).tobytes() for c in images] == [i.tobytes() for i in want_images]  # previous, current
        assert sum(m["content"].count("<image>") for m in messages) == len(images)
        assert messages[-2]["content"].endswith(f"\nTask: {INSTRUCTION}") and messages[0]["role"] == "system"
        assert [m["content"] for m in messages[1:-1] if m["role"] == "assistant"] == [step_reply(h) for h in history]
    history = [m["content"] for m in steps[3][0][1:-1] if m["role"] == "assistant"]
    assert history[1] == f"{GOOD[1][0]}\nAction: {REJECTED}"  # the rejected plan stays in the later history
    assert card["planner"]["spec"] == "coda" and card["planner"]["shown_screenshots"] == 2
    assert card["rows_layout"] == "step" and card["history_images"] == 2 and card["rows"] == len(rows) == 3 + 2 + 1
    assert card["invalid_steps"]["count"] == 1 and card["invalid_steps"]["steps"] == [f"{good} step 2"]
    assert seconds < 30, seconds


def test_a_step_that_read_an_element_table_shows_it_before_the_task_line(model, tmp_path):
    """The planner saw the step's element table (`elements_text`, an a11y-tree observation) before its `Task:` line
    (`planner_messages`' fifth argument): the row's prompt shows it there; a step that read none shows none."""
    trace_dir = tmp_path / "read"
    reads = [TABLE, None, TABLE.replace("Search", "Search (focused)"), None]  # the last kept step: the control
    key = planner_episode(trace_dir, "search-seed1", "ffff6666-0000", GOOD, "success", reads=reads)
    _card, rows, _out = make(model, tmp_path, trace_dir)
    steps = by_step(rows, f"{trace_dir}::{key}")
    assert sorted(steps) == [0, 2, 3]
    image_size = model_image_size(model[1].image_processor, SCREEN, 50176)
    shots = [screenshot(i, SEEN).resize(image_size) for i in range(len(GOOD))]
    for index, (messages, _images) in steps.items():
        history = [PlanStep(t, e, shots[i]) for i, (t, e, _) in enumerate(GOOD[:index])]
        want, _ = verl_messages(planner_messages(CODA, INSTRUCTION, history, shots[index], reads[index]))
        assert messages[:-1] == want
    current = steps[0][0][-2]["content"]  # the last user turn: screenshot, user text, the table, the task line
    assert current.count(TABLE) == 1 and current.endswith(f"{TABLE}\nTask: {INSTRUCTION}")
    later = json.dumps(steps[2][0])
    assert json.dumps(reads[2])[1:-1] in later and json.dumps(TABLE)[1:-1] not in later  # its own screen's only
    assert "Elements on the screen:" not in json.dumps(steps[3][0])  # the negative control: it read no table


def eval_run(run: Path) -> str:
    """A `verl-cua eval --planner coda` episode of GOOD, each line as `eval/planner_episode.py` writes it: the model
    text is the planner's raw reply (`Thought:`, then its own action, `OWN`), the executor record's `executed` the
    action carried out, the thought `action.thought`; the first step read TABLE. Returns its episode key."""
    write_json(run / RUN, {"model": "planner", "format": "qwen25vl", "planner": "coda"})
    writer = EpisodeWriter(run / "chrome" / "search")
    for i, ((thought, executed, kind), own) in enumerate(zip(GOOD, OWN, strict=True)):
        outcome = {"act": "action", "rejected": "rejected", "answer": "answer"}[kind]
        executor = {"kind": "openai", "model": "tars", "outcome": outcome, "executed": executed}
        parsed = parsed_step(thought, executed, kind)
        parsed.thought = thought  # eval keeps the thought on a rejected plan too
        writer.step(step_record(step=i + 1, screenshot=writer.screenshot(i, screenshot(i, SEEN)), screen=SCREEN,
                                model_text=f"Thought: {thought}\nAction: {own}", action=parsed.to_dict(),
                                valid=parsed.valid, error=parsed.error, infra_failure=False, executor=executor,
                                elements_text=TABLE if i == 0 else None))  # fmt: skip
    writer.finish({"task": "chrome/search", "env": "osworld", "domain": "chrome", "task_id": "search",
                   "instruction": INSTRUCTION, "model": "planner", "planner": "coda", "status": "success",
                   "score": 1.0, "steps": len(GOOD)})  # fmt: skip
    return "chrome/search"


def test_an_eval_runs_rows_train_the_executors_action_not_the_planners_own(model, tmp_path):
    """An eval run's model text is the planner's raw reply, its own (discarded) action included: the rows take the
    executor's action (`executor.executed`) and the thought (`action.thought`), the same rows as a training trace of
    the same steps gives; the planner's own actions appear nowhere."""
    run = tmp_path / "eval"
    key = eval_run(run)
    lines = (run / key / "trajectory.jsonl").read_text()
    assert all(json.dumps(own)[1:-1] in lines for own in OWN[:3])  # the control: the lines hold the planner's own
    card, rows, _out = make(model, tmp_path, run)
    steps = by_step(rows, f"{run}::{key}")
    assert sorted(steps) == [0, 2, 3] and card["invalid_steps"]["count"] == 1  # the rejected plan: no target
    image_size = model_image_size(model[1].image_processor, SCREEN, 50176)
    shots = [screenshot(i, SEEN).resize(image_size) for i in range(len(GOOD))]
    for index, (messages, _images) in steps.items():
        thought, executed, _ = GOOD[index]
        assert messages[-1] == {"role": "assistant", "content": f"{thought}\nAction: {executed}"}
        history = [PlanStep(t, e, shots[i]) for i, (t, e, _) in enumerate(GOOD[:index])]
        read = TABLE if index == 0 else None
        assert messages[:-1] == verl_messages(planner_messages(CODA, INSTRUCTION, history, shots[index], read))[0]
    text = json.dumps([m.tolist() for m in rows["messages"]])
    assert not any(json.dumps(own)[1:-1] in text for own in OWN[:3])
    replies = [m["content"] for messages, _ in steps.values() for m in messages if m["role"] == "assistant"]
    assert not any(r.startswith("Thought:") for r in replies)  # no raw planner reply is a turn
    assert f"{GOOD[1][0]}\nAction: {REJECTED}" in replies  # the rejected plan stays in the later history


def test_a_judge_file_keeps_its_clean_episodes_and_no_unapproved_step_appears(model, tmp_path, trace):
    trace_dir, keys = trace
    judge = judge_file(tmp_path / "judge.jsonl", keys)
    card, rows, _out = make(model, tmp_path, trace_dir, select="judge", judge=str(judge))
    assert set(rows["source"]) == {f"{trace_dir}::{keys['good']}", f"{trace_dir}::{keys['failed']}"}
    assert card["skipped"] == {"infra_failure": 1, "judged with redundant steps": 1, "not judged": 1}
    assert card["judge"] == str(judge) and len(rows) == 3 + 1
    text = json.dumps([m.tolist() for m in rows["messages"]])
    assert "unapproved" not in text and "scroll(" not in text  # the negative control: its steps are nowhere
    # the control: the same episodes are rows under success selection, so the judge is what left them out
    _card, rows, _out = make(model, tmp_path, trace_dir)
    assert "unapproved" in json.dumps([m.tolist() for m in rows["messages"]])


def test_the_cli_builds_planner_rows_and_names_what_does_not_apply(model, tmp_path, trace, capsys):
    trace_dir, keys = trace
    judge = judge_file(tmp_path / "judge.jsonl", keys)
    out = tmp_path / "cli.parquet"
    base = ["sft-data", str(trace_dir), "--model", model[0], "--out", str(out)]
    assert cli([*base, "--format", "uitars", "--planner", "coda", "--select", "judge", "--judge", str(judge)]) == 0
    printed = capsys.readouterr().out
    assert "4 rows (step) from 2 episodes, 4 steps, " in printed and "for the coda planner (uitars actions)" in printed
    assert read_card(out)["planner"]["target"] == "{thought}\\nAction: {executed action}"
    errors = {
        ("--planner", "nope"): "unknown planner spec 'nope'",
        ("--planner", "coda", "--rows", "episode"): "rows are one per step",
        ("--planner", "coda", "--history-images", "3"): "shows 2 screenshots",
        ("--planner", "coda", "--no-thoughts"): "drop --no-thoughts",
        ("--select", "judge"): "--select judge needs a judge file",
        ("--judge", str(judge)): "a judge file is read only with --select judge",
        ("--planner", "coda", "--select", "judge", "--judge", str(tmp_path / "no.jsonl")): "does not exist",
    }
    for extra, message in errors.items():
        assert cli([*base, "--format", "uitars", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (extra, err)
    assert cli([*base, "--format", "pyautogui", "--planner", "coda"]) == 2  # the action lines are uitars
    assert "action lines in uitars, not --format pyautogui" in capsys.readouterr().err


def test_verls_sft_dataset_trains_the_rows_assistant_turns_only(model, tmp_path, trace):
    """verl's MultiTurnSFTDataset tokenizes the rows with their screenshots; it trains every assistant turn (the
    target and the history's replies, all in the one `step_reply` form) and no system or user token."""
    dataset_module = pytest.importorskip("verl.utils.dataset.multiturn_sft_dataset")
    trace_dir, _keys = trace
    _card, rows, out = make(model, tmp_path, trace_dir)
    path, processor = model
    config = {"pad_mode": "no_padding", "max_length": 1 << 20, "messages_key": "messages", "image_key": "images"}
    dataset = dataset_module.MultiTurnSFTDataset(str(out), processor.tokenizer, config=config, processor=processor)
    for i in range(len(rows)):
        item, messages = dataset[i], rows.iloc[i]["messages"].tolist()
        trained = processor.tokenizer.decode(item["input_ids"][item["loss_mask"].bool()])
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert all(reply in trained for reply in replies) and INSTRUCTION not in trained
        assert "Task:" not in trained and "Output Format" not in trained
        grid = item["multi_modal_inputs"]["image_grid_thw"]
        assert int(grid.shape[0]) == len(rows.iloc[i]["images"]) <= 2
