"""`run_eval`: every task of a run on a pool of envs, N at a time, resumable, infra failures retried apart."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from verl_cua.envs import EnvPool, GUIEnv, make_env
from verl_cua.envs.task_sets import TaskRef, resolve_tasks
from verl_cua.envs.trajectory import RESULT, RUN, EpisodeWriter, write_json
from verl_cua.eval.endpoint import ChatClient
from verl_cua.eval.episode import EpisodeSettings, RunAborted, run_episode
from verl_cua.eval.progress import EvalProgress
from verl_cua.eval.summary import summarise

logger = logging.getLogger(__name__)

FINAL = ("success", "failure")
# run.json fields that must match when a run directory is resumed (results made otherwise would be mixed in)
SAME_RUN = ("env", "provider", "env_kwargs", "model", "format", "provider_api", "max_steps", "history_images",
            "max_pixels", "temperature", "max_tokens", "success_threshold")  # fmt: skip


@dataclass
class EvalConfig:
    """One evaluation run: which tasks on which env, which model through which API, and where the results go."""

    env: str
    tasks: str | list[str]
    model: str
    format: str
    out: str
    provider: str | None = None  # OSWorld: local, docker, aws, ...
    seeds: str = "0"  # MiniWoB
    base_url: str | None = None
    provider_api: str = "openai"
    api_key_env: str | None = None
    workers: int = 1
    max_steps: int = 15
    history_images: int = 3
    max_pixels: int | None = None
    retries: int = 2
    max_tokens: int = 1024
    temperature: float = 0.0
    timeout: float = 300.0
    success_threshold: float = 1.0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    def run_meta(self) -> dict[str, Any]:
        """What run.json records (no API key, only the variable's name)."""
        meta = asdict(self)
        meta.pop("tasks")
        meta.pop("out")
        meta["name"] = self.name or Path(self.out).name
        return meta


def run_eval(
    config: EvalConfig,
    *,
    client: ChatClient | None = None,
    env_factory: Callable[[], GUIEnv] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Run the tasks not yet finished in `config.out`, then write and return `summary.json`'s content."""
    _check(config)
    if config.env == "osworld" and config.provider is None:
        config = replace(config, provider="local")
    refs = resolve_tasks(config.env, config.tasks, config.seeds)
    out = Path(config.out)
    meta = _open_run(out, config, refs)
    pending = [r for r in refs if _status(out / r.key) not in FINAL]
    if pending:
        if client is None:
            from verl_cua.eval.endpoint import api_key_from_env

            key = api_key_from_env(config.provider_api, config.api_key_env)
            client = ChatClient(
                config.provider_api,
                config.model,
                base_url=config.base_url,
                api_key=key,
                timeout=config.timeout,
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                extra_body=config.extra_body,
            )
        factory = env_factory or _env_factory(config)
        _run_pending(config, pending, client, factory, done=len(refs) - len(pending), progress=progress)
    summary = summarise(out, tasks=meta["tasks"])
    write_json(out / "summary.json", summary)
    return summary


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
    if config.env != "osworld" and config.provider:
        raise ValueError(f"--provider is for --env osworld; {config.env} takes none")


def _env_factory(config: EvalConfig) -> Callable[[], GUIEnv]:
    kwargs = dict(config.env_kwargs)
    if config.env == "osworld":
        kwargs.setdefault("provider", config.provider)
    return lambda: make_env(config.env, action_format=config.format, **kwargs)


def _open_run(out: Path, config: EvalConfig, refs: list[TaskRef]) -> dict[str, Any]:
    """Create run.json, or check that a resumed run was made with the same settings; the task list grows."""
    meta = config.run_meta()
    path = out / RUN
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        for key in SAME_RUN:
            if old.get(key) != meta.get(key):
                raise ValueError(
                    f"{out} holds a run with {key}={old.get(key)!r}, not {meta.get(key)!r}; "
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


def _status(episode_dir: Path) -> str | None:
    try:
        return json.loads((episode_dir / RESULT).read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError):
        return None


def _run_pending(
    config: EvalConfig,
    pending: list[TaskRef],
    client: ChatClient,
    factory: Callable[[], GUIEnv],
    *,
    done: int,
    progress: bool,
) -> None:
    settings = EpisodeSettings(
        format=config.format,
        max_steps=config.max_steps,
        history_images=config.history_images,
        max_pixels=config.max_pixels,
        success_threshold=config.success_threshold,
    )
    out = Path(config.out)
    stop = threading.Event()
    aborted: list[str] = []
    workers = min(config.workers, len(pending))
    bar = EvalProgress(total=done + len(pending), done=done, enabled=progress)

    def run_one(ref: TaskRef) -> None:
        if stop.is_set():
            return
        for attempt in range(1, config.retries + 2):
            writer = EpisodeWriter(out / ref.key)
            try:
                with pool.acquire() as lease:
                    result = run_episode(lease, ref, client, settings, writer)
            except RunAborted as exc:
                writer.close()
                aborted.append(str(exc))
                stop.set()
                return
            except BaseException:
                writer.close()
                raise
            result["attempts"] = attempt
            writer.finish(result)
            if result["status"] != "infra_failure":
                break
            bar.retry(ref.key, result["error"])
            if stop.is_set():
                break
        bar.advance(ref.key, result["status"])

    with (
        bar,
        EnvPool(
            factory,
            workers,
            reset_timeout=600.0 if config.env == "osworld" else 120.0,
            step_timeout=300.0,
            evaluate_timeout=600.0,
            start_timeout=900.0 if config.provider not in (None, "local") else 120.0,
        ) as pool,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verl-cua-eval") as executor,
    ):
        try:
            for future in [executor.submit(run_one, ref) for ref in pending]:
                future.result()
        except BaseException:
            stop.set()  # Ctrl-C or a bug: no new episodes; finished ones are on disk, the rest rerun next time
            raise
    if aborted:
        raise RunAborted(aborted[0])
