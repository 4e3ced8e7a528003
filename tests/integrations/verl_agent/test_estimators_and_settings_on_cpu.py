"""`cua_gigpo` on verl DataProto batches shaped like verl-agent's step samples (hand-computed values, invariance to
`adjust_batch` copies and reordering, penalties), estimator-name checks, and the one-line errors of `env.<ours>`."""

import pickle
import uuid

import numpy as np
import pytest
import torch
from verl import DataProto

from verl_cua.integrations.verl_agent.anchor import StepAnchor, screen_anchor, without_vision_markup
from verl_cua.integrations.verl_agent.estimators import check_estimator, cua_gigpo
from verl_cua.integrations.verl_agent.settings import env_name, read_settings

# verl-agent 20bd331's AdvantageEstimator values
BUILTIN = ["gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "grpo_passk", "gigpo"]


def batch(rows):
    """rows: (traj, group, anchor, step, step reward, episode reward, penalty of the step) per step sample."""
    n = len(rows)
    scores = torch.zeros(n, 4)
    scores[:, -1] = torch.tensor([r[5] - r[6] for r in rows])
    mask = torch.ones(n, 4)
    mask[:, 0] = 0
    return DataProto.from_dict(
        tensors={"token_level_rewards": scores, "response_mask": mask},
        non_tensors={
            "traj_uid": np.array([r[0] for r in rows], dtype=object),
            "uid": np.array([r[1] for r in rows], dtype=object),
            "anchor_obs": np.array([StepAnchor(r[2], r[3]) for r in rows], dtype=object),
            "rewards": np.array([r[4] for r in rows], dtype=object),
            "episode_rewards": np.array([r[5] for r in rows], dtype=np.float32),
        },
    )


ROWS = [  # group g: A wins in 2 steps via s1; B loses via s2; group h: C wins in 3 steps, D loses in 1
    ("A", "g", "s0", 0, 0.0, 1.0, 0.0),
    ("A", "g", "s1", 1, 1.0, 1.0, 0.0),
    ("B", "g", "s0", 0, 0.0, 0.0, 0.0),
    ("B", "g", "s2", 1, 0.0, 0.0, 0.0),
    ("C", "h", "t0", 0, 0.0, 1.0, 0.0),
    ("C", "h", "t1", 1, 0.0, 1.0, 0.0),
    ("C", "h", "t2", 2, 1.0, 1.0, 0.0),
    ("D", "h", "t0", 0, 0.0, 0.0, 0.0),
]


def advantages(rows, **kw):
    data = cua_gigpo(batch(rows), gamma=0.9, step_advantage_w=1.0, gigpo_mode="mean_norm", **kw)
    adv = data.batch["advantages"]
    assert torch.equal(adv[:, 0], torch.zeros(len(rows)))  # masked tokens get nothing
    assert torch.equal(data.batch["returns"], adv)
    return {(r[0], r[3]): round(float(adv[i, -1]), 4) for i, r in enumerate(rows)}


def test_hand_computed_values():
    got = advantages(ROWS)
    # episodes: g: A +0.5, B -0.5; h: C +0.5, D -0.5. steps: (g, s0): A 0.9 vs B 0 -> +-0.45; (h, t0): C 0.81 vs D 0
    assert got == {
        ("A", 0): 0.95, ("A", 1): 0.5, ("B", 0): -0.95, ("B", 1): -0.5,
        ("C", 0): 0.905, ("C", 1): 0.5, ("C", 2): 0.5, ("D", 0): -0.905,
    }  # fmt: skip


def test_adjust_batch_copies_and_reordering_change_nothing():
    rng = np.random.default_rng(0)
    copies = ROWS + [ROWS[i] for i in rng.integers(0, len(ROWS), 5)]  # adjust_batch(mode="copy")
    order = rng.permutation(len(copies))  # _balance_batch reorders
    assert advantages([copies[i] for i in order]) == advantages(ROWS)


def test_invalid_action_penalty_is_a_step_reward():
    penalised = [r if r[:2] != ("B", "g") or r[3] != 0 else (*r[:6], 0.1) for r in ROWS]
    got = advantages(penalised)
    assert got[("B", 0)] < advantages(ROWS)[("B", 0)]  # B's first step was the invalid one
    assert got[("A", 1)] == pytest.approx(0.55, abs=1e-4)  # B's return is -0.1: episode gap 1.1


def test_anchors_without_steps_and_bad_modes_fail_in_one_line():
    data = batch(ROWS)
    data.non_tensor_batch["anchor_obs"] = np.array([str(a) for a in data.non_tensor_batch["anchor_obs"]], dtype=object)
    with pytest.raises(ValueError, match="use adv_estimator=gigpo for verl-agent's own envs"):
        cua_gigpo(data)
    with pytest.raises(ValueError, match="valid modes: mean_norm, mean_std_norm"):
        cua_gigpo(batch(ROWS), gigpo_mode="z")


def test_estimator_names():
    check_estimator("gigpo", BUILTIN)
    check_estimator("cua_gigpo", BUILTIN)
    with pytest.raises(ValueError, match="verl-agent's trainer lacks"):
        check_estimator("sdpo", BUILTIN)
    with pytest.raises(ValueError, match="valid estimators: gae, .*cua_gigpo"):
        check_estimator("gipgo", BUILTIN)


def test_step_anchor_is_its_string_and_survives_pickling():
    a = StepAnchor(str(uuid.uuid4())[:16], 3)
    b = pickle.loads(pickle.dumps(a))
    assert b == str(a) and hash(b) == hash(str(a)) and b.step == 3 and isinstance(b, StepAnchor)
    image = np.zeros((28, 56, 3), dtype=np.uint8)
    assert screen_anchor(image, 0) == screen_anchor(image.copy(), 5) != screen_anchor(image.reshape(56, 28, 3), 0)
    assert without_vision_markup("a <image> <|image_pad|> b").count("<") == 0


def test_settings_errors_name_the_valid_values():
    assert env_name("miniwob/click-test") == "miniwob" and env_name("Sokoban") is None
    settings = read_settings("miniwob", None)
    assert settings.format == "qwen25vl" and settings.tasks == settings.val_tasks and settings.factor == 28
    assert read_settings("osworld", {"tasks": ["a.json", "b.json"], "format": "qwen3vl"}).factor == 32
    with pytest.raises(ValueError, match=r"unknown key\(s\) env.miniwob.task; valid keys: tasks, val_tasks"):
        read_settings("miniwob", {"task": "click-test"})
    with pytest.raises(ValueError, match="valid formats: api_gui, pyautogui, qwen25vl, qwen3vl, uitars$"):
        read_settings("miniwob", {"format": "claude"})
    with pytest.raises(ValueError, match="env.osworld.tasks is required"):
        read_settings("osworld", {})
    with pytest.raises(ValueError, match="valid backends: thread, ray"):
        read_settings("miniwob", {"pool_backend": "k8s"})
    with pytest.raises(ValueError, match="at least 65536"):
        read_settings("miniwob", {"max_pixels": 1000})


def test_an_env_section_s_observation_reaches_make_env_and_a_bad_one_is_one_line():
    assert read_settings("miniwob", None).env_kwargs("miniwob") == {}  # the default screenshot adds nothing
    settings = read_settings("miniwob", {"observation": "som", "observation_tokens": 500, "kwargs": {"wait_ms": 5}})
    assert settings.env_kwargs("miniwob") == {"wait_ms": 5, "observation": "som", "observation_tokens": 500}
    bad = r"^env.miniwob.observation: unknown observation 'dom' \(did you mean som\?\); valid: screenshot,"
    with pytest.raises(ValueError, match=bad):
        read_settings("miniwob", {"observation": "dom"})
