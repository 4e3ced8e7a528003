"""What the trainer keeps across steps besides verl's own state, as one checkpointable dict: the Entropulse
schedule, the success buffer (SDPO demos, replay and Entropulse SFT data), the replay/SFT sampler's random state and
the run's totals; and the settings a checkpoint's state depends on (a resume with other values is refused)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from verl_cua.integrations.verl.resume.checkpoint_io import content_digest

# (setting, why the saved state depends on it): a resumed run with another value would misuse what was saved
STATE_SETTINGS = {
    "algorithm.adv_estimator": "the state was built for this estimator (demos, EMA teacher, buffered rows)",
    "cua.env.name": "buffered successes are trajectories of this environment's tasks",
    "cua.env.rows": "buffered rows have this row layout (episode or step)",
    "cua.env.image_storage": "buffered rows carry screenshots in this storage",
    "cua.action.format": "buffered actions and rows are in this action format",
    "cua.buffer.per_task": "the buffer's capacity per task instance",
    "cua.sdpo.teacher": "a teacher copy is saved only with teacher=ema or frozen, and means one of them",
    "cua.entropulse.schedule": "the Entropulse phase position belongs to this schedule",
}


def setting_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `STATE_SETTINGS` values of a resolved trainer config (a plain dict)."""
    out = {}
    for dotted in STATE_SETTINGS:
        node: Any = config
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        out[dotted] = node
    return out


def conflicting_settings(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """`key (saved -> now)` for each state setting whose value differs between a checkpoint and this run."""
    return [
        f"{key} ({saved[key]!r} -> {current.get(key)!r})"
        for key in STATE_SETTINGS
        if key in saved and saved[key] != current.get(key)
    ]


def resume_folder(trainer_config: Mapping[str, Any]) -> str | None:
    """The `global_step_N` folder verl will resume from under `trainer.resume_mode`, None for a fresh start."""
    import os

    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    mode = trainer_config.get("resume_mode")
    if mode == "resume_path" and trainer_config.get("resume_from_path"):
        return os.path.abspath(str(trainer_config["resume_from_path"]))
    if mode == "auto":
        return find_latest_ckpt_path(os.path.abspath(str(trainer_config.get("default_local_dir"))))
    return None


def check_resume(config: Mapping[str, Any]) -> None:
    """Before Ray starts: the checkpoint a resume would load holds state made with this run's settings (or
    `cua.resume.allow_changes`); one-line `CuaConfigError` naming the keys otherwise."""
    from verl_cua.integrations.verl.config.fields import CuaConfigError
    from verl_cua.integrations.verl.resume.checkpoint_io import CheckpointStateError, read_manifest

    folder = resume_folder(config.get("trainer") or {})
    if folder is None:
        return
    try:
        manifest = read_manifest(folder)
    except CheckpointStateError as exc:
        raise CuaConfigError(str(exc)) from exc
    if manifest is None or ((config.get("cua") or {}).get("resume") or {}).get("allow_changes"):
        return
    refuse_conflicts(folder, manifest, setting_values(config))


def refuse_conflicts(folder: str, manifest: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """One-line `CuaConfigError` naming each state setting whose value in `folder`'s manifest differs from `current`."""
    from verl_cua.integrations.verl.config.fields import CuaConfigError

    conflicts = conflicting_settings(manifest.get("settings", {}), current)
    if conflicts:
        raise CuaConfigError(
            f"the checkpoint {folder} was saved with other settings: {', '.join(conflicts)}; resume with the saved "
            "values, or set cua.resume.allow_changes=true to load its state anyway"
        )


def trainer_state(trainer) -> dict[str, Any]:
    """The plug-in's state of a `CuaTrainer`, as plain values and tensors."""
    return {
        "global_step": int(trainer.global_steps),
        "entropulse": trainer.entropulse.state_dict(),
        "buffer": trainer.success_buffer.state_dict(),
        "rng": _rng_state(trainer._cua_rng),
        "totals": dict(trainer.cua_totals),
    }


def load_trainer_state(trainer, state: Mapping[str, Any]) -> None:
    """Put a `trainer_state` snapshot back into a `CuaTrainer`."""
    trainer.entropulse.load_state_dict(state["entropulse"])
    trainer.success_buffer.load_state_dict(state["buffer"])
    trainer._cua_rng.setstate(_rng_from_state(state["rng"]))
    trainer.cua_totals.update({k: int(v) for k, v in state["totals"].items()})


def state_digests(state: Mapping[str, Any]) -> dict[str, str]:
    """A content digest per part of a `trainer_state` snapshot (what a resume report and its test compare)."""
    return {part: content_digest(state[part]) for part in ("entropulse", "buffer", "rng", "totals")}


def _rng_state(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_state(saved) -> tuple:
    version, internal, gauss = saved
    return (int(version), tuple(int(v) for v in internal), gauss)
