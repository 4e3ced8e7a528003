"""Every `recipes/run_*.sh` parses (`bash -n`), follows verl's recipe style, and composes: each recipe runs with a
stub `python3`/`python` (and `docker`) first on PATH that records its argv, and the Hydra overrides it hands to
`-m verl_cua.main` are composed on `cua_trainer` and checked the way `verl_cua.main` checks them at start
(`validate_cua_config`, `validate_estimator_config`, verl's `validate_config`). No install, download or training."""

import os
import shlex
import subprocess
import warnings
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from verl_cua.integrations.verl.config.checks import validate_cua_config
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.prepare import prepare_config
from verl_cua.recipe_export.record import MAIN, main_overrides, record_calls, write_stubs

ROOT = Path(__file__).resolve().parents[2]
ALL_RECIPES = sorted((ROOT / "recipes").glob("run_*.sh"))
SFT_ONLY = {"run_qwen3vl_sft_osworld.sh"}  # SFT alone: no RL stage (test_sft_recipe_* below)
RECIPES = [r for r in ALL_RECIPES if r.name not in SFT_ONLY]
CONFIG_MODULE = "verl_cua.integrations.verl.config"
SFT_CONFIG_MODULE = "verl_cua.integrations.verl.config.sft"
SFT = ["-m", "verl_cua.sft_main"]
EXTRA = "trainer.total_epochs=3"

# What each recipe claims: estimator, env, action format, rollout engine.
EXPECTED = {
    "run_qwen3vl_sdpo_osworld.sh": {"estimator": "sdpo", "env": "osworld", "format": "qwen3vl", "rollout": "vllm"},
    "run_qwen25vl_grpo_osworld.sh": {"estimator": "grpo", "env": "osworld", "format": "qwen25vl", "rollout": "vllm"},
    "run_qwen25vl_coda_osworld.sh": {"estimator": "grpo", "env": "osworld", "format": "uitars", "rollout": "vllm"},
    "run_qwen3vl_gigpo_osworld.sh": {"estimator": "gigpo", "env": "osworld", "format": "qwen3vl", "rollout": "vllm"},
    "run_tiny_sdpo_miniwob_cpu.sh": {"estimator": "sdpo", "env": "miniwob", "format": "pyautogui", "rollout": "hf"},
    "run_tiny_grpo_miniwob_cpu.sh": {"estimator": "grpo", "env": "miniwob", "format": "pyautogui", "rollout": "hf"},
    "run_tiny_coda_miniwob_cpu.sh": {"estimator": "grpo", "env": "miniwob", "format": "pyautogui", "rollout": "hf"},
    "run_qwen3vl_sft_then_sdpo_osworld.sh": {
        "estimator": "sdpo",
        "env": "osworld",
        "format": "qwen3vl",
        "rollout": "vllm",
    },
}
LADDER = "run_qwen3vl_sft_then_sdpo_osworld.sh"
MODELS = {
    "run_qwen3vl_sdpo_osworld.sh": "Qwen/Qwen3-VL-8B-Instruct",
    "run_qwen25vl_grpo_osworld.sh": "Qwen/Qwen2.5-VL-7B-Instruct",
    "run_qwen3vl_gigpo_osworld.sh": "Qwen/Qwen3-VL-8B-Instruct",
    "run_qwen25vl_coda_osworld.sh": "Qwen/Qwen2.5-VL-32B-Instruct",
}
# CODA's planner recipe (tests/recipes/test_coda_recipe_on_cpu.py): verl gets 6 GPUs of the node, its executor 2
PLANNER = {"run_qwen25vl_coda_osworld.sh", "run_tiny_coda_miniwob_cpu.sh"}
GPUS = {"run_qwen25vl_coda_osworld.sh": 6}


def _ids(paths):
    return [p.name for p in paths]


@pytest.fixture
def stubs(tmp_path):
    """A bin/ with `python3`, `python`, `docker` and `torchrun` that log their argv as one JSON line each and exit 0."""
    return write_stubs(tmp_path / "stub")


