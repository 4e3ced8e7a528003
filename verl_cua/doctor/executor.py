"""The executor's side of a planner run (CODA: `cua.planner.mode` online or recorded): the frozen executor's
OpenAI-compatible endpoint answers `GET {base_url}/models` within a few seconds and lists `cua.executor.model`,
checked before any desktop starts. One finding, one line; executor kinds without an endpoint (the CPU tests'
stand-in) are not probed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_cua.doctor.finding import Finding

CHECK = "executor"
PROBE_TIMEOUT_S = 10.0  # the probe only: requests keep cua.executor.timeout_s
CALLING_MODES = ("online", "recorded")  # the planner modes whose steps call the executor
PROBED_KEYS = ("kind", "base_url", "model", "api_key_env")  # what the probe reads of cua.executor
START = (
    "start the executor's server (`vllm serve MODEL --port PORT`; the CODA recipe starts one itself when EXECUTOR_URL "
    "is empty), or set EXECUTOR_URL (the CODA recipe) or cua.executor.base_url to one that runs"
)
NOT_OPENAI = "cua.executor.base_url must name an OpenAI-compatible server's /v1 (e.g. http://HOST:8000/v1)"


def executor_findings(config: Mapping[str, Any] | None, timeout: float = PROBE_TIMEOUT_S) -> list[Finding]:
    """The executor finding of a resolved trainer config: none unless a planner mode calls an endpoint executor."""
    cua = (config or {}).get("cua") or {}
    if ((cua.get("planner") or {}).get("mode") or "none") not in CALLING_MODES:
        return []
    from verl_cua.eval.executor import ExecutorSettings

    given = cua.get("executor") or {}
    try:
        settings = ExecutorSettings(**{key: given[key] for key in PROBED_KEYS if key in given})
        if not endpoint_kind(settings.kind):
            return []
    except ValueError as exc:  # a bad base_url, an unknown kind: one line naming the valid ones
        return [Finding("FAIL", CHECK, f"cua.executor: {exc}")]
    return [probe_executor(settings.base_url, settings.model, settings.api_key_env, timeout)]


def endpoint_kind(kind: str) -> bool:
    """Whether executor `kind` talks to an endpoint: the OpenAI-compatible client or a subclass of it."""
    from verl_cua.eval.executor import EXECUTORS, OpenAIExecutor
    from verl_cua.registry import resolve

    factory = resolve(EXECUTORS.lookup(kind))
    return isinstance(factory, type) and issubclass(factory, OpenAIExecutor)


def probe_executor(
    base_url: str, model: str, api_key_env: str | None = None, timeout: float = PROBE_TIMEOUT_S
) -> Finding:
    """`GET {base_url}/models` once: ok when it answers in `timeout` seconds and lists `model`, else one FAIL line
    naming the URL and the fix."""
    from verl_cua.eval.apis import get_api
    from verl_cua.eval.endpoint import _detail, _join
    from verl_cua.eval.executor import _api_key

    url = _join(base_url, "/models")
    try:
        import httpx
    except ImportError:
        return Finding("FAIL", CHECK, f"probing {url} needs httpx: pip install 'verl-cua'")
    try:
        headers = get_api("openai").headers(_api_key(api_key_env))
    except ValueError as exc:
        return Finding("FAIL", CHECK, f"{exc}: export it, or set cua.executor.api_key_env=null for a server without "
                                      "a key")  # fmt: skip
    try:
        response = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return Finding("FAIL", CHECK, f"{url} did not answer in {timeout:g} s: {START}")
    except httpx.TransportError as exc:  # refused, no route, unknown host
        return Finding("FAIL", CHECK, f"{url} does not answer ({type(exc).__name__}: {_one_line(exc)}): {START}")
    status = response.status_code
    if status in (401, 403):
        return Finding("FAIL", CHECK, f"{url}: HTTP {status} {_one_line(_detail(response))}; set "
                                      "cua.executor.api_key_env to the variable holding the server's key")  # fmt: skip
    if status != 200:
        return Finding("FAIL", CHECK, f"{url}: HTTP {status} {_one_line(_detail(response))}; {NOT_OPENAI}")
    served = _served(response)
    if served is None:
        text = _one_line(response.text)[:80]
        return Finding("FAIL", CHECK, f"{url} answered, but not with an OpenAI model list ({text!r}); {NOT_OPENAI}")
    if model not in served:
        return Finding("FAIL", CHECK, f"{url} serves {', '.join(map(repr, served)) or 'no model'}, not {model!r}: "
                                      "set EXECUTOR_MODEL (the CODA recipe) or cua.executor.model to the name it "
                                      "serves (vllm serve's --served-model-name)")  # fmt: skip
    return Finding("ok", CHECK, f"{model!r} served at {base_url}")


def _served(response: Any) -> list[str] | None:
    """The model ids of an OpenAI `/models` body, or None when it is not one."""
    try:
        data = response.json()["data"]
        return [str(entry["id"]) for entry in data]
    except (ValueError, KeyError, TypeError):
        return None


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())
