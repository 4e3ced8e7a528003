"""`verl-cua sft-data` selection and bookkeeping on run directories written with the trajectory writer: which episodes
become rows (success, reward threshold, infra failures never), deduplication, per-task caps, invalid steps dropped or
kept apart, actions a target format cannot express, the dataset card, and one-line errors for bad options."""

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from transformers import AutoProcessor

from verl_cua.actions import parse_action
from verl_cua.cli import main as cli
from verl_cua.envs.trajectory import EpisodeWriter, step_record, write_json
from verl_cua.sft.card import read_card
from verl_cua.sft.data import SFTDataConfig, build, negatives_path
from verl_cua.sft.episodes import task_names

SCREEN = (160, 210)
CLICK = "```python\npyautogui.click({}, {})\n```"
ROOT = Path(__file__).resolve().parents[2]
HUB_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME")


@pytest.fixture(scope="module")
def model():
    from verl_cua.testing.tiny_models import build_tiny_model

    path = str(build_tiny_model("qwen25vl"))
    return path, AutoProcessor.from_pretrained(path)


def episode(run, key, texts, *, status="success", score=1.0, task="click-test", colour=0, model="oracle", seed=0):
    """An eval-format episode of `task` layout `seed`: one screenshot and one trajectory line per reply (parsed as the
    harness parses it)."""
    writer = EpisodeWriter(run / key)
    for i, text in enumerate(texts):
        parsed = parse_action(text, format="pyautogui", screen=SCREEN)
        name = writer.screenshot(i, Image.new("RGB", SCREEN, (colour, 10 * i, 0)))
        writer.step(step_record(step=i + 1, screenshot=name, screen=SCREEN, model_text=text, action=parsed.to_dict(),
                                valid=parsed.valid, error=parsed.error, reward=0.0))  # fmt: skip
    score = None if status == "infra_failure" else score
    writer.finish({"task": f"{task}/seed-{seed}", "env": "miniwob", "domain": task, "task_id": f"seed-{seed}",
                   "instruction": "Click the button.", "status": status, "score": score, "steps": len(texts),
                   "model": model})  # fmt: skip
    write_json(run / "run.json", {"model": model, "format": "pyautogui"})


def make(model, tmp_path, runs, **kwargs):
    path, processor = model
    out = tmp_path / "sft.parquet"
    card = build(SFTDataConfig(runs=[str(r) for r in runs], format="pyautogui", model=path, out=str(out), **kwargs),
                 processor)  # fmt: skip
    return card, pd.read_parquet(out)


def test_selection_by_success_reward_and_never_infra_failures(model, tmp_path):
    run = tmp_path / "run"
    episode(run, "a", [CLICK.format(10, 60)], colour=1, seed=1)
    episode(run, "b", [CLICK.format(20, 60)], status="failure", score=0.5, colour=2, seed=2)
    episode(run, "c", [CLICK.format(30, 60)], status="failure", score=0.0, colour=3, seed=3)
    episode(run, "d", [CLICK.format(40, 60)], status="infra_failure", colour=4, seed=4)
    card, rows = make(model, tmp_path, [run])
    assert card["episodes"] == 1 and set(rows["source"]) == {f"{run}::a"}
    assert card["skipped"] == {"infra_failure": 1, "not a success": 2}
    card, rows = make(model, tmp_path, [run], select="reward>=0.5")
    assert sorted(rows["source"]) == [f"{run}::a", f"{run}::b"]
    card, rows = make(model, tmp_path, [run], select="all")
    assert len(rows) == 3 and card["skipped"] == {"infra_failure": 1}


