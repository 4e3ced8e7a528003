"""`preset=osworld` (config/preset/osworld.yaml) holds what the OSWorld recipes share. Each OSWorld recipe selects
it, passes none of its constants itself and only variables over its other keys, at the preset's values; the composed
config is the one the recipes had when they passed every setting inline (the preset's settings given as overrides
instead compose to the same config), a user's variable still wins over the preset, and the preset composes and
validates on its own, as docs/recipes.md shows it."""

import os
import re
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from verl_cua.integrations.verl.config.checks import validate_cua_config
from verl_cua.integrations.verl.config.prepare import prepare_config
from verl_cua.recipe_export.record import main_overrides, record_calls, write_stubs

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "verl_cua" / "integrations" / "verl" / "config" / "preset" / "osworld.yaml"
OSWORLD = ["run_qwen3vl_sdpo_osworld.sh", "run_qwen3vl_gigpo_osworld.sh", "run_qwen25vl_grpo_osworld.sh"]
LADDER = "run_qwen3vl_sft_then_sdpo_osworld.sh"  # its RL stage is the flagship's
MISSING = object()


def _leaves(node, prefix=""):
    """{dotted key: value} of every leaf of a nested dict."""
    out = {}
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


PRESET_KEYS = _leaves(yaml.safe_load(PRESET.read_text()))


def _overrides(recipe: str, tmp_path: Path, *args: str, **env_vars: str) -> list[str]:
    """The overrides `recipe` hands to `python -m verl_cua.main` (run with recording stubs; nothing runs)."""
    stubs = write_stubs(tmp_path / "stub")
    vm = tmp_path / "Ubuntu.qcow2"
    vm.touch()
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PYTHON": str(stubs / "python3"), "VM_PATH": str(vm),
           "DATA_DIR": str(tmp_path / "data"), "SFT_CKPT_DIR": str(tmp_path / "sft"), "SFT_RUNS": "runs/x",
           "VERL_CUA_COMPOSE_ONLY": "1", **env_vars}  # fmt: skip
    return main_overrides(record_calls(ROOT / "recipes" / recipe, stubs, tmp_path, *args, env=env))


def _compose(overrides: list[str]):
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        return compose("cua_trainer", overrides=[o for o in overrides if not o.lstrip("+~").startswith("hydra.")])


def _plain(value):
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _trainer_call(recipe: str) -> list[str]:
    """The override lines of the recipe's `-m verl_cua.main` call, as written."""
    lines = (ROOT / "recipes" / recipe).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("-m verl_cua.main \\"))
    body = []
    for line in lines[start + 1 :]:
        body.append(line.strip().removesuffix("\\").strip())
        if not line.endswith("\\"):
            break
    return body


@pytest.mark.parametrize("recipe", [*OSWORLD, LADDER])
def test_each_osworld_recipe_runs_on_the_preset_at_its_values(recipe, tmp_path):
    overrides = _overrides(recipe, tmp_path)
    assert overrides[0] == "preset=osworld" and overrides.count("preset=osworld") == 1
    cfg = _compose(overrides)
    for key, value in PRESET_KEYS.items():  # the preset's values are the recipes' defaults
        assert _plain(OmegaConf.select(cfg, key)) == value, key
    actor, rollout, env = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout, cfg.cua.env
    assert (rollout.name, actor.strategy, env.name, env.kwargs.provider) == ("vllm", "fsdp2", "osworld", "docker")
    assert cfg.actor_rollout_ref.model.enable_gradient_checkpointing and cfg.actor_rollout_ref.model.use_remove_padding
    assert actor.entropy_coeff == 0 and cfg.algorithm.use_kl_in_reward is False
    assert (env.rows, env.max_steps, env.history_images, env.max_pixels, env.pool_size) == ("step", 15, 3, 1003520, 4)
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length, cfg.cua.action.max_tokens_per_step) == (
        8192,
        1024,
        512,
    )
    assert cfg.trainer.val_before_train is False
    assert cfg.trainer.max_actor_ckpt_to_keep == cfg.trainer.max_critic_ckpt_to_keep == 2
    assert env.kwargs.path_to_vm == str(tmp_path / "Ubuntu.qcow2")  # osworld_preflight.sh's VM_ARGS still reach it


@pytest.mark.parametrize("recipe", OSWORLD)
def test_a_recipe_passes_no_constant_of_the_preset(recipe):
    """A key the preset holds appears in the recipe only when a variable sets it (the variable must keep working)."""
    for line in _trainer_call(recipe):
        key = line.split("=", 1)[0].lstrip("+~")
        if key in PRESET_KEYS:
            assert re.search(r"\$\{[A-Z][A-Z0-9_]*\}", line), f"{recipe}: {line} is the preset's; drop it"
            assert not line.startswith("+"), f"{recipe}: {line}: the preset has the key, set it without `+`"


@pytest.mark.parametrize("recipe", [*OSWORLD, LADDER])
def test_the_preset_composes_as_its_settings_given_inline(recipe, tmp_path):
    """The recipe's config equals the one composed without the preset and with its settings as overrides in front
    (how the recipes passed them before the preset)."""
    overrides = _overrides(recipe, tmp_path, "trainer.total_epochs=3")
    bare = _compose([])
    inline = []
    for key, value in PRESET_KEYS.items():
        add = "" if OmegaConf.select(bare, key, default=MISSING) is not MISSING else "+"
        inline.append(f"{add}{key}={str(value).lower() if isinstance(value, bool) else value}")
    assert overrides[0] == "preset=osworld"
    assert _plain(_compose(overrides)) == _plain(_compose([*inline, *overrides[1:]]))


