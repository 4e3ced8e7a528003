"""The trainer config composes on verl's ppo_trainer; `cua.*` keys and values are checked with one-line errors."""

import re
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from verl_cua.integrations.verl.config.checks import validate_cua_config, validate_estimator_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import CuaConfig, EnvConfig, TraceConfig

CONFIG_MODULE = "verl_cua.integrations.verl.config"


def _compose(*overrides):
    with initialize_config_module(CONFIG_MODULE, version_base=None):
        return compose("cua_trainer", overrides=list(overrides))


def test_composes_on_verl_ppo_trainer_with_our_defaults():
    cfg = _compose("actor_rollout_ref.rollout.name=vllm")
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "gui_agent"
    assert cfg.trainer.use_v1 and cfg.trainer.v1.trainer_mode == "sync"
    assert cfg.trainer.device == "cuda"  # no preset: the GPU defaults stay verl's
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 256  # verl's own default survives
    validate_cua_config(OmegaConf.to_container(cfg.cua))


def test_cpu_preset_sets_the_cpu_stack():
    cfg = _compose("preset=cpu")
    assert cfg.trainer.device == "cpu"
    assert cfg.actor_rollout_ref.rollout.name == "hf"
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp2"
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert cfg.ray_kwargs.ray_init.num_cpus >= 16  # TransferQueue + workers need more Ray slots than 2 cores


def test_cpu_presets_compute_in_fp32():
    # verl's FSDP engine computes in bf16 unless `mixed_precision` says otherwise (its `dtype` key does not): a CPU
    # without bf16 units then runs the update 5x slower, and its log-probs differ from the fp32 hf rollout's
    import torch
    from verl.utils.torch_dtypes import PrecisionType

    cfg = _compose("preset=cpu")
    with initialize_config_module("verl_cua.integrations.verl.config.sft", version_base=None):
        sft = compose("cua_sft", overrides=["preset=cpu"])
    for engine in (cfg.actor_rollout_ref.actor.fsdp_config, cfg.actor_rollout_ref.ref.fsdp_config, sft.engine):
        for key in ("param_dtype", "reduce_dtype", "buffer_dtype"):
            assert PrecisionType.to_dtype(engine.mixed_precision[key]) == torch.float32, (key, engine)


def test_cli_overrides_reach_cua_keys():
    cfg = _compose("preset=cpu", "cua.env.rows=step", "cua.env.history_images=2", "cua.action.format=qwen25vl")
    assert (cfg.cua.env.rows, cfg.cua.env.history_images, cfg.cua.action.format) == ("step", 2, "qwen25vl")
    validate_cua_config(OmegaConf.to_container(cfg.cua))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=True"], []),
        (["algorithm.adv_estimator=sdpo"], []),
        (["algorithm.adv_estimator=sdpo", "cua.sdpo.teacher=frozen"], []),
        (["algorithm.adv_estimator=sdpo", "actor_rollout_ref.actor.use_kl_loss=True"], ["use_kl_loss=True"]),
        (["algorithm.adv_estimator=sdpo_grpo", "cua.sdpo.teacher=current"], ["cua.sdpo.teacher=current"]),
    ],
)
def test_sdpo_settings_the_reference_warns_against_give_one_line_each(overrides, expected):
    from verl_cua.integrations.verl.config.checks import estimator_warnings

    warnings = estimator_warnings(OmegaConf.to_container(_compose("preset=cpu", *overrides), resolve=True))
    assert len(warnings) == len(expected) and all("\n" not in w for w in warnings)
    assert all(w.startswith(e) or e in w for w, e in zip(warnings, expected, strict=True))


