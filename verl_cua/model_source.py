"""Where a model name resolves, offline first and within a bounded wait: a local model folder, a copy in the Hugging
Face cache, or a hub (HF_ENDPOINT) that answers for it. One place for the doctor's `model` finding (a trainer's
`actor_rollout_ref.model.path`) and `verl-cua sft-data --model`, so neither hangs on the hub's retries."""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
HUB = "https://huggingface.co"
HUB_TIMEOUT = 10.0  # seconds per request to the hub
HUB_TRIES = 2
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
REMOTE_SCHEMES = ("hdfs://", "s3://", "gs://")  # verl copies these to a local folder itself


@dataclass(frozen=True)
class ModelSource:
    """How a model name resolved: a level as the doctor's (ok, info, warn, FAIL), one line saying where (or what to
    do), and the local folder to load it from when there is one (a model folder, a cached snapshot)."""

    level: str
    detail: str
    folder: str | None = None


def resolve_model(path: str, *, timeout: float = HUB_TIMEOUT, option: str = "MODEL_PATH") -> ModelSource:
    """Where `path` resolves: ok (a local folder, the cache, a hub that has it), or FAIL in one line with the fix;
    `option` is what names the model where it is set (MODEL_PATH in a recipe, --model on a command line)."""
    path = str(path)
    if path.startswith(REMOTE_SCHEMES) or os.environ.get("VERL_USE_MODELSCOPE", "").lower() in ("1", "true"):
        return ModelSource("info", f"{path}: fetched by verl itself (not checked here)")
    folder = Path(os.path.expanduser(path))
    if folder.is_dir():
        if (folder / "config.json").is_file():
            return ModelSource("ok", f"{path}: a local model folder", str(folder))
        return ModelSource("FAIL", f"{path}: a folder without config.json, not a Hugging Face model folder")
    if folder.exists():
        return ModelSource("FAIL", f"{path}: a file, not a model folder ({option} names the folder)")
    if not REPO_ID.match(path) or path.startswith((".", "/", "~")):
        return ModelSource("FAIL", f"{path}: no such folder ({option}: a local folder or a hub name org/model)")
    return _hub_source(path, timeout, option)


def _hub_source(repo: str, timeout: float, option: str) -> ModelSource:
    cache = _cache_dir()
    cached = _cached(repo, cache)
    if cached:
        return ModelSource("ok", f"{repo}: in the Hugging Face cache ({cached})", cached)
    use = f"pass {option} DIR" if option.startswith("-") else f"set {option}=DIR"
    download = (
        f"download it where the hub answers (hf download {repo} --local-dir DIR) and {use}, or fill this "
        f"machine's Hugging Face cache ({cache}) and set HF_HUB_OFFLINE=1"
    )
    offline = [v for v in OFFLINE_VARS if os.environ.get(v, "").lower() in ("1", "true", "yes", "on")]
    if offline:
        return ModelSource("FAIL", f"{repo}: no such folder here, not in the Hugging Face cache, and "
                                   f"{offline[0]}=1 forbids the download; {download}")  # fmt: skip
    endpoint = os.environ.get("HF_ENDPOINT", HUB).rstrip("/")
    url = f"{endpoint}/api/models/{repo}"
    status, error = _ask(url, timeout)
    if status == 200:
        return ModelSource("ok", f"{repo}: on the hub ({endpoint}); downloaded on first use")
    if status in (401, 403):
        return ModelSource("FAIL", f"{repo}: the hub ({endpoint}) refuses it (HTTP {status}): a gated or private "
                                   "model needs a token with access (HF_TOKEN or `hf auth login`)")  # fmt: skip
    if status == 404:
        return ModelSource("FAIL", f"{repo}: no such folder here, and the hub ({endpoint}) has no such model")
    if status == 429:
        return ModelSource("warn", f"{repo}: the hub ({endpoint}) answers but rate-limits this machine (HTTP "
                                   "429); not checked")  # fmt: skip
    return ModelSource("FAIL", f"{repo}: no such folder here, and the hub ({endpoint}) did not answer in "
                               f"{HUB_TRIES} tries of {timeout:g} s ({error}); {download}")  # fmt: skip


def _ask(url: str, timeout: float) -> tuple[int | None, str]:
    """The hub's HTTP status for `url` (None with the error when it does not answer), tried HUB_TRIES times."""
    headers = {"User-Agent": "verl-cua-preflight"}
    token = _token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    error = "no attempt"
    for _ in range(HUB_TRIES):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as reply:
                return reply.status, ""
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return exc.code, str(exc)
            error = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            error = str(getattr(exc, "reason", exc))
    return None, error


def _cache_dir() -> str:
    """The Hugging Face hub cache, read now with huggingface_hub's precedence."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    home = os.environ.get("HF_HOME") or os.path.join(xdg, "huggingface")
    return os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")


def _cached(repo: str, cache: str) -> str | None:
    """The cached snapshot folder holding `repo`'s config.json, if the Hugging Face cache has one."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo, "config.json", cache_dir=cache)
    except Exception:  # a malformed name or cache: treated as not cached
        return None
    return str(Path(found).parent) if isinstance(found, str) else None


def _token() -> str | None:
    """The token huggingface_hub would send: HF_TOKEN, or the one `hf auth login` saved."""
    try:
        from huggingface_hub import get_token
    except ImportError:
        return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    try:
        return get_token()
    except Exception:
        return None