def test_duplicates_and_per_task_caps(model, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    episode(one, "a", [CLICK.format(10, 60)])
    episode(two, "a", [CLICK.format(10, 60)])  # the same screen and actions in another run: a duplicate
    episode(two, "long", [CLICK.format(10, 60), CLICK.format(11, 61), CLICK.format(12, 62)], colour=9)
    episode(two, "short", [CLICK.format(50, 90)], colour=7)
    card, rows = make(model, tmp_path, [one, two])
    assert card["episodes"] == 3 and card["skipped"] == {"duplicate": 1}
    card, rows = make(model, tmp_path, [one, two], dedup=False, max_per_task=2)
    assert card["skipped"] == {"over --max-per-task": 2}  # the 3-step episode and one 1-step copy
    assert sorted(rows["turns"]) == [1, 1] and f"{two}::long" not in set(rows["source"])
    assert card["per_task"] == {"click-test": {"episodes": 2, "steps": 2}}  # MiniWoB: a task over its layouts
    episode(two, "other", [CLICK.format(60, 90)], colour=8, seed=5)  # another layout: its own cap
    card, rows = make(model, tmp_path, [one, two], dedup=False, max_per_task=2)
    assert set(rows["task"]) == {"click-test/seed-0", "click-test/seed-5"} and len(rows) == 3


def test_invalid_steps_are_dropped_or_kept_apart_never_trained(model, tmp_path):
    run = tmp_path / "run"
    episode(run, "a", [CLICK.format(10, 60), "pyautogui.clack(1, 2)", CLICK.format(30, 90)])
    card, rows = make(model, tmp_path, [run], rows="episode")
    messages = rows.iloc[0]["messages"].tolist()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert "clack" not in json.dumps(messages) and "Screenshot after step 1." in messages[3]["content"]
    assert "not a valid action" not in messages[3]["content"] and card["steps"] == 2
    assert not negatives_path(tmp_path / "sft.parquet").exists()
    card, rows = make(model, tmp_path, [run], rows="step", invalid="negatives")
    negatives = pd.read_parquet(negatives_path(tmp_path / "sft.parquet"))
    assert list(negatives["text"]) == ["pyautogui.clack(1, 2)"] and card["negatives"] == 1
    assert "clack" not in json.dumps([r.tolist() for r in rows["messages"]])
    last = rows[rows["step_index"] == 1].iloc[0]["messages"].tolist()
    prompt = last[1]["content"]
    assert "Step 1: ```python\npyautogui.click(10, 60)\n```" in prompt and "(invalid)" not in prompt


def test_invalid_steps_are_counted_and_named_as_skipped(model, tmp_path, capsys):
    run = tmp_path / "run"
    bad = ["pyautogui.clack(1, 2)", "Let me think.", "pyautogui.clack(3, 4)"]
    episode(run, "a", [CLICK.format(10, 60), bad[0], bad[1], CLICK.format(30, 90)])
    episode(run, "b", [bad[2], CLICK.format(20, 70)], colour=5, seed=1)
    error = [parse_action(text, format="pyautogui", screen=SCREEN).error for text in bad]
    card, rows = make(model, tmp_path, [run])
    assert card["skipped"] == {} and card["steps"] == 3  # no episode left out, 3 of 6 steps invalid
    assert card["invalid_steps"] == {
        "count": 3,
        "handling": "dropped",
        "errors": dict(Counter(error).most_common()),  # the parser's own errors, the two clacks' alike
        "steps": [f"{run}::a step 2", f"{run}::a step 3", f"{run}::b step 1"],
    }
    out = tmp_path / "cli.parquet"
    assert cli(["sft-data", str(run), "--format", "pyautogui", "--model", model[0], "--out", str(out)]) == 0
    skipped = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("skipped: "))
    assert error[0] == error[2] and skipped == f"skipped: 3 invalid steps dropped (2x {error[0]!r}, 1x {error[1]!r})"
    card, _ = make(model, tmp_path, [run], invalid="negatives")
    assert card["invalid_steps"]["handling"] == "kept apart as negatives" and card["negatives"] == 3


def _offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment with no hub: a closed loopback port as HF_ENDPOINT and an empty HF_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in HUB_VARS}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": path, **extra}


