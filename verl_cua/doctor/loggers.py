"""The run's loggers (`trainer.logger`): names verl knows, the package each one imports and the credentials it needs.
verl's driver starts them minutes in, after the model and the rollout engine load; a logger that cannot start then
ends the run (wandb without an API key: `UsageError: api_key not configured (no-tty)`). Nothing here imports them."""

from __future__ import annotations

import importlib.util
import netrc
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from verl_cua.doctor.finding import Finding

# verl 0.9.1's `Tracking.supported_backend` (verl/utils/tracking.py), plus its deprecated alias of wandb
VERL_LOGGERS = ("wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console", "clearml", "trackio", "file",
                "rl_insight")  # fmt: skip
ALIASES = {"tracking": "wandb"}
MODULES = {  # the module verl imports for each logger, and the pip package that provides it
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
    "swanlab": ("swanlab", "swanlab"),
    "vemlp_wandb": ("volcengine_ml_platform", "volcengine-ml-platform"),
    "tensorboard": ("tensorboard", "tensorboard"),  # torch.utils.tensorboard needs it
    "clearml": ("clearml", "clearml"),
    "trackio": ("trackio", "trackio"),
    "rl_insight": ("rl_insight", "rl-insight"),
}
WANDB_HOST = "https://api.wandb.ai"
WANDB_PROBE_S = 5.0  # seconds the preflight waits for the wandb server to answer
WANDB_LOCAL_MODES = ("offline", "disabled", "dryrun")
SWANLAB_LOCAL_MODES = ("local", "offline", "disabled")
VEMLP_VARS = ("VOLC_ACCESS_KEY_ID", "VOLC_SECRET_ACCESS_KEY", "MLP_TRACKING_REGION")
DROP = "or drop {name} from trainer.logger (LOGGER=[console] for the recipes)"