def test_the_trainer_prints_the_warnings_before_ray_starts(capsys):
    from verl_cua.integrations.verl.config.prepare import prepare_config

    config = _compose("preset=cpu", "algorithm.adv_estimator=sdpo", "actor_rollout_ref.actor.use_kl_loss=True")
    prepare_config(config)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("verl-cua: WARNING: algorithm.adv_estimator=sdpo with")


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"env": {"name": "windows"}}, "cua.env.name='windows' is not valid; valid: miniwob, osworld"),
        ({"env": {"rows": "turn"}}, "cua.env.rows='turn' is not valid; valid: episode, step"),
        (
            {"action": {"format": "claude"}},
            "cua.action.format='claude' is not valid; valid: api_gui, pyautogui, qwen25vl, qwen3vl, uitars",
        ),
        ({"env": {"max_step": 3}}, "unknown key cua.env.max_step; valid: name, kwargs, pool_size, idle_envs"),
        ({"nonsense": {}}, "unknown key cua.nonsense; valid: env, action"),
        ({"env": {"pool_size": 0}}, "cua.env.pool_size must be a positive integer, got 0"),
        ({"action": {"invalid_penalty": -1}}, "cua.action.invalid_penalty must be a number >= 0, got -1"),
    ],
)
def test_bad_cua_values_give_one_line_naming_valid_choices(patch, expected):
    cua = OmegaConf.to_container(_compose("preset=cpu").cua)
    for section, values in patch.items():
        cua.setdefault(section, {}).update(values)
    with pytest.raises(CuaConfigError) as err:
        validate_cua_config(cua)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


@pytest.mark.e2e
def test_main_rejects_a_bad_value_before_starting_ray():
    proc = subprocess.run(
        [sys.executable, "-m", "verl_cua.main", "preset=cpu", "cua.env.name=windows", "hydra.run.dir=/tmp/cua-hydra"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1] == "verl-cua: cua.env.name='windows' is not valid; valid: miniwob, osworld"
    )
    assert "ray init" not in proc.stdout


def test_main_without_verl_names_the_install_command():
    script = (
        "import sys, runpy\n"
        "sys.modules['verl'] = None\n"
        "sys.argv = ['verl_cua.main', 'preset=cpu']\n"
        "runpy.run_module('verl_cua.main', run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("verl-cua: the trainer needs verl; install with: pip install 'verl-cua[verl]'")
    assert "(in this checkout: pip install -c tests/constraints.txt" in line and "'.[verl]'" in line  # a checkout


@pytest.mark.parametrize("estimator", ["gae", "grpo", "gigpo", "sdpo", "sdpo_grpo"])
def test_swapping_the_estimator_changes_only_that_key(estimator):
    base = OmegaConf.to_container(_compose("preset=cpu"), resolve=False)
    other = OmegaConf.to_container(_compose("preset=cpu", f"algorithm.adv_estimator={estimator}"), resolve=False)
    assert other["algorithm"]["adv_estimator"] == estimator
    other["algorithm"]["adv_estimator"] = base["algorithm"]["adv_estimator"]
    assert other == base
    validate_estimator_config(OmegaConf.to_container(_compose("preset=cpu", f"algorithm.adv_estimator={estimator}")))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["cua.sdpo.is_clip=3.0"], "cua.sdpo.is_clip is set but algorithm.adv_estimator=grpo; cua.sdpo.* needs"),
        (["cua.gigpo.gamma=0.9", "algorithm.adv_estimator=sdpo"], "cua.gigpo.gamma is set but"),
        (["algorithm.adv_estimator=sdpoo"], "algorithm.adv_estimator='sdpoo' is not valid; valid: "),
        (["cua.coso.enable=true", "algorithm.adv_estimator=sdpo"], "cua.coso.enable=true needs PPO's loss, and"),
        (["cua.coso.coef=0.5"], "cua.coso.coef is set but cua.coso.enable=false; set cua.coso.enable=true"),
    ],
)
def test_algorithm_settings_that_cannot_work_together_give_one_line(overrides, expected):
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_cua.integrations.verl.plugin import register_estimators

    register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo

    cfg = OmegaConf.to_container(_compose("preset=cpu", *overrides), resolve=True)
    with pytest.raises(CuaConfigError) as err:
        validate_estimator_config(cfg, registered=tuple(ADV_ESTIMATOR_REGISTRY))
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)
    if "not valid" in expected:
        assert {"grpo", "gigpo", "sdpo", "sdpo_grpo"} <= set(str(err.value).split("valid: ")[1].split(", "))


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"entropulse": {"schedule": "sometimes"}}, "cua.entropulse.schedule='sometimes' is not valid; valid: none"),
        ({"gigpo": {"norm": "max"}}, "cua.gigpo.norm='max' is not valid; valid: mean, std"),
        ({"sdpo": {"teacher": "live"}}, "cua.sdpo.teacher='live' is not valid; valid: current, ema, frozen"),
        ({"sdpo": {"is_clip": 0.5}}, "cua.sdpo.is_clip must be a number >= 1, got 0.5"),
        ({"buffer": {"per_task": 0}}, "cua.buffer.per_task must be a positive integer, got 0"),
        ({"sdpo": {"teachr": "ema"}}, "unknown key cua.sdpo.teachr; valid: loss, topk, alpha"),
        ({"coso": {"lambda": 1.0}}, "unknown key cua.coso.lambda; valid: enable, coef, window"),
        ({"coso": {"window": 0}}, "cua.coso.window must be a positive integer, got 0"),
        ({"coso": {"coef": -1}}, "cua.coso.coef must be a number >= 0, got -1"),
    ],
)
def test_bad_algorithm_section_values_give_one_line(patch, expected):
    cua = OmegaConf.to_container(_compose("preset=cpu").cua)
    for section, values in patch.items():
        cua.setdefault(section, {}).update(values)
    with pytest.raises(CuaConfigError) as err:
        validate_cua_config(cua)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_hydra_defaults_are_the_dataclass_defaults():
    """default.yaml is generated from the dataclasses: the composed `cua` group is exactly CuaConfig()."""
    cua = OmegaConf.to_container(_compose().cua, resolve=True)
    assert cua == CuaConfig().to_dict()
    assert CuaConfig.from_mapping(cua) == CuaConfig()


