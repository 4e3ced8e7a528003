"""`run_eval`: every task of a run on a pool of envs, N at a time, resumable, infra failures retried apart."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from verl_cua.envs import (
    ENV_REGISTRY,
    EnvPool,
    GUIEnv,
    InfraFailure,
    env_spec,
    env_start_timeout,
    make_env,
    observed_kwargs,
)
from verl_cua.envs.observation import DEFAULT_BUDGET
from verl_cua.envs.task_sets import TaskRef, resolve_tasks
from verl_cua.envs.trajectory import RESULT, RUN, EpisodeWriter, read_result, write_json
from verl_cua.eval.endpoint import ChatClient, EndpointError
from verl_cua.eval.episode import EpisodeSettings, RunAborted, run_episode
from verl_cua.eval.executor import ExecutorSettings
from verl_cua.eval.planner import COUNT_KEYS as EXECUTOR_COUNTS
from verl_cua.eval.planner import PlannerRun
from verl_cua.eval.planner_episode import run_planner_episode
from verl_cua.eval.planner_options import EXECUTOR_FIELDS, binding, check_planner, executor_settings, planner_run
from verl_cua.eval.progress import EvalProgress
from verl_cua.eval.summary import summarise

logger = logging.getLogger(__name__)

FINAL = ("success", "failure")
# run.json fields that must match when a run directory is resumed (results made otherwise would be mixed in)
SAME_RUN = ("env", "provider", "env_kwargs", "model", "format", "provider_api", "max_steps", "history_images",
            "max_pixels", "temperature", "max_tokens", "success_threshold", "extra_body", "observation",
            "observation_tokens", "planner", "executor")  # fmt: skip

# run.json keys added after runs were made: a run.json without one was made with this value
LATER_KEYS = {"observation": "screenshot", "observation_tokens": DEFAULT_BUDGET, "planner": None, "executor": None}


@dataclass
class EvalConfig:
    """One evaluation run: which tasks on which env, which model through which API, and where the results go.
    The fields are `verl-cua eval`'s options (`verl-cua eval --help` says what each does)."""

    env: str  # miniwob | osworld
    tasks: str | list[str]  # names, task JSONs, folders, OSWorld meta files (comma-separated)
    model: str  # the name the endpoint serves
    format: str  # the model's action format: qwen3vl | qwen25vl | uitars | pyautogui | claude
    out: str  # the run directory
    provider: str | None = None  # OSWorld desktops: local (default), docker, aws, ...
    seeds: str = "0"  # MiniWoB seeds per task: 0-9 or 1,2,3
    base_url: str | None = None  # default: the API's own (vLLM's localhost:8000/v1, Anthropic's)
    provider_api: str = "openai"  # openai (chat completions) | anthropic (Messages API)
    api_key_env: str | None = None  # the environment variable with the key (default: the API's usual one)
    workers: int = 1  # envs and episodes in parallel
    max_steps: int = 15  # model turns per episode
    history_images: int = 3  # screenshots kept in the conversation
    max_pixels: int | None = None  # cap on the screenshot sent (qwen formats, claude)
    retries: int = 2  # extra attempts for an episode that hit an infra failure
    max_tokens: int = 1024  # generation budget per step
    temperature: float = 0.0
    timeout: float = 300.0  # seconds per model request
    endpoint_wait: float = 30.0  # seconds the endpoint may take to answer at all before the run stops (0: no check)
    success_threshold: float = 1.0  # an evaluator score counted as a success
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # passed to make_env (provider options)
    observation: str = "screenshot"  # what the model reads each turn: one of OSWorld's observation types
    observation_tokens: int = DEFAULT_BUDGET  # tokens of element table or marks a turn may show
    extra_body: dict[str, Any] = field(default_factory=dict)  # merged into every request body
    name: str | None = None  # the run's name in reports (default: the directory's)
    # planner mode (CODA): the model above is the planner, the executor below grounds its thoughts into actions
    planner: str | None = None  # the planner spec (`coda`); None: the model acts itself
    executor_kind: str = "openai"  # openai (an OpenAI-compatible endpoint) | standin_grounding (CPU tests, no model)
    executor_base_url: str | None = None  # default: ExecutorSettings' (http://localhost:8000/v1)
    executor_model: str | None = None  # the model the executor endpoint serves (default: UI-TARS-1.5-7B's name)
    executor_format: str = "uitars"  # the action format the executor's reply is parsed with
    executor_timeout: float | None = None  # seconds per executor attempt (default: ExecutorSettings' 60)
    executor_retries: int | None = None  # further attempts after a timeout or a retryable status (default: 3)
    executor_api_key_env: str | None = None  # the environment variable with the executor's key (default: none)
    executor_extra_body: dict[str, Any] = field(default_factory=dict)  # merged into every executor request body

    def run_meta(self) -> dict[str, Any]:
        """What run.json records (no API key, only the variable's name); planner runs: the executor's settings."""
        meta = asdict(self)
        meta.pop("tasks")
        meta.pop("out")
        for key in EXECUTOR_FIELDS:
            meta.pop(key)
        meta["name"] = self.name or Path(self.out).name
        if self.planner is None:
            meta.pop("planner")
        else:
            meta["executor"] = asdict(self.executor_settings())
        return meta

    def executor_settings(self) -> ExecutorSettings:
        """The executor's settings from the `executor_*` fields (the unset ones: `ExecutorSettings`' defaults)."""
        return executor_settings(self)