def test_the_recipes_variables_still_win_over_the_preset(tmp_path):
    recipe = "run_qwen3vl_sdpo_osworld.sh"
    cfg = _compose(_overrides(recipe, tmp_path, NNODES="2", N_GPUS_PER_NODE="4", CKPT_KEEP="null", MAX_STEPS="20",
                              LOGGER="[console]", PARAM_OFFLOAD="true", PROVIDER="local", ROWS="episode",
                              MAX_RESPONSE_LENGTH="24000", POOL_SIZE="2"))  # fmt: skip
    trainer, env = cfg.trainer, cfg.cua.env
    assert (trainer.nnodes, trainer.n_gpus_per_node, list(trainer.logger)) == (2, 4, ["console"])
    assert trainer.max_actor_ckpt_to_keep is None and trainer.max_critic_ckpt_to_keep is None
    assert (env.max_steps, env.kwargs.provider, env.rows, env.pool_size) == (20, "local", "episode", 2)
    assert "path_to_vm" not in env.kwargs  # the docker image is the docker provider's alone
    assert cfg.actor_rollout_ref.actor.fsdp_config.param_offload is True
    assert cfg.data.max_response_length == 24000
    # and an appended override wins over both
    cfg = _compose(_overrides(recipe, tmp_path, "actor_rollout_ref.rollout.name=sglang", "cua.env.max_steps=7"))
    assert (cfg.actor_rollout_ref.rollout.name, cfg.cua.env.max_steps) == ("sglang", 7)


def test_the_preset_alone_composes_and_validates():
    """The command docs/recipes.md gives for a run without a recipe."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_cua.integrations.verl.plugin import register_estimators

    register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo

    cfg = _compose(["preset=osworld", "actor_rollout_ref.model.path=Qwen/Qwen3-VL-8B-Instruct",
                    "cua.action.format=qwen3vl", "data.train_files=data/osworld/train.parquet",
                    "data.val_files=data/osworld/train.parquet"])  # fmt: skip
    assert (cfg.cua.env.name, cfg.actor_rollout_ref.rollout.name, cfg.trainer.device) == ("osworld", "vllm", "cuda")
    validate_cua_config(OmegaConf.to_container(cfg.cua, resolve=True))
    prepare_config(cfg, registered=tuple(ADV_ESTIMATOR_REGISTRY))


@pytest.mark.parametrize("recipe", OSWORLD, ids=OSWORLD)
def test_step_one_learns_in_the_composed_config(recipe, tmp_path):
    """verl's own scheduler builder on the composed optimizer config: step 1's updates run above lr 0 (verl's constant
    schedule, the negative control, gives 0 there), lr/W on a W-step warm-up, the full lr with none."""
    from verl_cua.doctor.schedule import first_step_lr

    optim = _plain(_compose(_overrides(recipe, tmp_path)).actor_rollout_ref.actor.optim)
    lr, warmup = first_step_lr(optim, total_steps=1000)
    assert lr == pytest.approx(optim["lr"] / max(warmup, 1)) and lr > 0  # the flagship warms up over 10 steps
    warm = {**optim, "lr_warmup_steps": 10}  # a recipe without a warm-up, given one
    assert first_step_lr(warm, total_steps=1000)[0] == pytest.approx(optim["lr"] / 10)
    assert first_step_lr({**warm, "lr_scheduler_type": "constant"}, total_steps=1000)[0] == 0.0
    assert first_step_lr({**warm, "lr_warmup_steps": 1}, total_steps=1000)[0] == pytest.approx(optim["lr"])


def test_shakedown_saves_after_step_one_and_resumes_once_then_goes_on(tmp_path):
    """SHAKEDOWN=1: a 1-step run that saves, a 2-step run (verl resumes the latest checkpoint) that saves, then the
    run itself; the user's overrides last in each. Without it, one run."""
    stubs = write_stubs(tmp_path / "stub")
    vm = tmp_path / "Ubuntu.qcow2"
    vm.touch()
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PYTHON": str(stubs / "python3"), "VM_PATH": str(vm),
           "DATA_DIR": str(tmp_path / "data"), "VERL_CUA_COMPOSE_ONLY": "1", "SHAKEDOWN": "1"}  # fmt: skip
    calls = record_calls(ROOT / "recipes" / OSWORLD[0], stubs, tmp_path, "trainer.total_epochs=3", env=env)
    runs = [c[3:] for c in calls if c[1:3] == ["-m", "verl_cua.main"]]
    assert len(runs) == 3 and all(run[-1] == "trainer.total_epochs=3" for run in runs)
    configs = [_compose(run).trainer for run in runs]
    assert [(c.total_training_steps, c.save_freq, c.resume_mode) for c in configs] == [
        (1, 1, "auto"),
        (2, 1, "auto"),
        (None, 20, "auto"),
    ]
    assert len(_overrides(OSWORLD[0], tmp_path)) > 0  # SHAKEDOWN unset: main_overrides finds exactly one run


@pytest.mark.parametrize("bad", [{"lr_scheduler_type": "stepwise"}, {"lr_warmup_steps": None}])
def test_a_schedule_verl_refuses_is_one_finding_not_a_traceback(bad):
    from verl_cua.doctor.schedule import first_step_finding

    optim = {"lr": 1e-6, "lr_warmup_steps": 10, "lr_scheduler_type": "cosine", **bad}
    finding = first_step_finding({"actor_rollout_ref": {"actor": {"optim": optim}}, "trainer": {}})
    assert finding is not None and "\n" not in finding.detail
    assert finding.level == "warn" if "lr_scheduler_type" in bad else finding.level in ("ok", "warn")
