"""Check verl-cua against a verl-agent checkout: `python -m verl_cua.testing.verl_agent_check [--envs]`, run with the
checkout on PYTHONPATH. Imports its trainer modules, runs `install()`, and checks that our env names and
estimators reach verl-cua while verl-agent's own keep their code; `--envs` also builds real MiniWoB envs through
its `make_envs`. Prints one JSON line; exit 0 when every check holds."""

from __future__ import annotations

import argparse
import json
import sys
import uuid

import numpy as np


def _config(env_name: str, adv: str = "cua_gigpo"):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "env": {
                "env_name": env_name,
                "seed": 0,
                "max_steps": 2,
                "history_length": 2,
                "rollout": {"n": 2},
                "resources_per_worker": {"num_cpus": 0.1},
                "miniwob": {"tasks": "click-test", "format": "qwen25vl"},
            },
            "data": {"train_batch_size": 1, "val_batch_size": 1},
            "algorithm": {"adv_estimator": adv},
        }
    )


def _batch(anchors: list, traj: list[str], uid: list[str], rewards: list[float], episode: list[float]):
    """A verl-agent DataProto of step samples with the keys its collector sets (one response token each)."""
    import torch
    from verl import DataProto

    n = len(anchors)
    scores = torch.zeros(n, 3)
    scores[:, -1] = torch.tensor(episode)
    return DataProto.from_dict(
        tensors={"token_level_rewards": scores, "response_mask": torch.ones(n, 3), "responses": torch.zeros(n, 3)},
        non_tensors={
            "anchor_obs": np.array(anchors, dtype=object),
            "traj_uid": np.array(traj, dtype=object),
            "uid": np.array(uid, dtype=object),
            "rewards": np.array(rewards, dtype=object),
            "episode_rewards": np.array(episode, dtype=np.float32),
        },
    )


def run(build_envs: bool) -> dict:
    """Every check's result by name."""
    import agent_system.environments as environments
    import verl.trainer.ppo.ray_trainer as ray_trainer
    from gigpo import core_gigpo

    from verl_cua.integrations.verl_agent import GUIEnvironmentManager, install
    from verl_cua.integrations.verl_agent.anchor import StepAnchor

    out: dict = {"verl": ray_trainer.__file__, "patched": hasattr(ray_trainer, "register_adv_est")}
    out["install"] = install()
    out["install_again"] = install()
    try:
        environments.make_envs(_config("no-such-env"))
        out["unknown_env"] = "accepted"
    except SystemExit as exc:  # verl-agent's own fallback (unpatched): print + exit(1)
        out["unknown_env"] = f"exit {exc.code}"
    except ValueError as exc:  # the registry patch
        out["unknown_env"] = str(exc)
    if build_envs:
        envs, val_envs = environments.make_envs(_config("miniwob"))
        try:
            obs, infos = envs.reset(None)
            out["envs"] = {
                "type": type(envs).__name__,
                "same_pool": envs.envs is val_envs.envs,
                "n": len(obs["text"]),
                "image": list(obs["image"][0].shape),
                "group_anchor_equal": obs["anchor"][0] == obs["anchor"][1],
            }
        finally:
            envs.close()
        out["envs_ok"] = isinstance(envs, GUIEnvironmentManager) and out["envs"]["n"] == 2
    # two episodes of one group: A solves it in 2 steps (s0 -> s1), B fails (s0 -> s2)
    t = [str(uuid.uuid4()) for _ in range(2)]
    g = str(uuid.uuid4())
    anchors = [StepAnchor("s0", 0), StepAnchor("s1", 1), StepAnchor("s0", 0), StepAnchor("s2", 1)]
    data = _batch(anchors, [t[0], t[0], t[1], t[1]], [g] * 4, [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    data = ray_trainer.compute_advantage(data, "cua_gigpo", gamma=0.95, step_advantage_w=1.0, gigpo_mode="mean_norm")
    out["cua_gigpo"] = [round(float(x), 4) for x in data.batch["advantages"][:, -1]]
    expected = [0.5 + 0.475, 0.5, -0.5 - 0.475, -0.5]
    out["cua_gigpo_ok"] = bool(np.allclose(out["cua_gigpo"], expected, atol=1e-4))
    # verl-agent's own GiGPO still runs, and groups our anchors by their hash string
    data = _batch(anchors, [t[0], t[0], t[1], t[1]], [g] * 4, [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    data.batch["step_rewards"] = torch_returns([0.95, 1.0, 0.0, 0.0])
    data = ray_trainer.compute_advantage(data, "gigpo", step_advantage_w=1.0, gigpo_mode="mean_norm")
    upstream = [round(float(x), 4) for x in data.batch["advantages"][:, -1]]
    out["upstream_gigpo"] = upstream
    groups = core_gigpo.build_step_group(np.array(anchors, dtype=object), np.array([g] * 4, dtype=object))
    out["upstream_step_groups"] = len(set(groups))
    out["upstream_gigpo_ok"] = upstream[0] > upstream[1] > 0 > upstream[3] > upstream[2]
    try:
        ray_trainer.compute_advantage(data, "no-such-estimator")
        out["unknown_estimator"] = "accepted"
    except NotImplementedError:
        out["unknown_estimator"] = "NotImplementedError"
    out["ok"] = bool(out["cua_gigpo_ok"] and out["upstream_gigpo_ok"] and out.get("envs_ok", True))
    out["ok"] = out["ok"] and out["upstream_step_groups"] == 3 and out["unknown_env"] != "accepted"
    return out


def torch_returns(values: list[float]):
    """[N] step returns as verl-agent's fit() puts them in batch['step_rewards']."""
    import torch

    return torch.tensor(values)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", action="store_true", help="also build real MiniWoB envs through make_envs")
    args = ap.parse_args(argv)
    out = run(args.envs)
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
