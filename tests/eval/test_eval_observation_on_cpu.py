"""`verl-cua eval --observation`: the model is shown what the env reads (the page's marks beside a marked screenshot
for `som`), the trajectory keeps it and the viewer shows it beside the screenshot; the default shows none; and a type
an env does not give is one line before any browser starts."""

import json
import re

import numpy as np
import pytest

from verl_cua.envs import EnvSpec, observed_kwargs
from verl_cua.eval import EvalConfig, run_eval
from verl_cua.testing.chat_server import first_user_text, request_images
from verl_cua.viewer import build_report


def _config(out, url, **kwargs):
    return EvalConfig(env="miniwob", tasks="click-test", seeds="0", model="scripted", format="pyautogui",
                      out=str(out), base_url=url, max_steps=1, **kwargs)  # fmt: skip


def test_som_shows_the_marks_and_the_marked_screenshot_and_the_default_shows_neither(tmp_path, chat_server, chromium):
    server = chat_server({"Click": ["DONE"]})
    run_eval(_config(tmp_path / "som", server.url, observation="som"))
    run_eval(_config(tmp_path / "plain", server.url))
    (som, plain) = (r["body"] for r in server.requests)
    text = first_user_text(som["messages"])
    assert "Marks on the screenshot:\nmark\ttag" in text and "\tbutton\tClick Me!\t" in text, text
    assert "Marks on the screenshot" not in first_user_text(plain["messages"])  # the control: a screenshot alone
    red = [int((np.asarray(image.convert("RGB")) == (255, 0, 0)).all(axis=2).sum()) for image in
           (request_images(som)[0], request_images(plain)[0])]  # fmt: skip
    assert red[0] > 20 and red[1] == 0  # the marks are drawn on the screenshot the model sees, only with som
    meta = json.loads((tmp_path / "som" / "run.json").read_text())
    assert meta["observation"] == "som" and meta["observation_tokens"] > 0
    (step,) = [json.loads(line) for line in (tmp_path / "som" / "click-test" / "seed-0" / "trajectory.jsonl").open()]
    assert step["elements_text"] in text  # the trajectory keeps what the step read
    html = build_report([tmp_path / "som", tmp_path / "plain"], tmp_path / "report.html").read_text()
    shown = r'class=\\?"raw read\\?" open><summary>Marks on the screenshot<\\?/summary><pre>(.{0,300})'  # in JSON
    opened = re.findall(shown, html)
    assert len(opened) == 1 and "button\\tClick Me!" in opened[0]  # beside the (marked) screenshot, for som only


def test_a_type_the_env_does_not_give_is_one_line_before_anything_starts(tmp_path, scratch_env):
    name = scratch_env("screens-only", EnvSpec(screen=lambda kwargs: (100, 100)))  # a plug-in that says nothing more
    with pytest.raises(ValueError) as err:
        run_eval(EvalConfig(env=name, tasks="t", model="m", format="pyautogui", out=str(tmp_path), observation="som"))
    assert str(err.value) == "env 'screens-only' gives no som observation; it gives: screenshot"
    assert observed_kwargs(name, {"a": 1}, "screenshot", 10) == {"a": 1}  # the default adds nothing a plug-in lacks
    assert observed_kwargs("miniwob", {}, "a11y_tree", 10) == {"observation": "a11y_tree", "observation_tokens": 10}


def test_a11y_tree_sends_the_table_and_no_screenshot_and_keeps_the_screenshot_on_disk(tmp_path, chat_server, chromium):
    server = chat_server({"Click": ["```python\npyautogui.click(1, 1)\n```", "DONE"]})
    run_eval(
        EvalConfig(
            env="miniwob",
            tasks="click-test",
            seeds="0",
            model="scripted",
            format="pyautogui",
            out=str(tmp_path / "tree"),
            base_url=server.url,
            max_steps=2,
            observation="a11y_tree",
        )
    )
    first, second = (r["body"] for r in server.requests)
    text = first_user_text(first["messages"])
    assert "Elements on the screen:\ntag\ttext" in text and "\tClick Me!\t" in text
    assert "You get no screenshot" in first["messages"][0]["content"]  # the system prompt says so
    assert request_images(first) == [] and request_images(second) == []  # no turn carries an image
    steps = [json.loads(line) for line in (tmp_path / "tree" / "click-test" / "seed-0" / "trajectory.jsonl").open()]
    assert steps[0]["screenshot"] and (tmp_path / "tree" / "click-test" / "seed-0" / steps[0]["screenshot"]).is_file()