def _run(recipe: Path, stubs: Path, tmp_path: Path, *args: str, **env_vars: str) -> list[list[str]]:
    """Run a recipe against the stubs (no install, no download, no training); returns every recorded argv."""
    vm = tmp_path / "Ubuntu.qcow2"
    vm.touch()
    env = {
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "PYTHON": str(stubs / "python3"),  # the GPU recipes
        "VENV": str(stubs.parent),  # the CPU recipe: $VENV/bin/python
        "DATA_DIR": str(tmp_path / "data"),
        "OUT": str(tmp_path / "out"),
        "VM_PATH": str(vm),
        "SFT_CKPT_DIR": str(tmp_path / "sft_ckpt"),  # the ladder's SFT stage
        "EXECUTOR_URL": "http://127.0.0.1:9/v1",  # the CODA recipe: an executor "already serving", so it starts none
        "CKPT_DIR": str(tmp_path / "sft_ckpt"),  # the SFT recipe's
        **env_vars,
    }
    return record_calls(recipe, stubs, tmp_path, *args, env=env)


def _main_overrides(calls: list[list[str]]) -> list[str]:
    return main_overrides(calls)


def _compose(overrides: list[str]):
    kept = [o for o in overrides if not o.lstrip("+~").startswith("hydra.")]
    with initialize_config_module(CONFIG_MODULE, version_base=None):
        cfg = compose("cua_trainer", overrides=kept)
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_cua.integrations.verl.plugin import register_estimators

    register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo

    validate_cua_config(OmegaConf.to_container(cfg.cua, resolve=True))
    prepare_config(cfg, registered=tuple(ADV_ESTIMATOR_REGISTRY))  # as verl_cua.main does before Ray starts
    return cfg


