"""The recipe's side: its Hydra overrides (the recipe run with a recording `python`, nothing installed, downloaded
or trained), composed and checked as `verl_cua.main` checks them before Ray starts, then its budgets."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_cua.doctor.finding import Finding
from verl_cua.recipe_export.record import MAIN, RecipeRunError, record_calls, write_stubs

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import EnvConfig


def recorded_commands(recipe: str | Path, *args: str, env: dict[str, str] | None = None) -> list[list[str]]:
    """Run `recipe` with `python3`/`python`/`docker`/`torchrun` that only record their argv; every recorded command."""
    with tempfile.TemporaryDirectory() as tmp:
        stubs = write_stubs(Path(tmp))
        run_env = {**os.environ, "PYTHON": str(stubs / "python3"), "VENV": tmp, "VERL_CUA_COMPOSE_ONLY": "1"}
        try:
            return record_calls(Path(recipe), stubs, Path.cwd(), *args, env={**run_env, **(env or {})})
        except RecipeRunError as exc:
            raise RuntimeError(f"{recipe} failed before training: {str(exc).strip().splitlines()[-1:]}") from None


def main_overrides(commands: list[list[str]]) -> list[list[str]]:
    """The Hydra overrides of each `python -m verl_cua.main` the recipe runs (most run one)."""
    mains = [c[3:] for c in commands if c[0].startswith("python") and c[1:3] == MAIN]
    if not mains:
        raise RuntimeError("the recipe runs no `python -m verl_cua.main`")
    return mains


def compose(overrides: list[str]) -> Any:
    """`cua_trainer` composed with `overrides` (hydra.* ones dropped), as `python -m verl_cua.main` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    kept = [o for o in overrides if not o.lstrip("+~").startswith("hydra.")]
    with initialize_config_module("verl_cua.integrations.verl.config", version_base=None):
        return hydra_compose("cua_trainer", overrides=kept)


def recipe_findings(recipe: str, extra: list[str]) -> tuple[list[Finding], dict[str, Any] | None]:
    """Compose and check the recipe's config; findings and the resolved config (None when it does not compose)."""
    from omegaconf import OmegaConf

    from verl_cua.integrations.verl.config.budget import row_budget, step_memory
    from verl_cua.integrations.verl.config.checks import validate_cua_config
    from verl_cua.integrations.verl.config.fields import CuaConfigError
    from verl_cua.integrations.verl.config.prepare import prepare_config
    from verl_cua.integrations.verl.config.schema import CuaConfig

    name = Path(recipe).name
    try:
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

        from verl_cua.integrations.verl.plugin import register_estimators

        register_estimators()  # sdpo, sdpo_grpo, gigpo; loss sdpo

        runs = main_overrides(recorded_commands(recipe))
        attention = logging.getLogger("verl_cua.integrations.verl.fixes.attention")
        level, attention.level = attention.level, logging.ERROR  # the flash-attn finding has its own line
        try:
            for overrides in reversed(runs):  # every run must compose; the first is described
                cfg = compose([*overrides, *extra])
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
    return findings, config


def _row_line(env: EnvConfig, budget: Any) -> str:
    if env.rows == "step":
        return (f"a step prompt needs ~{budget.step_prompt} of {budget.prompt_length} tokens "
                f"({env.history_images} screenshots, {env.max_steps - 1} earlier actions)")  # fmt: skip
    return (f"an episode needs ~{budget.episode_response} of {budget.response_length} response tokens "
            f"({env.max_steps} turns of ~{budget.turn})")  # fmt: skip
