"""The recipe's side: its Hydra overrides (the recipe run with a recording `python`, nothing installed, downloaded
or trained), composed and checked as `verl_cua.main` checks them before Ray starts, then its budgets."""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from verl_cua.doctor.finding import Finding
from verl_cua.doctor.recipe_source import RecipeSource, dataset_tasks, recipe_calls, resolve_recipe, trainer_runs
from verl_cua.doctor.schedule import first_step_finding
from verl_cua.doctor.tasks import task_set_findings
from verl_cua.resources import install_hint

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import EnvConfig


def compose(overrides: list[str], source: RecipeSource) -> Any:
    """The recipe's config composed with `overrides` (hydra.* ones dropped), as its trainer call composes it:
    `cua_trainer` from the package, or an exported recipe's own config on verl's ppo_trainer."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir, initialize_config_module

    kept = [o for o in overrides if not o.lstrip("+~").startswith("hydra.")]
    if source.config_dir is not None:
        with initialize_config_dir(str(source.config_dir), version_base=None):
            return hydra_compose(source.config_name, overrides=kept)
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        return hydra_compose(source.config_name, overrides=kept)


def _unchecked(source: RecipeSource, runs: int) -> Finding | None:
    """Without the trainer's stack the recipe's config cannot be composed: one line naming its install."""
    needed = {"verl": "verl", "hydra": "hydra-core", "omegaconf": "omegaconf"}  # module -> distribution
    missing = [dist for module, dist in needed.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return Finding("warn", "recipe", f"{source.label}: {runs} trainer run(s) recorded; composing their config and "
                                     f"budgets needs {', '.join(missing)}: {install_hint('verl')}")  # fmt: skip


def recipe_findings(recipe: str | RecipeSource, extra: list[str]) -> tuple[list[Finding], dict[str, Any] | None]:
    """Compose and check the recipe's config; findings and the resolved config (None when it does not compose).
    Without verl (the core install) the recipe is only run with stubs, and one line names the install."""
    from verl_cua.integrations.verl.config.budget import row_budget, step_memory
    from verl_cua.integrations.verl.config.fields import CuaConfigError
    from verl_cua.integrations.verl.config.schema import CuaConfig

    source = recipe if isinstance(recipe, RecipeSource) else resolve_recipe(recipe)
    name = source.label
    try:
        calls = recipe_calls(source)
        runs = trainer_runs(source, calls)
        tasks_named = dataset_tasks(calls)
        unchecked = _unchecked(source, len(runs))
        if unchecked:
            return [unchecked, *_task_findings(tasks_named)], None
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

        from verl_cua.integrations.verl.plugin import register_estimators

        register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo
        from omegaconf import OmegaConf

        from verl_cua.integrations.verl.config.checks import validate_cua_config
        from verl_cua.integrations.verl.config.prepare import prepare_config

        attention = logging.getLogger("verl_cua.integrations.verl.fixes.attention")
        level, attention.level = attention.level, logging.ERROR  # the flash-attn finding has its own line
        try:
            for overrides in reversed(runs):  # every run must compose; the first is described
                cfg = compose([*overrides, *extra], source)
                validate_cua_config(OmegaConf.to_container(cfg.cua, resolve=True))
                prepare_config(cfg, registered=tuple(ADV_ESTIMATOR_REGISTRY))
        finally:
            attention.setLevel(level)
    except CuaConfigError as exc:
        return [Finding("FAIL", "config", str(exc))], None
    except Exception as exc:  # a recipe that does not run or compose
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [Finding("FAIL", "recipe", f"{name}: {reason}")], None
    config = OmegaConf.to_container(cfg, resolve=True)
    budget = row_budget(config)
    memory = step_memory(config, budget)
    env = CuaConfig.from_mapping(config["cua"]).env
    rollout = config["actor_rollout_ref"]["rollout"]
    model = config["actor_rollout_ref"]["model"]["path"]
    findings = [
        Finding("ok", "recipe", f"{name}: {len(runs)} run(s) compose; {config['algorithm']['adv_estimator']} on "
                                f"{env.name}, {rollout['name']} rollout, {model}"),
        Finding("info", "tokens", f"a screenshot {budget.image_size[0]}x{budget.image_size[1]} = {budget.image_tokens} "
                                  f"tokens; rows={env.rows}: " + _row_line(env, budget)),
        Finding("info", "host memory", f"~{memory.total / 1e9:.1f} GB a step in TransferQueue ({memory.rows} rows, "
                                       f"{memory.images} screenshots as {env.image_storage})"),
    ]  # fmt: skip
    if rollout["name"] in ("vllm", "sglang"):
        findings.append(Finding("info", "max_model_len", f"{rollout.get('max_model_len')} (prompt + response)"))
    first = first_step_finding(config)
    return [*findings, *([first] if first else []), *_task_findings(tasks_named)], config


def _task_findings(tasks: list[str]) -> list[Finding]:
    """The task-set check of each dataset step's `TASKS` (its own findings, apart from the recipe's)."""
    return [f for t in tasks for f in task_set_findings(t)]


def _row_line(env: EnvConfig, budget: Any) -> str:
    if env.rows == "step":
        return (f"a step prompt needs ~{budget.step_prompt} of {budget.prompt_length} tokens "
                f"({env.history_images} screenshots, {env.max_steps - 1} earlier actions)")  # fmt: skip
    return (f"an episode needs ~{budget.episode_response} of {budget.response_length} response tokens "
            f"({env.max_steps} turns of ~{budget.turn})")  # fmt: skip