def test_from_mapping_fills_defaults_and_builds_typed_sections():
    cfg = CuaConfig.from_mapping({"env": {"max_steps": 9, "kwargs": {"provider": "local"}}, "sdpo": {"alpha": 1}})
    assert isinstance(cfg.env, EnvConfig) and isinstance(cfg.trace, TraceConfig)
    assert (cfg.env.max_steps, cfg.env.rows, cfg.env.kwargs) == (9, "episode", {"provider": "local"})
    assert cfg.sdpo.alpha == 1.0 and isinstance(cfg.sdpo.alpha, float)  # an int override of a float key
    assert cfg.trace.log_episodes == 0 and cfg.trace.dir is None
    assert CuaConfig.from_mapping({"sdpo": None}).sdpo == CuaConfig().sdpo  # `~cua.sdpo` or an empty section
    assert cfg.env["max_steps"] == cfg.env.get("max_steps") == 9 and dict(cfg.buffer) == {"per_task": 8}
    assert CuaConfig.of(cfg) is cfg and TraceConfig.of({"dir": "/x"}).dir == "/x"
    with pytest.raises(AttributeError):
        cfg.env.max_steps = 3  # frozen, as verl's BaseConfig


def test_from_mapping_reads_an_omegaconf_node_with_interpolations():
    node = OmegaConf.create({"steps": 7, "cua": {"env": {"max_steps": "${steps}"}}})
    assert CuaConfig.from_mapping(node.cua).env.max_steps == 7


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"trace": {"log_episodes": -1}}, "cua.trace.log_episodes must be an integer >= 0, got -1"),
        ({"trace": {"log_episodes": 1.5}}, "cua.trace.log_episodes must be an integer >= 0, got 1.5"),
        ({"sdpo": {"demo": "yes"}}, "cua.sdpo.demo must be true or false, got 'yes'"),
        ({"env": {"kwargs": [1]}}, "cua.env.kwargs must be a mapping of keyword arguments, got [1]"),
        ({"env": {"history_images": 0}}, "cua.env.history_images must be a positive integer, got 0"),
        ({"env": {"max_steps": True}}, "cua.env.max_steps must be a positive integer, got True"),
        ({"trace": {"dir": 3}}, "cua.trace.dir must be a string, got 3; null is also valid"),
        ({"env": {"image_storage": "jpeg"}}, "cua.env.image_storage='jpeg' is not valid; valid: png, pixel_values"),
        ({"trace": "on"}, "cua.trace must be a mapping of keys, got 'on'"),
    ],
)
def test_every_field_is_checked_with_one_line(patch, expected):
    with pytest.raises(CuaConfigError) as err:
        validate_cua_config(patch)
    assert str(err.value) == expected