def _verl_validate(cfg) -> None:
    """verl's own start-up checks (batch sizes against GPUs, micro-batches, ...), as `verl_cua.main` runs them."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Disabled critic as algorithm.adv_estimator != gae"
        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_every_recipe_is_listed_here():
    assert _ids(RECIPES) == sorted(EXPECTED), "add the new recipe to EXPECTED"
    assert SFT_ONLY <= {r.name for r in ALL_RECIPES}


@pytest.mark.parametrize("recipe", ALL_RECIPES, ids=_ids(ALL_RECIPES))
def test_bash_n(recipe):
    proc = subprocess.run(["bash", "-n", str(recipe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("recipe", ALL_RECIPES, ids=_ids(ALL_RECIPES))
def test_style(recipe):
    """verl's recipe style: shebang, `set -xeuo pipefail`, one Hydra override per line, `"$@"` last (in the trainer
    call, or in the call of the recipe it hands the trainer to)."""
    lines = recipe.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -xeuo pipefail" in lines
    heads = ("-m verl_cua.main \\", "-m verl_cua.sft_main \\", "bash recipes/run_")
    (start,) = [i for i, line in enumerate(lines) if any(h in line for h in heads) and line.endswith("\\")]
    body = []
    for line in lines[start + 1 :]:
        body.append(line)
        if not line.endswith("\\"):
            break
    assert body[-1].strip() == '"$@"', body[-1]
    for line in body[:-1]:
        words = shlex.split(line.rstrip("\\"))
        assert len(words) == 1, f"one override per line: {line.strip()}"
        assert "=" in words[0] or words[0].startswith("${"), line.strip()
    for line in body[:-1]:
        assert line.endswith(" \\"), line


@pytest.mark.parametrize("recipe", RECIPES, ids=_ids(RECIPES))
def test_recipe_composes_and_validates(recipe, stubs, tmp_path):
    calls = _run(recipe, stubs, tmp_path, EXTRA)
    overrides = _main_overrides(calls)
    assert overrides[-1] == EXTRA  # "$@" passes through, last
    cfg = _compose(overrides)
    want = EXPECTED[recipe.name]
    assert cfg.algorithm.adv_estimator == want["estimator"]
    assert cfg.cua.env.name == want["env"]
    assert cfg.cua.action.format == want["format"]
    assert cfg.actor_rollout_ref.rollout.name == want["rollout"]
    assert cfg.trainer.total_epochs == 3
    datasets = [c for c in calls if c[1:3] == ["-m", "verl_cua.integrations.verl.dataset"]]
    assert all(d[d.index("--env") + 1] == want["env"] for d in datasets)
    assert [d[d.index("--out") + 1] for d in datasets][: 1 + (cfg.data.val_files != cfg.data.train_files)] == [
        cfg.data.train_files,
        *([cfg.data.val_files] if cfg.data.val_files != cfg.data.train_files else []),
    ]
    if want["estimator"] in ("sdpo", "sdpo_grpo"):
        assert cfg.actor_rollout_ref.actor.use_kl_loss is False and cfg.algorithm.use_kl_in_reward is False
    if want["env"] == "osworld":
        assert cfg.cua.env.kwargs.provider == "docker"
        assert cfg.cua.env.kwargs.path_to_vm == str(tmp_path / "Ubuntu.qcow2")
        ladder = recipe.name == LADDER
        want_model = str(tmp_path / "sft_ckpt" / "global_step_7" / "huggingface") if ladder else MODELS[recipe.name]
        assert cfg.actor_rollout_ref.model.path == want_model
        assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, GPUS.get(recipe.name, 8))
        assert cfg.trainer.device == "cuda" and cfg.actor_rollout_ref.actor.strategy == "fsdp2"
        assert list(cfg.trainer.logger) == ["console", "wandb"]
        assert cfg.trainer.max_actor_ckpt_to_keep == cfg.trainer.max_critic_ckpt_to_keep == 2  # CKPT_KEEP
        assert cfg.cua.entropulse.schedule == ("fixed" if ladder else "none")  # off by default, on in the ladder
    elif recipe.name == "run_tiny_grpo_miniwob_cpu.sh":  # the learnable setting (docs/learning.md)
        assert cfg.trainer.device == "cpu" and cfg.actor_rollout_ref.actor.optim.lr == 2e-3
        actor = cfg.actor_rollout_ref.actor
        assert (cfg.data.train_batch_size, actor.ppo_mini_batch_size, cfg.actor_rollout_ref.rollout.n) == (4, 2, 8)
        assert cfg.trainer.total_training_steps == 60 and actor.use_kl_loss and actor.kl_loss_coef == 0.05
        assert cfg.cua.env.max_steps == 1 and cfg.cua.env.name == "miniwob"
        assert cfg.data.val_files.endswith("heldout.parquet") and cfg.trainer.val_before_train
        val = cfg.actor_rollout_ref.rollout.val_kwargs
        assert (val.do_sample, val.temperature, val.n) == (True, 1.0, 2)
    elif recipe.name == "run_tiny_coda_miniwob_cpu.sh":  # CODA on the CPU: the planner online, the stand-in executing
        actor = cfg.actor_rollout_ref.actor
        assert cfg.trainer.device == "cpu" and (cfg.cua.planner.mode, cfg.cua.planner.spec) == ("online", "coda")
        assert cfg.cua.executor.kind == "standin_grounding" and cfg.cua.env.rows == "step"
        assert cfg.cua.env.observation == "screenshot_a11y_tree"
        assert (actor.kl_loss_type, actor.loss_agg_mode) == ("low_var_kl", "seq-mean-token-mean") and actor.use_kl_loss
        assert (cfg.data.train_batch_size, actor.ppo_mini_batch_size, cfg.actor_rollout_ref.rollout.n) == (4, 2, 8)
    else:
        assert cfg.trainer.device == "cpu"
        assert cfg.actor_rollout_ref.rollout.n == 8 and cfg.trainer.total_training_steps == 2
        assert cfg.cua.env.max_steps == 2 and cfg.cua.action.max_tokens_per_step == 48
        pulse = cfg.cua.entropulse
        assert (pulse.schedule, pulse.rl_steps, pulse.sft_steps, pulse.sft_batch_size) == ("fixed", 2, 1, 2)
        assert cfg.cua.trace.dir == str(tmp_path / "out" / "trace") and cfg.cua.trace.every == 1
    if recipe.name == "run_qwen3vl_sdpo_osworld.sh":  # the flagship traces 2 of 16 groups every 20 steps
        trace = cfg.cua.trace
        assert (trace.dir, trace.every, trace.fraction) == ("outputs/qwen3vl8b_sdpo_osworld/trace", 20, 0.125)
    _verl_validate(cfg)


def test_flagship_lora_switch(stubs, tmp_path):
    recipe = ROOT / "recipes" / "run_qwen3vl_sdpo_osworld.sh"
    full = _compose(_main_overrides(_run(recipe, stubs, tmp_path)))
    assert full.actor_rollout_ref.model.lora_rank == 0  # full fine-tune by default
    lora = _compose(_main_overrides(_run(recipe, stubs, tmp_path, LORA_RANK="16")))
    model = lora.actor_rollout_ref.model
    assert (model.lora_rank, model.target_modules) == (16, "all-linear")
    assert model.exclude_modules == ".*visual.*"  # vLLM gets no vision-tower adapters: the tower must not train
    assert full.actor_rollout_ref.model.exclude_modules == ".*visual.*"  # cua_trainer's default, for any LoRA run
    assert model.lora_alpha > 0
    assert lora.actor_rollout_ref.actor.optim.lr > full.actor_rollout_ref.actor.optim.lr  # LoRA's larger default lr


def test_flagship_entropulse_knobs(stubs, tmp_path):
    recipe = ROOT / "recipes" / "run_qwen3vl_sdpo_osworld.sh"
    cfg = _compose(_main_overrides(_run(recipe, stubs, tmp_path, ENTROPULSE="entropy", ENTROPULSE_RATIO="0.4")))
    assert (cfg.cua.entropulse.schedule, cfg.cua.entropulse.ratio) == ("entropy", 0.4)


def test_plus_and_hydra_overrides_pass_through(stubs, tmp_path):
    """`+new.key=...` reaches the config; `hydra.*` reaches `verl_cua.main` and is dropped before compose."""
    recipe = ROOT / "recipes" / "run_tiny_sdpo_miniwob_cpu.sh"
    overrides = _main_overrides(
        _run(recipe, stubs, tmp_path, "hydra.run.dir=/tmp/x", "+cua.env.kwargs.screenshot_scale=2")
    )
    assert overrides[-2:] == ["hydra.run.dir=/tmp/x", "+cua.env.kwargs.screenshot_scale=2"]
    assert _compose(overrides).cua.env.kwargs.screenshot_scale == 2


def test_gigpo_a11y_anchor_asks_osworld_for_the_tree(stubs, tmp_path):
    recipe = ROOT / "recipes" / "run_qwen3vl_gigpo_osworld.sh"
    default = _compose(_main_overrides(_run(recipe, stubs, tmp_path)))
    assert default.cua.env.kwargs.require_a11y_tree is False
    cfg = _compose(_main_overrides(_run(recipe, stubs, tmp_path, GIGPO_ANCHOR="a11y")))
    assert (cfg.cua.gigpo.anchor, cfg.cua.env.kwargs.require_a11y_tree) == ("a11y", True)


@pytest.mark.parametrize("recipe", RECIPES, ids=_ids(RECIPES))
def test_estimator_swaps_with_one_key(recipe, stubs, tmp_path):
    """`algorithm.adv_estimator=...` appended to any recipe composes and validates for each estimator (the
    recipes' own estimator knobs are at their defaults, which the other estimators accept). A planner recipe swaps to
    grpo and gigpo: planner mode refuses SDPO's teacher in one line (test_coda_recipe_on_cpu.py)."""
    swaps = ("grpo", "gigpo") if recipe.name in PLANNER else ("grpo", "gigpo", "sdpo", "sdpo_grpo")
    for estimator in swaps:
        cfg = _compose(_main_overrides(_run(recipe, stubs, tmp_path, f"algorithm.adv_estimator={estimator}")))
        assert cfg.algorithm.adv_estimator == estimator


def test_changed_knobs_of_another_estimator_fail(stubs, tmp_path):
    """A non-default GiGPO knob with the estimator swapped to grpo is caught at start, in one line."""
    recipe = ROOT / "recipes" / "run_qwen3vl_gigpo_osworld.sh"
    overrides = _main_overrides(_run(recipe, stubs, tmp_path, "algorithm.adv_estimator=grpo", GIGPO_GAMMA="0.9"))
    with pytest.raises(CuaConfigError, match="cua.gigpo.gamma is set but algorithm.adv_estimator=grpo"):
        _compose(overrides)


def test_cpu_recipe_names_the_quickstart_without_a_venv(tmp_path):
    recipe = ROOT / "recipes" / "run_tiny_sdpo_miniwob_cpu.sh"
    env = {"PATH": os.environ["PATH"], "VENV": str(tmp_path / "none"), "OUT": str(tmp_path / "out")}
    proc = subprocess.run(["bash", str(recipe)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "bash recipes/quickstart.sh" in proc.stderr.strip().splitlines()[-1]


def test_an_osworld_recipe_whose_interpreter_does_not_run_says_so_in_one_line(tmp_path):
    """PYTHON names a program that is no working Python (tests/doctor/test_preflight_on_cpu.py has the interpreters
    that lack a package): the recipe stops with one line naming it, before the dataset step."""
    recipe = ROOT / "recipes" / "run_qwen3vl_sdpo_osworld.sh"
    env = {"PATH": os.environ["PATH"], "PYTHON": "false", "DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run(["bash", str(recipe)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and not (tmp_path / "data").exists()
    assert proc.stderr.strip().splitlines()[-1].startswith("run_qwen3vl_sdpo_osworld.sh: PYTHON=false (")
    assert "does not run as Python (exit 1)" in proc.stderr.strip().splitlines()[-1]


def test_gpu_smoke_runs_each_estimator_with_lora_off_and_on(stubs, tmp_path):
    recipe = ROOT / "recipes" / "gpu_smoke.sh"
    assert subprocess.run(["bash", "-n", str(recipe)]).returncode == 0
    calls = _run(recipe, stubs, tmp_path, EXTRA)
    runs = [c[3:] for c in calls if c[0].startswith("python") and c[1:3] == MAIN]
    seen, offloaded = set(), []
    for overrides in runs:
        assert overrides[-1] == EXTRA  # "$@" reaches every run, last
        cfg = _compose(overrides)
        model = cfg.actor_rollout_ref.model
        if cfg.actor_rollout_ref.actor.fsdp_config.param_offload:
            offloaded.append((cfg.algorithm.adv_estimator, cfg.cua.sdpo.teacher, model.lora_rank))
        else:
            seen.add((cfg.algorithm.adv_estimator, model.lora_rank))
        assert cfg.actor_rollout_ref.rollout.name == "vllm" and cfg.trainer.n_gpus_per_node == 1
        assert cfg.trainer.total_training_steps == 2 and cfg.cua.env.name == "miniwob"
        assert model.exclude_modules == ".*visual.*" and model.path == "Qwen/Qwen2.5-VL-3B-Instruct"
        assert cfg.actor_rollout_ref.rollout.max_model_len == cfg.data.max_prompt_length + cfg.data.max_response_length
        if not model.lora_rank:  # verl checks the installed vLLM's version for LoRA: none is installed here
            _verl_validate(cfg)
    assert seen == {(e, r) for e in ("grpo", "sdpo", "gigpo") for r in (0, 16)}
    assert offloaded == [("sdpo", "ema", 0)]  # the EMA teacher under verl's non-blocking offload
    assert calls[-1][1:3] == ["-m", "verl_cua.testing.smoke_runs"]


def _sft_compose(overrides: list[str]):
    """The SFT trainer's config as `python -m verl_cua.sft_main` composes it."""
    with initialize_config_module(SFT_CONFIG_MODULE, version_base=None):
        return compose("cua_sft", overrides=[o for o in overrides if not o.lstrip("+~").startswith("hydra.")])


def test_sft_recipe_builds_rows_in_the_rl_layout_and_composes(stubs, tmp_path):
    recipe = ROOT / "recipes" / "run_qwen3vl_sft_osworld.sh"
    calls = _run(recipe, stubs, tmp_path, EXTRA.replace("trainer.total_epochs=3", "trainer.total_epochs=5"),
                 SFT_RUNS="runs/claude,runs/trace")  # fmt: skip
    (data,) = [c for c in calls if c[1:4] == ["-m", "verl_cua.cli", "sft-data"]]
    assert data[4:6] == ["runs/claude", "runs/trace"]
    flags = dict(zip(data[6::2], data[7::2], strict=True))
    # the RL flagship's layout: step rows, 3 screenshots, its pixel cap; actions re-rendered for Qwen3-VL
    assert (flags["--format"], flags["--rows"], flags["--history-images"]) == ("qwen3vl", "step", "3")
    assert flags["--max-pixels"] == "1003520" and flags["--model"] == "Qwen/Qwen3-VL-8B-Instruct"
    (run,) = [c for c in calls if c[0] == "torchrun"]
    assert "--nproc_per_node=8" in run and run[run.index("-m") : run.index("-m") + 2] == SFT
    overrides = run[run.index("-m") + 2 :]
    assert overrides[-1] == "trainer.total_epochs=5"  # "$@" last
    cfg = _sft_compose(overrides)
    assert cfg.data.train_files == flags["--out"] and cfg.model.path == "Qwen/Qwen3-VL-8B-Instruct"
    assert (cfg.data.messages_key, cfg.data.image_key, cfg.data.pad_mode) == ("messages", "images", "no_padding")
    assert cfg.engine.strategy == "fsdp2" and cfg.trainer.total_epochs == 5 and cfg.trainer.n_gpus_per_node == 8
    assert "hf_model" in cfg.checkpoint.save_contents  # the folder RL starts from
    assert cfg.trainer.max_ckpt_to_keep == 2  # CKPT_KEEP
    assert cfg.model.exclude_modules == ".*visual.*" and cfg.model.lora_rank == 0


def test_the_ladder_trains_sft_then_sdpo_with_entropulse_from_its_checkpoint(stubs, tmp_path):
    recipe = ROOT / "recipes" / LADDER
    calls = _run(recipe, stubs, tmp_path, EXTRA, SFT_RUNS="runs/claude", SFT_ARGS="optim.lr=2e-5")
    sft = [c for c in calls if c[0] == "torchrun"]
    assert len(sft) == 1 and sft[0][-1] == "optim.lr=2e-5"  # SFT_ARGS reach the SFT stage, "$@" does not
    assert _sft_compose(sft[0][sft[0].index("-m") + 2 :]).optim.lr == 2e-5
    cfg = _compose(_main_overrides(calls))
    assert cfg.actor_rollout_ref.model.path == str(tmp_path / "sft_ckpt" / "global_step_7" / "huggingface")
    assert cfg.algorithm.adv_estimator == "sdpo" and cfg.cua.entropulse.schedule == "fixed"
    assert cfg.trainer.total_epochs == 3
    # a rerun finds the SFT checkpoint and goes straight to RL
    calls = _run(recipe, stubs, tmp_path, EXTRA)
    assert not [c for c in calls if c[0] == "torchrun"] and len([c for c in calls if c[1:3] == MAIN]) == 1
