"""The viewer on a planner-mode run (`verl-cua eval --planner`, CODA): per step the planner's thought and the action
the executor carried out, each labelled, the executor's raw reply and prompt; the planner's `ANS` answer and a
rejected plan are said as such; an ordinary run beside it looks as it always did. Checked in the HTML and in
headless Chromium."""

import json
import re

import pytest

from verl_cua.envs.trajectory import RUN, EpisodeWriter, prompt_record, step_record, write_json
from verl_cua.testing.viewer_runs import SCREEN, act, screenshot, write_episode
from verl_cua.viewer import build_report

KEY = "calc/calc-sum-column"
THOUGHTS = ["The Sum button is in the toolbar; I click it.", "I type the formula into A10.", "The sum is 45."]
RAW = "click(start_box='(500,500)')"


def planner_step(writer, i, executor, actions, valid=True, error=None):
    name = writer.screenshot(i, screenshot(i))
    parsed = {"valid": valid, "error": error, "format": "uitars", "thought": THOUGHTS[i], "actions": actions}
    shown = [{"type": "image", "image": name}, {"type": "text", "text": "Task: x"}]
    messages = [{"role": "system", "content": "planner prompt"}, {"role": "user", "content": shown}]
    writer.step(
        step_record(
            step=i + 1,
            screenshot=name,
            screen=list(SCREEN),
            model_text=f"Thought: {THOUGHTS[i]}\nAction: click(start_box='(1,1)')",
            action=parsed,
            valid=valid,
            error=error,
            infra_failure=False,
            reward=0.0,
            timing={"model_s": 1.5, "executor_s": 0.25, "env_s": 0.5},
            prompt=prompt_record(messages, str, layout="step"),
            executor=executor,
        )
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("planner-runs")
    planned, plain = root / "planned", root / "plain"
    executor = {"kind": "openai", "model": "ui-tars-1.5-7b"}
    meta = {"name": "planned", "model": "qwen25vl-32b", "format": "qwen25vl", "env": "osworld", "planner": "coda"}
    write_json(planned / RUN, {**meta, "executor": executor})
    write_json(plain / RUN, {"name": "plain", "model": "ui-tars-7b", "format": "uitars", "env": "osworld"})
    writer = EpisodeWriter(planned / KEY)
    sent = [{"role": "user", "content": [{"type": "text", "text": "executor prompt"}]},
            {"role": "assistant", "content": THOUGHTS[0] + "\nAction: "}]  # fmt: skip
    prompt = prompt_record(sent, str, layout="step")
    base = {"kind": "openai", "model": "ui-tars-1.5-7b"}
    planner_step(writer, 0, {**base, "outcome": "action", "raw": RAW, "executed": RAW, "prompt": prompt},
                 [act("click", x=960, y=540)])  # fmt: skip
    rejected = "the executor rejected the plan: HTTP 400 too long"
    planner_step(writer, 1, {**base, "outcome": "rejected", "executed": "(rejected: HTTP 400 too long)",
                             "error": rejected}, [], valid=False, error=rejected)  # fmt: skip
    planner_step(writer, 2, {**base, "outcome": "answer", "executed": "ANS 45"}, [act("done", text="45")])
    final = writer.screenshot(3, screenshot(3))
    writer.finish({"task": KEY, "domain": "calc", "task_id": "calc-sum-column", "instruction": "Sum column A.",
                   "status": "failure", "score": 0.0, "steps": 3, "final_screenshot": final})  # fmt: skip
    write_episode(plain, KEY, [[act("click", x=960, y=540)]], "success", model_text="Thought: a plain one.\nAction: x")
    return planned, plain


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory):
    return build_report(list(runs), tmp_path_factory.mktemp("planner-out") / "report.html")


def detail_html(report) -> str:
    (data,) = re.findall(r'<script type="application/json" class="detail-data">(.*?)</script>', report.read_text())
    return json.loads(data.replace("<\\/", "</"))


def cells(html: str) -> dict[tuple[str, str], str]:
    """(run, step) -> the cell's HTML, cut at the next cell."""
    found = re.split(r'(?=<div class="cell[^"]*" data-run=")', html)
    out = {}
    for cell in found:
        head = re.match(r'<div class="cell[^"]*" data-run="(\d)"(?: data-step="(\d)")?', cell)
        if head:
            out[(head.group(1), head.group(2) or "end")] = cell
    return out


def test_each_planner_step_shows_the_thought_and_the_executed_action_labelled(report):
    by = cells(detail_html(report))
    first = by[("0", "1")]
    assert f'<span class="who planner">planner</span> {THOUGHTS[0]}' in first
    assert '<div class="act"><span class="who executor">executor</span><code>click(960, 540)</code>' in first
    raw = "click(start_box=&#x27;(500,500)&#x27;)"
    assert f"<summary>executor output · openai · ui-tars-1.5-7b</summary><pre>{raw}</pre>" in first
    assert "<summary>planner output</summary>" in first and "<summary>executor prompt · 2 messages" in first
    assert "<span>planner 1.50 s</span><span>executor 0.25 s</span>" in first
    second, third = by[("0", "2")], by[("0", "3")]
    assert "the executor rejected the plan (the planner&#x27;s invalid step)" in second and "badge bad" in second
    assert '<span class="who planner">planner</span><code>done(&quot;45&quot;)</code>' in third  # the planner answered
    assert "the planner&#x27;s ANS answer: no executor call" in third and "executor output" not in third
    plain = by[("1", "1")]  # the ordinary run: no labels, its thought and model output as before
    assert 'class="who' not in plain and "executor" not in plain and "<summary>model output</summary>" in plain
    assert '<div class="thought">Step 1: I act on the button.</div>' in plain
    assert "planner coda · executor ui-tars-1.5-7b" in report.read_text()  # the run card says it is a planner run


def test_the_labels_and_texts_are_what_a_browser_shows(driver, report):
    driver.get(report.resolve().as_uri() + "#task-calc-calc-sum-column")
    cell = '.task-detail[data-task="calc/calc-sum-column"] .cell[data-run="{}"][data-step="1"]'
    labels = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent)", cell.format(0) + " .who"
    )
    assert labels == ["planner", "executor"]
    text = driver.execute_script("return document.querySelector(arguments[0]).innerText", cell.format(0))
    assert THOUGHTS[0] in text and "click(960, 540)" in text
    assert driver.execute_script("return document.querySelectorAll(arguments[0]).length", cell.format(1) + " .who") == 0