def test_trace_log_episodes_is_a_cua_key():
    cfg = _compose("cua.trace.log_episodes=4", "cua.trace.dir=/tmp/t")
    assert CuaConfig.from_mapping(OmegaConf.to_container(cfg.cua)).trace.log_episodes == 4


def test_registered_envs_are_valid_env_names():
    from verl_cua.envs import ENV_REGISTRY, register_env

    with pytest.raises(CuaConfigError, match="cua.env.name='toy-desk' is not valid; valid: miniwob, osworld"):
        validate_cua_config({"env": {"name": "toy-desk"}})
    register_env("toy-desk", lambda **kwargs: None)
    try:
        assert CuaConfig.from_mapping({"env": {"name": "toy-desk"}}).env.name == "toy-desk"
    finally:
        ENV_REGISTRY.pop("toy-desk", None)


def test_the_observation_key_names_the_valid_types_and_the_budget_counts_its_table(scratch_env):
    from verl_cua.envs import EnvSpec

    with pytest.raises(CuaConfigError, match="^cua.env.observation='dom' is not valid; valid: screenshot, a11y_tree"):
        validate_cua_config({"env": {"observation": "dom"}})
    validate_cua_config({"env": {"observation": "a11y_tree"}})  # the table alone: prompts without a screenshot
    name = scratch_env("screens-only", EnvSpec(screen=lambda kwargs: (100, 100)))
    with pytest.raises(CuaConfigError, match="^cua.env.observation=som: env 'screens-only' gives no som observation"):
        validate_cua_config({"env": {"name": name, "observation": "som"}})
    validate_cua_config({"env": {"observation": "som"}})  # MiniWoB++ gives every type


@pytest.mark.parametrize(
    ("cua", "estimator", "expected"),
    [
        ({"planner": {"mode": "online"}}, "grpo", "needs cua.env.rows=step"),
        ({"planner": {"mode": "online"}, "env": {"rows": "step"}, "coso": {"enable": True}}, "grpo", "cua.coso"),
        ({"planner": {"mode": "recorded"}, "executor": {"base_url": "ftp://x"}}, "grpo", "cua.executor: "),
        ({"planner": {"mode": "recorded"}}, "sdpo", "adv_estimator=sdpo is not supported yet"),
        ({"planner": {"mode": "none"}, "executor": {"nmae": 1}}, "grpo", "cua.executor.nmae"),
    ],
)
def test_a_planner_setting_that_cannot_work_is_one_line(cua, estimator, expected):
    with pytest.raises(CuaConfigError, match=re.escape(expected)):
        validate_cua_config(cua)
        validate_estimator_config({"algorithm": {"adv_estimator": estimator}, "cua": cua})
    validate_cua_config({"planner": {"mode": "online"}, "env": {"rows": "step"}})  # the negative control: it works
    validate_estimator_config({"algorithm": {"adv_estimator": "grpo"}, "cua": {"planner": {"mode": "recorded"}}})