def test_an_unreachable_hub_model_fails_fast_in_one_line(model, tmp_path):
    run = tmp_path / "run"
    episode(run, "a", [CLICK.format(10, 60)])
    cmd = [sys.executable, "-m", "verl_cua.cli", "sft-data", str(run), "--format", "qwen3vl",
           "--model", "Qwen/Qwen3-VL-8B-Instruct", "--out", str(tmp_path / "sft.parquet")]  # fmt: skip
    for extra in ({}, {"HF_HUB_OFFLINE": "1"}):
        proc = subprocess.run(cmd, env=_offline_env(tmp_path, **extra), capture_output=True, text=True, timeout=30)
        err = proc.stderr
        assert proc.returncode == 2 and err.count("\n") == 1, err
        assert err.startswith("verl-cua sft-data: --model Qwen/Qwen3-VL-8B-Instruct: no such folder here")
        assert "pass --model DIR" in err and "HF_HUB_OFFLINE=1" in err and str(tmp_path / "hf" / "hub") in err
    assert not (tmp_path / "sft.parquet").exists()


def test_a_hub_name_in_the_cache_is_built_without_the_hub(model, tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "hub"
    snapshot = cache / "models--org--tiny" / "snapshots" / "abc123"
    shutil.copytree(model[0], snapshot)
    (cache / "models--org--tiny" / "refs").mkdir()
    (cache / "models--org--tiny" / "refs" / "main").write_text("abc123")
    for name in HUB_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    run = tmp_path / "run"
    episode(run, "a", [CLICK.format(10, 60)])
    start = time.monotonic()
    assert (
        cli(["sft-data", str(run), "--format", "pyautogui", "--model", "org/tiny", "--out", str(tmp_path / "o.pq")])
        == 0
    )
    assert time.monotonic() - start < 30 and read_card(tmp_path / "o.pq")["rows"] == 1


def test_an_action_the_target_cannot_express_drops_its_episode_with_the_reason(model, tmp_path):
    run = tmp_path / "run"
    episode(run, "a", ["```python\npyautogui.middleClick(10, 60)\n```"])
    episode(run, "b", [CLICK.format(10, 60)], colour=5, seed=1)
    path, processor = model
    out = tmp_path / "sft.parquet"
    card = build(SFTDataConfig(runs=[str(run)], format="uitars", model=path, out=str(out)), processor)
    assert card["episodes"] == 1 and list(card["skipped"]) == [next(k for k in card["skipped"] if "uitars" in k)]
    text = pd.read_parquet(out).iloc[0]["messages"].tolist()[-1]["content"]
    assert text.startswith("Action: click(start_box=") or "\nAction: click(start_box=" in text


def test_the_cli_prints_and_saves_the_card_and_names_valid_values(model, tmp_path, capsys):
    run = tmp_path / "run"
    episode(run, "a", [CLICK.format(10, 60)], model="oracle-x")
    episode(run, "b", [CLICK.format(20, 70)], task="focus-text", colour=3, model="oracle-x", seed=1)
    out = tmp_path / "data" / "sft.parquet"
    assert cli(["sft-data", str(run), "--format", "qwen3vl", "--model", model[0], "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    card = read_card(out)
    assert card["per_task"] == {"click-test": {"episodes": 1, "steps": 1}, "focus-text": {"episodes": 1, "steps": 1}}
    assert card["per_source_model"] == {"oracle-x": {"episodes": 2, "steps": 2}} and card["images"] == 2
    assert f"2 rows (episode) from 2 episodes, 2 steps, 2 images, {card['tokens']['total']} tokens" in printed
    assert cli(["sft-data", str(run), "--format", "qwen3vl", "--model", model[0], "--select", "best"]) == 2
    assert "valid: success, all, reward>=X" in capsys.readouterr().err
    assert cli(["sft-data", str(tmp_path / "nope"), "--format", "qwen3vl", "--model", model[0]]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli(["sft-data", str(run), "--format", "qwen3vl", "--model", model[0], "--select", "reward>=2"]) == 2
    assert "no episode was selected" in capsys.readouterr().err.strip().splitlines()[-1]


def test_eval_episodes_group_by_domain_where_the_envs_tasks_run_under_seeds(scratch_env):
    from verl_cua.envs import EnvSpec

    result = {"task": "form/seed-3", "domain": "form", "task_id": "seed-3"}
    assert task_names({**result, "env": "miniwob"}, "k") == ("form/seed-3", "form")
    assert task_names({**result, "env": "osworld"}, "k") == ("form/seed-3", "form/seed-3")
    scratch_env("kiosk", EnvSpec(seeded_tasks=True))
    scratch_env("bare")
    assert task_names({**result, "env": "kiosk"}, "k") == ("form/seed-3", "form")
    assert task_names({**result, "env": "bare"}, "k") == ("form/seed-3", "form/seed-3")
    assert task_names({**result, "env": "not-registered-here"}, "k") == ("form/seed-3", "form/seed-3")


def test_api_gui_rows_show_each_turns_focused_app_and_last_api_result_and_other_formats_drop_api_calls(model, tmp_path):
    """An api_gui episode (an app API call, then a click) becomes api_gui rows whose turns list the focused app's APIs
    and the previous call's result; a GUI-only target drops it, naming the API it cannot say."""
    run = tmp_path / "run"
    writer = EpisodeWriter(run / "a")
    texts = ["```python\nAgent.open_app(app_name='vlc')\n```", "```python\nAgent.click(coordinates=[10, 60])\n```"]
    for i, (text, app, result) in enumerate(zip(texts, [None, "vlc"], ["opened vlc", None], strict=True)):
        parsed = parse_action(text, format="api_gui", screen=SCREEN)
        name = writer.screenshot(i, Image.new("RGB", SCREEN, (0, 10 * i, 0)))
        writer.step(step_record(step=i + 1, screenshot=name, screen=SCREEN, model_text=text, action=parsed.to_dict(),
                                valid=True, reward=0.0, api_result=result, focused_app=app))  # fmt: skip
    writer.finish({"task": "vlc/x", "env": "osworld", "domain": "vlc", "task_id": "x", "instruction": "Open VLC.",
                   "status": "success", "score": 1.0, "steps": 2, "model": "scripted"})  # fmt: skip
    write_json(run / "run.json", {"model": "scripted", "format": "api_gui"})
    path, processor = model
    out = tmp_path / "sft.parquet"
    card = build(SFTDataConfig(runs=[str(run)], format="api_gui", model=path, out=str(out)), processor)
    assert card["episodes"] == 1
    messages = pd.read_parquet(out).iloc[0]["messages"].tolist()
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert "Focused app: none." in users[0] and "Result of your last API call" not in users[0]
    assert "Focused app: vlc." in users[1] and users[1].rstrip().endswith("Result of your last API call: opened vlc")
    assert [m["content"] for m in messages if m["role"] == "assistant"] == texts
    with pytest.raises(ValueError, match=r"Agent\.open_app\(\.\.\.\): app APIs exist only in the api_gui format"):
        build(SFTDataConfig(runs=[str(run)], format="qwen3vl", model=path, out=str(out)), processor)


def test_rows_keep_the_element_table_each_step_read(model, tmp_path):
    """An episode traced with an element table (`cua.env.observation`): each row's turn shows the table its step
    read, after the screenshot, as the RL prompt does; a step without one shows none (the control)."""
    run = tmp_path / "run"
    writer = EpisodeWriter(run / "a")
    tables = ["Elements on the screen:\ntag\ttext\nbutton\tONE", None]
    for i, table in enumerate(tables):
        text = CLICK.format(40 + i, 80)
        parsed = parse_action(text, format="pyautogui", screen=SCREEN)
        name = writer.screenshot(i, Image.new("RGB", SCREEN, (0, 10 * i, 0)))
        writer.step(step_record(step=i + 1, screenshot=name, screen=SCREEN, model_text=text, action=parsed.to_dict(),
                                valid=True, reward=0.0, elements_text=table))  # fmt: skip
    writer.finish({"task": "click-test/seed-0", "env": "miniwob", "domain": "click-test", "task_id": "seed-0",
                   "instruction": "Click the button.", "status": "success", "score": 1.0, "steps": 2})  # fmt: skip
    write_json(run / "run.json", {"model": "oracle", "format": "pyautogui"})
    _card, rows = make(model, tmp_path, [run])
    users = [m["content"] for m in rows.iloc[0]["messages"].tolist() if m["role"] == "user"]
    assert users[0].rstrip().endswith(tables[0]) and "Elements on the screen" not in users[1]
