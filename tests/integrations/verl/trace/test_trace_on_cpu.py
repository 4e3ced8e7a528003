"""The training trace: which groups are sampled, each turn's advantage from the response mask, and the trainer's
write-back into the traced episode's result.json (episode rows, step rows, replayed rows left alone)."""

import json

import pytest
import torch

from verl_cua.envs.trajectory import EpisodeWriter
from verl_cua.integrations.verl.config.checks import _defaults, validate_cua_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.trace.episodes import sampled, turn_advantages, write_advantages


def test_turn_advantages_average_each_run_of_model_tokens():
    adv = torch.tensor([1.0, 3.0, 9.0, 9.0, -2.0, 0.0, 5.0, 7.0, 0.0])
    mask = torch.tensor([1, 1, 0, 0, 1, 0, 1, 1, 0])
    assert turn_advantages(adv, mask) == [2.0, -2.0, 6.0]
    assert turn_advantages(torch.zeros(3), torch.zeros(3)) == []


def test_sampling_takes_whole_groups_every_nth_step():
    trace = {"dir": "/tmp/x", "every": 2, "fraction": 0.5}
    uids = [f"uid-{i}" for i in range(400)]
    picked = [u for u in uids if sampled(trace, u, 4)]
    assert 140 < len(picked) < 260  # about half, by a hash of the uid
    assert picked == [u for u in uids if sampled(trace, u, 6)]  # the same groups at every traced step
    assert not any(sampled(trace, u, 5) for u in uids)  # odd steps are not traced with every=2
    assert not sampled({**trace, "dir": None}, "uid-1", 4) and not sampled(trace, "uid-1", None)
    assert all(sampled({**trace, "fraction": 1.0}, u, 2) for u in uids)


def _episode(path, steps):
    writer = EpisodeWriter(path)
    writer.finish({"status": "failure", "steps": steps, "reward": 0.0})
    return str(path)


def test_write_advantages_fills_each_episodes_steps(tmp_path):
    episode = _episode(tmp_path / "a", 2)
    stepwise = _episode(tmp_path / "b", 3)
    replayed = _episode(tmp_path / "c", 1)
    extra = [
        {"cua_trace_dir": episode},  # one row, two turns
        {"cua_trace_dir": stepwise, "step_index": 0},
        {"cua_trace_dir": stepwise, "step_index": 2},  # step 1's row was not in this batch
        {"cua_trace_dir": replayed, "cua_replayed": True},
        {"cua_trace_dir": ""},
    ]
    adv = torch.tensor([[0.5, 0.5, 0.0, -1.0], [2.0, 2.0, 0.0, 0.0], [-3.0, 0.0, 0.0, 0.0], [9.0] * 4, [1.0] * 4])
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]])
    assert write_advantages(extra, adv, mask) == 2
    read = lambda p: json.loads((tmp_path / p / "result.json").read_text())  # noqa: E731
    assert read("a")["step_advantages"] == [0.5, -1.0]
    assert read("b")["step_advantages"] == [2.0, None, -3.0]
    assert "step_advantages" not in read("c")


def test_trace_keys_and_values_are_checked():
    base = _defaults()
    assert base["trace"] == {"dir": None, "every": 1, "fraction": 1.0, "log_episodes": 0}
    validate_cua_config({**base, "trace": {"dir": "/tmp", "every": 3, "fraction": 0.25}})
    with pytest.raises(CuaConfigError, match="unknown key cua.trace.dirr; valid: dir, every, fraction, log_episodes"):
        validate_cua_config({**base, "trace": {"dirr": "/tmp"}})
    with pytest.raises(CuaConfigError, match="cua.trace.fraction must be a number in"):
        validate_cua_config({**base, "trace": {"dir": "/tmp", "every": 1, "fraction": 2}})
    with pytest.raises(CuaConfigError, match="cua.trace.log_episodes must be"):
        validate_cua_config({**base, "trace": {"dir": "/tmp", "log_episodes": -1}})


def test_validation_rows_are_marked_and_traced_apart(tmp_path):
    import numpy as np
    from verl.utils import tensordict_utils as tu

    from verl_cua.integrations.verl.trace.episodes import MarkValidation, open_trace

    loader = [{"raw_prompt": np.array([[{"role": "user", "content": "x"}]] * 3, dtype=object), "index": np.arange(3)}]
    wrapped = MarkValidation(loader)
    assert len(wrapped) == 1
    (batch,) = list(wrapped)
    batch["uid"] = np.array(["u1", "u2", "u3"], dtype=object)  # what verl's _validate adds next
    td = tu.get_tensordict(batch)  # verl's own conversion, as in its _validate
    assert [td["cua_validate"][i] for i in range(3)] == [True] * 3
    trace = {"dir": str(tmp_path), "every": 1, "fraction": 1.0}
    row = {"uid": "0a1b2c3d4e", "session_id": 0, "global_steps": 5, "extra_info": {"task_id": "click-test"}}
    val = open_trace(trace, {**row, "cua_validate": True}, {"task": "click-test", "seed": 1})
    train = open_trace(trace, row, {"task": "click-test", "seed": 1})
    assert val.dir == tmp_path / "val_step_000005" / "click-test-seed1" / "0a1b2c3d-0"
    assert train.dir == tmp_path / "step_000005" / "click-test-seed1" / "0a1b2c3d-0"


def test_a_traced_steps_prompt_is_built_by_the_trace_and_not_once_it_stopped(tmp_path):
    """The agent loop hands the trace a `trace_prompt` call: written into the step line while the trace writes,
    never built after a full disk stopped it."""
    from functools import partial

    from PIL import Image

    from verl_cua.actions import parse_action
    from verl_cua.envs.trajectory import read_run
    from verl_cua.integrations.verl.trace.episodes import EpisodeTrace, trace_prompt

    shot = Image.new("RGB", (16, 16))
    messages = [{"role": "user", "content": [{"type": "text", "text": "Click."}, {"type": "image", "image": shot}]}]
    calls = []

    def prompt():
        calls.append(1)
        return partial(trace_prompt, messages, [shot], 0, "step")()

    trace = EpisodeTrace(tmp_path / "run" / "t" / "u-0", "t")
    parsed = parse_action("pyautogui.click(1, 2)", format="pyautogui", screen=(16, 16))
    step = {"seen": shot, "screen": (16, 16), "text": "x", "parsed": parsed, "info": {}, "reward": 0.0, "model_s": 0.0,
            "env_s": 0.0}  # fmt: skip
    trace.step(**step, prompt=prompt)
    _, episodes = read_run(tmp_path / "run")
    (record,) = [episode.steps[0] for episode in episodes.values()]
    assert record["prompt"]["messages"][0]["content"][0]["text"] == "Click." and len(calls) == 1
    trace.broken = True  # as after a full disk
    trace.step(**step, prompt=prompt)
    assert len(calls) == 1
