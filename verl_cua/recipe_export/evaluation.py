"""The exported README's Evaluation and Results sections: the trained checkpoint merged, served and scored with
`verl-cua eval` on the recipe's env with the recipe's own prompt settings; what a run measures, and what has been
measured of this recipe so far (the recipe script's own words, or that nothing has)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from verl_cua.algos.estimators import ESTIMATORS
from verl_cua.envs import env_spec
from verl_cua.resources import docs_link

STATUS = re.compile(r"\b(measured|not yet run on (?:a )?GPUs?|does not learn)\b", re.I)
# what the env record's held-out tasks are to the training run: seeded tasks held out by seed, others not at all
SPLIT_BY_SEED = " The seeds are layouts the training run never sees (`HELDOUT_SEEDS` where the recipe has it)."
SPLIT_YOURSELF = (
    " The recipe trains on `TASKS` (by default all of the env's tasks, which may include these): split train and "
    "evaluation tasks yourself for a held-out score."
)


def _get(config: dict[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return default if node is None else node


def eval_command(config: dict[str, Any], settings: dict[str, str], model: str) -> str:
    """`verl-cua eval` on the recipe's env with its action format and prompt settings, against `model` served at
    localhost:8000 (as the exported script leaves them at their defaults)."""
    env = _get(config, "cua.env.name")
    args = ["verl-cua", "eval", "--env", env]
    kwargs = dict(_get(config, "cua.env.kwargs", {}))
    provider = kwargs.pop("provider", None)
    if provider:
        args += ["--provider", str(provider)]
    if kwargs:
        args += ["--env-kwargs", json.dumps(kwargs)]
    record = env_spec(env)
    seeded = record.held_out_seeds is not None  # held out by seed: the recipe's own tasks, layouts it never saw
    tasks = settings.get("TASKS") if seeded and settings.get("TASKS") else record.held_out or ""
    args += ["--tasks", tasks]
    if seeded:
        args += ["--seeds", settings.get("HELDOUT_SEEDS", record.held_out_seeds)]
    args += ["--model", model, "--base-url", "http://localhost:8000/v1", "--format", _get(config, "cua.action.format")]
    for flag, key in (("--max-steps", "max_steps"), ("--history-images", "history_images"),
                      ("--max-pixels", "max_pixels")):  # fmt: skip
        value = _get(config, f"cua.env.{key}")
        if value is not None:
            args += [flag, str(value)]
    args += ["--out", f"runs/{model}"]
    return " ".join(shlex.quote(a) for a in args)


def _split(env: str) -> str:
    """What the env's held-out tasks are to the training run, in a sentence ("" for an env that names none)."""
    record = env_spec(env)
    if record.held_out_seeds is not None:
        return SPLIT_BY_SEED
    return SPLIT_YOURSELF if record.held_out else ""


def evaluation_section(context: dict[str, Any]) -> list[str]:
    """How to score the trained model: merge the last checkpoint, serve it, `verl-cua eval`, `verl-cua view`."""
    config, name = context["config"], context["name"]
    trainer = config.get("trainer") or {}
    checkpoints = trainer.get("default_local_dir") or (
        f"checkpoints/{trainer.get('project_name', 'verl_cua')}/{trainer.get('experiment_name', name)}"
    )
    model = f"outputs/{name}/model"
    on_cpu = trainer.get("device") == "cpu"
    serve = (f"verl-cua serve {model} --served-model-name {name} --port 8000" if on_cpu else
             f"vllm serve {model} --served-model-name {name} --port 8000")  # fmt: skip
    return [
        "## Evaluation", "",
        "Tasks are scored outside the trainer by `verl-cua eval`, with the prompts, action parser and "
        "screenshot settings of training. Merge the last checkpoint into a Hugging Face folder (verl's model merger), "
        f"serve it ({'`verl-cua serve` on a CPU' if on_cpu else 'vLLM on a GPU host'}), then:",
        "", "```bash",
        f"python3 -m verl.model_merger merge --backend fsdp --local_dir {checkpoints}/global_step_N/actor "
        f"--target_dir {model}",
        f"{serve} &",
        eval_command(config, context["defaults"], name),
        f"verl-cua view runs/{name} --out runs/{name}/report.html   # every step, side by side with other runs",
        "```", "",
        f"`verl-cua eval` writes `summary.json` (success rate, infra failures apart) beside each episode's trajectory "
        f"([Evaluation]({docs_link('evaluation.md')})).{_split(config['cua']['env']['name'])}",
        "",
    ]  # fmt: skip


def status_sentences(script: str) -> list[str]:
    """The sentences of the script's header comment that say what was measured, or that it was not run."""
    header = []
    for line in script.splitlines()[1:]:
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    sentences = re.split(r"(?<=[.;])\s+(?=[A-Z])", " ".join(header))
    return [s for s in sentences if STATUS.search(s)]


def results_section(context: dict[str, Any]) -> list[str]:
    """What a run measures, and this recipe's results so far, in the recipe script's own words."""
    estimator = context["estimator"]
    ours = ESTIMATORS.get(estimator)
    own = f"`{ours.step_advantage}/*`" if ours is not None else None  # its step hook's metrics
    measured = (
        "A run logs verl's metrics (`critic/score/mean`: the task reward) and verl-cua's `cua/*` metrics "
        "(`cua/success_rate`, `cua/invalid_action_rate`, `cua/infra_failures`, `cua/steps_mean`)"
        + (f", plus {own} for {estimator}" if own else "")
        + f" ([metrics]({docs_link('training.md#metrics')})); `verl-cua eval` gives the held-out success rate."
    )
    status = status_sentences(context["script"])
    said = " ".join(status) if status else "No results of this recipe are recorded yet."
    if not any(STATUS.search(s) and "measured" in s.lower() for s in status):
        said += " No success rate is claimed for it."
    return ["## Results", "", measured, "", f"Status: {said}", ""]
