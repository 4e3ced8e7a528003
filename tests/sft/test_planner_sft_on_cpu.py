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
REDUNDANT = [("Scroll the unapproved page down once.", "scroll(start_box='(320,180)', direction='down')", "act")]


def parsed_step(thought: str, executed: str, kind: str) -> ParsedAction:
    """The parsed action gui_agent's planner loop records for a step (`planner.loop._decide`)."""
    if kind == "answer":
        answer = GUIAction("done", text=executed.removeprefix("ANS "))
        return ParsedAction(valid=True, actions=[answer], thought=thought, format="planner")
    if kind == "rejected":
        return ParsedAction(valid=False, error="the executor rejected the plan: HTTP 400", format="planner")
    parsed = parse_action(f"Thought: {thought}\nAction: {executed}", format="uitars", screen=SCREEN, image=SEEN)
    parsed.thought = thought
    assert parsed.valid, parsed.error
    return parsed


def planner_episode(trace: Path, task: str, uid: str, steps, outcome: str, *, offset: int = 0) -> str:
    """One planner-mode episode in a training trace (`EpisodeTrace`, as the planner loop writes it: the model text is
    `"{thought}\\nAction: {executed}"`); returns its episode key in the trace."""
    kwargs = {"uid": uid, "session_id": 0, "global_steps": 1, "extra_info": {"task_id": task}}
    ep_trace = open_trace({"dir": str(trace)}, kwargs, task)
    for i, (thought, executed, kind) in enumerate(steps):
        ep_trace.step(seen=screenshot(offset + i, SEEN), screen=SCREEN, text=f"{thought}\nAction: {executed}",
                      parsed=parsed_step(thought, executed, kind), info={}, reward=0.0, model_s=0.1,
                      env_s=0.1)  # fmt: skip
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
