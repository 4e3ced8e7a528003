"""Token budgets checked before Ray starts (`prepare_config`): rows that cannot hold what episodes put in them fail
in one line; vLLM's context is set from the budget; a screenshot's token count matches the real processor's."""

import pytest
from hydra import compose, initialize_config_module
from PIL import Image
from transformers import AutoProcessor

from verl_cua.integrations.verl.config.budget import (
    OBSERVATION_FRAME_TOKENS,
    Geometry,
    image_tokens,
    model_geometry,
    row_budget,
)
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.prepare import prepare_config

# the flagship's settings (recipes/run_qwen3vl_sdpo_osworld.sh), on verl's GPU defaults
FLAGSHIP = [
    "algorithm.adv_estimator=sdpo",
    "actor_rollout_ref.model.path=Qwen/Qwen3-VL-8B-Instruct",
    "actor_rollout_ref.rollout.name=vllm",
    "data.max_prompt_length=8192",
    "data.max_response_length=1024",
    "cua.env.name=osworld",
    "cua.env.rows=step",
    "cua.env.max_steps=15",
    "cua.env.history_images=3",
    "cua.env.max_pixels=1003520",
    "cua.action.format=qwen3vl",
    "cua.action.max_tokens_per_step=512",
]


def _config(*overrides):
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        return compose("cua_trainer", overrides=[*FLAGSHIP, *overrides])


def test_the_flagship_fits_and_vllm_plans_for_its_rows_not_the_models_whole_context():
    cfg = _config()
    prepare_config(cfg)
    assert cfg.actor_rollout_ref.rollout.max_model_len == 8192 + 1024
    cfg = _config("actor_rollout_ref.rollout.max_model_len=32768")  # a user's own setting stays
    prepare_config(cfg)
    assert cfg.actor_rollout_ref.rollout.max_model_len == 32768


def test_whole_episode_rows_at_the_recipe_lengths_fail_in_one_line_naming_the_fix():
    with pytest.raises(CuaConfigError) as err:
        prepare_config(_config("cua.env.rows=episode"))
    message = str(err.value)
    assert "\n" not in message and "cannot hold two turns" in message and "cua.env.rows=step" in message
    need = int(message.split("needs ~")[1].split(":")[0])
    assert 13_000 <= need <= 25_000  # 15 turns of 512 tokens and a 943-token screenshot
    prepare_config(_config("cua.env.rows=episode", f"data.max_response_length={need}"))  # enough: passes


def test_step_prompts_that_cannot_hold_the_history_screenshots_fail():
    with pytest.raises(CuaConfigError, match="history_images=3 screenshots at cua.env.max_pixels=1003520"):
        prepare_config(_config("data.max_prompt_length=2048"))
    prepare_config(_config("data.max_prompt_length=3072", "cua.env.history_images=1"))


def test_sdpo_teacher_rows_over_the_dynamic_batch_token_cap_fail():
    dynamic = [
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12000",
    ]
    with pytest.raises(CuaConfigError, match="SDPO teacher rows reach"):
        prepare_config(_config(*dynamic, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=12000"))
    prepare_config(_config(*dynamic, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=24000"))
    prepare_config(_config(*dynamic, "algorithm.adv_estimator=grpo", "~cua.sdpo"))  # no teacher rows: no check


def test_a_screenshot_costs_what_the_real_processor_makes_of_it(tiny_model):
    _family, path = tiny_model
    processor = AutoProcessor.from_pretrained(path)
    geometry = model_geometry(str(path))
    for screen, max_pixels in (((1920, 1080), 1_003_520), ((160, 210), 50_176), ((1280, 800), 200_000)):
        size, tokens = image_tokens(screen, geometry, max_pixels)
        cap = min(max_pixels, geometry.cap)
        out = processor.image_processor(
            images=[Image.new("RGB", screen)], size={"longest_edge": cap, "shortest_edge": geometry.factor**2}
        )
        grid = out["image_grid_thw"][0].tolist()
        merge = processor.image_processor.merge_size
        assert tokens == grid[0] * grid[1] * grid[2] // merge**2
        assert size == (grid[2] * geometry.factor // merge, grid[1] * geometry.factor // merge)


def test_geometry_by_name_when_the_model_is_not_on_this_machine():
    assert model_geometry("Qwen/Qwen3-VL-8B-Instruct").factor == 32
    assert model_geometry("Qwen/Qwen2.5-VL-7B-Instruct").factor == 28
    assert image_tokens((1920, 1080), Geometry(32, 16777216), 1_003_520) == ((1312, 736), 943)
    budget = row_budget({**_plain(_config()), "algorithm": {"adv_estimator": "grpo"}})
    assert budget.teacher_extra == 0 and budget.image_tokens == 943


def _plain(cfg):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


def test_an_env_registered_without_its_screen_is_one_line_naming_the_setting(scratch_env):
    """A user's env added with `register_env` (no EnvSpec) used to crash the check with KeyError."""
    scratch_env("my_desktop")  # no EnvSpec: removed again after the test
    with pytest.raises(CuaConfigError) as err:
        prepare_config(_config("cua.env.name=my_desktop"))
    assert "cua.env.kwargs.screen=[WIDTH,HEIGHT]" in str(err.value) and "\n" not in str(err.value)
    cfg = _config("cua.env.name=my_desktop", "+cua.env.kwargs.screen=[1280,800]")
    prepare_config(cfg)  # it says its size: checked like any env
    assert row_budget(cfg).image_size == row_budget(_config("+cua.env.kwargs.screen=[1280,800]")).image_size


def test_builtin_envs_screens_come_from_their_specs():
    from verl_cua.envs import env_screen

    assert env_screen("miniwob", {"screenshot_scale": 2}) == (320, 420)
    assert env_screen("osworld", {}) == (1920, 1080) and env_screen("osworld", {"screen": [1280, 720]}) == (1280, 720)
    with pytest.raises(ValueError, match="unknown env 'nope'; valid envs: .*miniwob"):
        env_screen("nope", {})


def test_an_element_table_s_tokens_count_in_every_prompt_and_turn():
    grpo = {"algorithm": {"adv_estimator": "grpo"}}
    plain = row_budget({**_plain(_config()), **grpo})
    som = row_budget({**_plain(_config("cua.env.observation=som", "cua.env.observation_tokens=1500")), **grpo})
    per_table = 1500 + OBSERVATION_FRAME_TOKENS
    assert som.turn - plain.turn == per_table
    guide = som.system_tokens - plain.system_tokens  # the system prompt's sentence on the marks
    assert 0 < guide < 200 and som.step_prompt - plain.step_prompt == guide + 3 * per_table  # a window of 3 tables
    text = row_budget({**_plain(_config("cua.env.observation=a11y_tree", "cua.env.observation_tokens=1500")), **grpo})
    assert som.turn - text.turn > plain.image_tokens  # each turn: the table, and no screenshot
    assert text.step_prompt < som.step_prompt - 3 * plain.image_tokens  # a11y_tree: no screenshot in any prompt
    table = ("cua.env.observation=screenshot_a11y_tree", "cua.env.observation_tokens=3000")
    with pytest.raises(CuaConfigError, match="^data.max_prompt_length=5000 cannot hold the screenshots and the elem"):
        prepare_config(_config("data.max_prompt_length=5000", *table))  # the table no longer fits
    prepare_config(_config("data.max_prompt_length=5000"))  # the control: the same rows without the table fit
    prepare_config(_config("data.max_prompt_length=8192", *table))
