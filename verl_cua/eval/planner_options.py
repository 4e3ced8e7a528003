"""`verl-cua eval --planner`'s options: the `executor_*` fields of `EvalConfig` as `ExecutorSettings`, their checks
(one line naming the valid values), what binds a resumed run, and the run's `PlannerRun`."""

from __future__ import annotations

from typing import Any

from verl_cua.eval.endpoint import ChatClient, EndpointError
from verl_cua.eval.episode import RunAborted
from verl_cua.eval.executor import ExecutorSettings
from verl_cua.eval.planner import PlannerRun

# EvalConfig's executor_* fields -> ExecutorSettings' (None: the setting's default)
EXECUTOR_FIELDS = {"executor_kind": "kind", "executor_base_url": "base_url", "executor_model": "model",
                   "executor_format": "format", "executor_timeout": "timeout_s", "executor_retries": "retries",
                   "executor_api_key_env": "api_key_env", "executor_extra_body": "extra_body"}  # fmt: skip
# the executor settings a resumed run must share with the run it resumes: those that change its actions
EXECUTOR_BINDING = ("kind", "model", "format", "temperature", "max_tokens", "extra_body")


def executor_settings(config: Any) -> ExecutorSettings:
    """The executor's settings from an `EvalConfig`'s `executor_*` fields (unset ones: `ExecutorSettings`')."""
    given = {name: getattr(config, key) for key, name in EXECUTOR_FIELDS.items() if getattr(config, key) is not None}
    return ExecutorSettings(**{**given, "extra_body": dict(config.executor_extra_body or {})})


def check_planner(config: Any, defaults: Any) -> None:
    """Planner mode's options: a known spec, executor kind and format, an OpenAI-compatible planner endpoint; an
    executor option without `--planner` (a field that differs from `defaults`) is a mistake."""
    from verl_cua.actions import FORMAT_REGISTRY
    from verl_cua.actions.planner import PLANNER_SPECS
    from verl_cua.envs.observation import shows_elements
    from verl_cua.eval.executor import EXECUTORS

    if config.planner is None:
        changed = [key for key in EXECUTOR_FIELDS if getattr(config, key) != getattr(defaults, key)]
        if changed:
            flags = ", ".join("--" + key.replace("_", "-") for key in changed)
            raise ValueError(f"{flags}: the executor options are for planner mode; add --planner coda")
        return
    if config.planner not in PLANNER_SPECS.valid():
        raise ValueError(f"unknown --planner {config.planner!r}; valid: {', '.join(PLANNER_SPECS.valid())}")
    if config.executor_kind not in EXECUTORS.valid():
        raise ValueError(f"unknown --executor-kind {config.executor_kind!r}; valid: {', '.join(EXECUTORS.valid())}")
    if config.executor_format not in FORMAT_REGISTRY:
        valid = ", ".join(sorted(FORMAT_REGISTRY))
        raise ValueError(f"unknown --executor-format {config.executor_format!r}; valid: {valid}")
    if config.executor_kind == "standin_grounding" and not shows_elements(config.observation):
        raise ValueError(
            "--executor-kind standin_grounding clicks the element a thought names from the screen's elements: add "
            "--observation screenshot_a11y_tree (or another type with elements)"
        )
    if config.provider_api != "openai":
        raise ValueError("--planner sends the planner's chat messages as they are: it needs --provider-api openai")
    try:
        executor_settings(config)
    except ValueError as exc:
        raise ValueError(f"--executor-*: {exc}") from None


def binding(key: str, value: Any) -> Any:
    """The part of a run.json value that must match on resume: of the executor's settings, those that change its
    actions (not where it runs, its timeout or its retries)."""
    if key == "executor" and isinstance(value, dict):
        return {k: value.get(k) for k in EXECUTOR_BINDING}
    return value


def planner_run(config: Any) -> PlannerRun | None:
    """Planner mode's spec and executor (None: the model acts itself); an executor endpoint that never answers stops
    the run before any desktop starts, as the planner's does (`--endpoint-wait`)."""
    if config.planner is None:
        return None
    from verl_cua.actions.planner import get_planner_spec
    from verl_cua.eval.executor import make_executor

    settings = executor_settings(config)
    if settings.kind == "openai" and config.endpoint_wait > 0:
        try:
            probe = ChatClient("openai", settings.model, base_url=settings.base_url)
            probe.wait_until_answers(config.endpoint_wait, flag="--executor-base-url")
        except EndpointError as exc:
            raise RunAborted(f"executor: {exc}") from None
    return PlannerRun(get_planner_spec(config.planner), make_executor(settings))
