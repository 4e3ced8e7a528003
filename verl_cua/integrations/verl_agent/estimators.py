"""verl-cua's estimators for verl-agent's `compute_advantage(data, adv_estimator, ...)`: `cua_gigpo`.

verl-agent trains one sample per step. Its own `gigpo` takes group statistics over step samples, so long
episodes and the copies `adjust_batch` adds weigh more. `cua_gigpo` is the function behind
`algorithm.adv_estimator=gigpo` on verl 0.9.1 (`verl_cua.algos.gigpo`): one value per episode in the
episode groups, one per (episode, step) in the anchor-state groups, so results compare across both hosts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from verl_cua.algos.estimators import ESTIMATORS as VERL_ESTIMATORS  # ours on verl 0.9.1, listed once
from verl_cua.algos.gigpo import gigpo_advantages
from verl_cua.integrations.verl.hooks import step_hook

NO_STEPS = (
    "adv_estimator=cua_gigpo needs the step anchors of verl-cua's envs (env.env_name=osworld|miniwob); "
    "use adv_estimator=gigpo for verl-agent's own envs"
)
# verl-agent's names for GiGPO's normalisation -> ours
MODES = {"mean_norm": "mean", "mean_std_norm": "std"}


def cua_gigpo(
    data: Any,
    gamma: float = 0.95,
    step_advantage_w: float = 1.0,
    gigpo_mode: str = "mean_norm",
    **kwargs,
) -> Any:
    """Set `data.batch['advantages']`/`['returns']`: A_episode + w * A_step of each sample's (episode, step)."""
    import torch

    if gigpo_mode not in MODES:
        raise ValueError(f"unknown algorithm.gigpo.mode {gigpo_mode!r}; valid modes: {', '.join(MODES)}")
    nt = data.non_tensor_batch
    anchors = nt["anchor_obs"]
    if any(not hasattr(a, "step") for a in anchors):
        raise ValueError(NO_STEPS)
    scores = data.batch["token_level_rewards"].sum(-1).float()
    # the invalid-action penalty (and any in-reward KL) of this step: episode reward minus the sample's score
    penalty = torch.as_tensor(np.asarray(nt["episode_rewards"], dtype=np.float32)) - scores
    steps: dict[tuple[str, int], tuple[str, Any, float]] = {}  # (traj, step) -> (group, anchor, step reward)
    for b, anchor in enumerate(anchors):
        key = (str(nt["traj_uid"][b]), int(anchor.step))
        reward = float(nt["rewards"][b]) - float(penalty[b])
        steps.setdefault(key, (str(nt["uid"][b]), str(anchor), reward))  # adjust_batch copies share the key
    episodes: dict[str, list[int]] = {}
    for traj, step in sorted(steps):
        episodes.setdefault(traj, []).append(step)
    order = list(episodes)
    groups = [steps[(traj, episodes[traj][0])][0] for traj in order]
    step_anchors = [[steps[(traj, s)][1] for s in episodes[traj]] for traj in order]
    step_rewards = [[steps[(traj, s)][2] for s in episodes[traj]] for traj in order]
    _, per_step, _ = gigpo_advantages(
        [sum(r) for r in step_rewards],
        groups,
        step_anchors,
        step_rewards=step_rewards,
        gamma=gamma,
        step_weight=step_advantage_w,
        norm=MODES[gigpo_mode],
    )
    value = {(traj, s): per_step[k][j] for k, traj in enumerate(order) for j, s in enumerate(episodes[traj])}
    per_row = torch.tensor(
        [value[(str(nt["traj_uid"][b]), int(a.step))] for b, a in enumerate(anchors)], dtype=torch.float32
    )
    mask = data.batch["response_mask"]
    advantages = per_row.unsqueeze(-1).to(mask.device) * mask
    data.batch["advantages"] = advantages
    data.batch["returns"] = advantages
    return data


cua_gigpo.needs_critic = False

ESTIMATORS = {"cua_gigpo": cua_gigpo}


def check_estimator(name: str, builtin: list[str]) -> None:
    """Fail in one line for an estimator neither verl-agent nor we know (or one that needs verl-cua's trainer)."""
    if name in builtin or name in ESTIMATORS:
        return
    ours = VERL_ESTIMATORS.get(name)
    if ours is not None and step_hook(ours.step_advantage).teacher_pass:  # it runs in verl-cua's own trainer only
        raise ValueError(
            f"adv_estimator={name} needs verl-cua's teacher pass, which verl-agent's trainer lacks; "
            "train it on verl 0.9.1 with `python -m verl_cua.main` (recipes/run_qwen3vl_sdpo_osworld.sh)"
        )
    valid = ", ".join(sorted(builtin) + sorted(ESTIMATORS))
    raise ValueError(f"unknown algorithm.adv_estimator {name!r}; valid estimators: {valid}")