def logger_names(value: Any) -> list[str]:
    """`trainer.logger` as a list of names: a list, one name, or Hydra's `[console,wandb]` text."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.strip().strip("[]").split(",")
    return [str(name).strip().strip("'\"") for name in value if str(name).strip().strip("'\"")]


def logger_findings(config: dict[str, Any], host: str = "verl") -> list[Finding]:
    """A finding for each logger of `config` that needs a package or credentials, and one for names verl lacks."""
    names = logger_names((config.get("trainer") or {}).get("logger"))
    out = []
    unknown = [n for n in names if n not in VERL_LOGGERS and n not in ALIASES]
    if unknown and host == "verl":  # verl-agent's own verl has its own list
        out.append(Finding("FAIL", "logger", f"trainer.logger names {', '.join(unknown)}, which verl 0.9.1 does not "
                                             f"know; valid: {', '.join(VERL_LOGGERS)}"))  # fmt: skip
    seen = set()
    for name in names:
        name = ALIASES.get(name, name)
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        module, package = MODULES[name]
        if importlib.util.find_spec(module) is None:
            out.append(Finding("FAIL", name, f"trainer.logger has {name}, but {module} is not installed: pip install "
                                             f"{package}, {DROP.format(name=name)}"))  # fmt: skip
            continue
        check = CREDENTIALS.get(name)
        if check:
            out.append(check())
    return out


def wandb_finding() -> Finding:
    """Whether wandb.init will find credentials (or need none) without a terminal to ask at, and, online, whether
    its server answers from here."""
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode in WANDB_LOCAL_MODES:
        return Finding("ok", "wandb", f"WANDB_MODE={mode}: nothing is sent, no credentials needed")
    url = os.environ.get("WANDB_BASE_URL") or WANDB_HOST
    machine = urlsplit(url).netloc or url
    path = _wandb_netrc()
    if os.environ.get("WANDB_API_KEY"):
        found = "credentials from WANDB_API_KEY"
    elif os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        found = "credentials from WANDB_IDENTITY_TOKEN_FILE"
    elif _netrc_has(path, machine):
        found = f"credentials for {machine} in {path}"
    else:
        found = ""
    if found:
        unreachable = _unreachable(url)
        if unreachable:
            return Finding("FAIL", "wandb", f"{found}, but {url} did not answer from here in {WANDB_PROBE_S:g} s "
                                            f"({unreachable}): wandb.init would end the run minutes in; on a closed "
                                            "node set WANDB_MODE=offline (and `wandb sync` the run later), "
                                            f"{DROP.format(name='wandb')}")  # fmt: skip
        return Finding("ok", "wandb", f"{found}; {url} answers")
    return Finding("FAIL", "wandb", f"no credentials for {machine} (no WANDB_API_KEY, no machine {machine} in {path}): "
                                    "wandb.init would end the run minutes in, after the model loads; run "
                                    "`wandb login`, or export WANDB_API_KEY=..., or set WANDB_MODE=offline, "
                                    f"{DROP.format(name='wandb')}")  # fmt: skip


def _unreachable(url: str) -> str | None:
    """Why `url` gave no HTTP answer within WANDB_PROBE_S (any status is an answer), or None when it did."""
    import httpx

    try:
        httpx.head(url, timeout=WANDB_PROBE_S, follow_redirects=False)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL: a malformed WANDB_BASE_URL
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return None


def _wandb_netrc() -> Path:
    """The netrc file wandb reads: $NETRC, else ~/.netrc (or ~/_netrc where only that one exists)."""
    if os.environ.get("NETRC"):
        return Path(os.environ["NETRC"]).expanduser()
    unix, windows = Path("~/.netrc").expanduser(), Path("~/_netrc").expanduser()
    return windows if windows.exists() and not unix.exists() else unix


def _netrc_has(path: Path, machine: str | None = None) -> bool:
    """Whether `path` is a readable netrc with a password for `machine` (for any machine when None)."""
    try:
        parsed = netrc.netrc(str(path))
    except (OSError, netrc.NetrcParseError):
        return False
    if machine is None:
        return any(password for _login, _account, password in parsed.hosts.values())
    found = parsed.authenticators(machine)
    return bool(found and found[2])


def swanlab_finding() -> Finding:
    """Whether swanlab.init (cloud mode unless SWANLAB_MODE says otherwise) has a key without asking for one."""
    mode = os.environ.get("SWANLAB_MODE", "cloud").lower()
    if mode in SWANLAB_LOCAL_MODES:
        return Finding("ok", "swanlab", f"SWANLAB_MODE={mode}: no credentials needed")
    if os.environ.get("SWANLAB_API_KEY"):
        return Finding("ok", "swanlab", "credentials from SWANLAB_API_KEY")
    root = os.environ.get("SWANLAB_ROOT") or os.environ.get("SWANLAB_SAVE_DIR") or "~/.swanlab"
    for path in (Path(".swanlab") / ".netrc", Path(root).expanduser() / ".netrc"):
        if _netrc_has(path):
            return Finding("ok", "swanlab", f"credentials in {path}")
    return Finding("FAIL", "swanlab", "no credentials (no SWANLAB_API_KEY, no `swanlab login`): swanlab.init would end "
                                      "the run minutes in; run `swanlab login`, or export SWANLAB_API_KEY=..., or set "
                                      f"SWANLAB_MODE=local, {DROP.format(name='swanlab')}")  # fmt: skip


def vemlp_finding() -> Finding:
    """verl reads the Volcengine keys from the environment with no default."""
    missing = [var for var in VEMLP_VARS if not os.environ.get(var)]
    if missing:
        return Finding("FAIL", "vemlp_wandb", f"{' and '.join(missing)} unset: verl's vemlp_wandb logger reads them "
                                              f"at start; export them, {DROP.format(name='vemlp_wandb')}")  # fmt: skip
    return Finding("ok", "vemlp_wandb", "Volcengine keys and region set")


def clearml_finding() -> Finding:
    """ClearML's configuration: a clearml.conf, keys in the environment, or offline mode."""
    env = os.environ
    if env.get("CLEARML_OFFLINE_MODE", "").lower() in ("1", "true", "yes", "on"):
        return Finding("ok", "clearml", "CLEARML_OFFLINE_MODE: no server needed")
    if env.get("CLEARML_AUTH_TOKEN") or (env.get("CLEARML_API_ACCESS_KEY") and env.get("CLEARML_API_SECRET_KEY")):
        return Finding("ok", "clearml", "credentials from the environment")
    files = [env["CLEARML_CONFIG_FILE"]] if env.get("CLEARML_CONFIG_FILE") else ["~/clearml.conf", "~/trains.conf"]
    found = next((f for f in files if Path(f).expanduser().is_file()), None)
    if found:
        return Finding("ok", "clearml", f"configured in {found}")
    return Finding("warn", "clearml", "no clearml.conf nor CLEARML_API_* keys: ClearML logs to its public demo server "
                                      "or stops; run `clearml-init`, or set CLEARML_OFFLINE_MODE=1")  # fmt: skip


CREDENTIALS = {"wandb": wandb_finding, "swanlab": swanlab_finding, "vemlp_wandb": vemlp_finding,
               "clearml": clearml_finding}  # fmt: skip