def run_eval(
    config: EvalConfig,
    *,
    client: ChatClient | None = None,
    env_factory: Callable[[], GUIEnv] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Run the tasks not yet finished in `config.out`, then write and return `summary.json`'s content."""
    _check(config)
    default_provider = env_spec(config.env).provider
    if default_provider and config.provider is None:
        config = replace(config, provider=default_provider)
    refs = resolve_tasks(config.env, config.tasks, config.seeds)
    out = Path(config.out)
    with _run_lock(out):
        meta = _open_run(out, config, refs)
        pending = [r for r in refs if _status(out / r.key) not in FINAL]
        if pending:
            _run_pending(config, pending, client, env_factory, done=len(refs) - len(pending), progress=progress)
        summary = summarise(out, tasks=meta["tasks"])
        write_json(out / "summary.json", summary)
    return summary


def _client(config: EvalConfig) -> ChatClient:
    from verl_cua.eval.endpoint import api_key_from_env

    return ChatClient(
        config.provider_api,
        config.model,
        base_url=config.base_url,
        api_key=api_key_from_env(config.provider_api, config.api_key_env),
        timeout=config.timeout,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        extra_body=config.extra_body,
    )


@contextlib.contextmanager
def _run_lock(out: Path):
    """One `verl-cua eval` per run directory: a second one would delete the first one's episodes in flight."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"another verl-cua eval is writing to {out}; wait for it or use another --out") from None
        yield


def _check(config: EvalConfig) -> None:
    from verl_cua.actions import FORMAT_REGISTRY
    from verl_cua.eval.apis import get_api

    get_api(config.provider_api)
    if config.format not in FORMAT_REGISTRY:
        raise ValueError(f"unknown --format {config.format!r}; valid: {', '.join(sorted(FORMAT_REGISTRY))}")
    if config.format == "claude" and config.provider_api != "anthropic":
        raise ValueError("--format claude is Anthropic's computer tool: add --provider-api anthropic")
    for name in ("workers", "max_steps", "history_images", "max_tokens"):
        if int(getattr(config, name)) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(config, name)}")
    if config.retries < 0:
        raise ValueError(f"--retries must be >= 0, got {config.retries}")
    if config.endpoint_wait < 0:
        raise ValueError(f"--endpoint-wait must be >= 0, got {config.endpoint_wait}")
    providers = env_spec(config.env).providers
    if not providers and config.provider:
        takes = [name for name, record in sorted(ENV_REGISTRY.items()) if record.providers]
        raise ValueError(f"--provider is for --env {' or '.join(takes)}; {config.env} takes none")
    if providers and config.provider is not None and config.provider not in providers:
        raise ValueError(f"unknown --provider {config.provider!r}; valid: {', '.join(providers)}")
    _env_kwargs(config)  # an observation type the env does not give: one line before any desktop starts
    if config.max_pixels is not None and config.format == "pyautogui":
        raise ValueError("--max-pixels does not apply to --format pyautogui: its coordinates are screen pixels")
    check_planner(config, EvalConfig(env="", tasks="", model="", format="", out=""))


def _start_timeout(config: EvalConfig, workers: int) -> float | None:
    """Seconds one env start may take: 900 on a VM, 120 on this host, or more if the env asks (docker at scale)."""
    default = 900.0 if config.provider not in (None, "local") else 120.0
    kwargs = _env_kwargs(config)
    asked = env_start_timeout(config.env, kwargs, workers, default)
    return default if asked is None else max(default, asked)


def _env_kwargs(config: EvalConfig) -> dict[str, Any]:
    """The env's kwargs: the run's own, `--provider` for an env that takes one, and `--observation`."""
    kwargs = dict(config.env_kwargs)
    if env_spec(config.env).providers:
        kwargs.setdefault("provider", config.provider)
    return observed_kwargs(config.env, kwargs, config.observation, config.observation_tokens)


def _env_factory(config: EvalConfig) -> Callable[[], GUIEnv]:
    kwargs = _env_kwargs(config)
    return lambda: make_env(config.env, action_format=config.format, **kwargs)


def _open_run(out: Path, config: EvalConfig, refs: list[TaskRef]) -> dict[str, Any]:
    """Create run.json, or check that a resumed run was made with the same settings; the task list grows."""
    meta = config.run_meta()
    path = out / RUN
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc}); fix or remove it") from None
        started = any(out.rglob(RESULT))  # settings are only binding once an episode has finished with them
        for key in SAME_RUN if started else ():
            before = binding(key, old.get(key, LATER_KEYS.get(key)))
            if before != binding(key, meta.get(key)):
                raise ValueError(
                    f"{out} holds a run with {key}={before!r}, not {binding(key, meta.get(key))!r}; "
                    "use another --out to keep results apart"
                )
        tasks = list(old.get("tasks", []))
        meta["name"] = old.get("name", meta["name"])
    else:
        tasks = []
    tasks += [r.key for r in refs if r.key not in tasks]
    meta["tasks"] = tasks
    write_json(path, meta)
    return meta


def finished_tasks(out: str | Path) -> tuple[int, int]:
    """(finished, listed): the tasks of the run in `out` (its run.json) with a final result, which a rerun skips."""
    out = Path(out)
    try:
        tasks = json.loads((out / RUN).read_text(encoding="utf-8")).get("tasks") or []
    except (OSError, ValueError, AttributeError):
        return 0, 0
    return sum(_status(out / key) in FINAL for key in tasks), len(tasks)


def _status(episode_dir: Path) -> str | None:
    try:
        return (read_result(episode_dir) or {}).get("status")
    except (OSError, ValueError):  # a torn or unreadable result: the task runs again
        return None


def _run_pending(
    config: EvalConfig,
    pending: list[TaskRef],
    client: ChatClient | None,
    env_factory: Callable[[], GUIEnv] | None,
    *,
    done: int,
    progress: bool,
) -> None:
    client = client or _client(config)
    if config.endpoint_wait > 0 and isinstance(client, ChatClient):  # before any desktop starts
        try:
            client.wait_until_answers(config.endpoint_wait)
        except EndpointError as exc:
            raise RunAborted(str(exc)) from None
    planner = planner_run(config)
    try:
        _run_episodes(config, pending, client, planner, env_factory, done=done, progress=progress)
    finally:
        if planner is not None:
            planner.close()


def _run_episodes(
    config: EvalConfig,
    pending: list[TaskRef],
    client: ChatClient,
    planner: PlannerRun | None,
    env_factory: Callable[[], GUIEnv] | None,
    *,
    done: int,
    progress: bool,
) -> None:
    factory = _first_env_in_foreground(env_factory or _env_factory(config), config)
    settings = EpisodeSettings(
        format=config.format,
        max_steps=config.max_steps,
        history_images=config.history_images,
        max_pixels=config.max_pixels,
        success_threshold=config.success_threshold,
        planner=planner,
    )
    play = run_episode if planner is None else run_planner_episode  # planner mode: CODA's planner and executor
    out = Path(config.out)
    stop = threading.Event()
    aborted: list[str] = []
    workers = min(config.workers, len(pending))
    bar = EvalProgress(total=done + len(pending), done=done, enabled=progress)

    def run_one(ref: TaskRef) -> None:
        if stop.is_set():
            return
        spent = {"prompt_tokens": 0, "completion_tokens": 0}  # API spend over every attempt, failed ones too
        calls = dict.fromkeys(EXECUTOR_COUNTS, 0)  # planner mode: the executor's calls over every attempt
        for attempt in range(1, config.retries + 2):
            writer = EpisodeWriter(out / ref.key)
            try:
                with pool.acquire(task=ref.task) as lease:
                    result = play(lease, ref, client, settings, writer)
            except RunAborted as exc:
                writer.close()
                aborted.append(str(exc))
                stop.set()
                return
            except BaseException:
                writer.close()
                stop.set()  # a bug: the other workers start no new episode
                raise
            result["attempts"] = attempt
            for key in spent:
                spent[key] += result["usage"][key]
            result["usage_all_attempts"] = dict(spent)
            if planner is not None:
                for key in calls:
                    calls[key] += result.get(key, 0)
                result["executor_all_attempts"] = dict(calls)
            writer.finish(result)
            if result["status"] != "infra_failure":
                break
            bar.retry(ref.key, result["error"])
            if stop.is_set():
                break
        bar.advance(ref.key, result["status"])

    start_timeout = _start_timeout(config, workers)
    with (
        bar,
        EnvPool(
            factory,
            workers,
            reset_timeout=max(env_spec(config.env).reset_timeout, start_timeout or 0.0),  # docker: a reset boots
            step_timeout=300.0,
            evaluate_timeout=600.0,
            start_timeout=start_timeout,
        ) as pool,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verl-cua-eval") as executor,
    ):
        try:
            futures = [executor.submit(run_one, ref) for ref in pending]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done():
                    future.result()  # re-raise the first error of a worker
        except BaseException:
            stop.set()  # Ctrl-C or a bug: no new episodes; finished ones are on disk, the rest rerun next time
            executor.shutdown(wait=False, cancel_futures=True)
            raise
    if aborted:
        raise RunAborted(aborted[0])


def _first_env_in_foreground(factory: Callable[[], GUIEnv], config: EvalConfig) -> Callable[[], GUIEnv]:
    """Build one env now: a mistake in the settings (unknown kwarg, missing package) is a one-line error, not an
    infra failure per task. The env is handed to the pool; a desktop that does not start is left to the pool."""
    try:
        first = [factory()]
    except InfraFailure:
        first = []
    except (ValueError, TypeError, ImportError, RuntimeError, OSError) as exc:
        raise ValueError(f"cannot make the {config.env} env: {type(exc).__name__}: {exc}") from None
    return lambda: first.pop() if first else factory()
