"""CoSo in the actor loss (`cua_actor_loss(mode="ppo", plan=..., cua=...)` with the plan's `coso` hook) on a hand-made
verl batch: verl's PPO loss minus coef * token-mean(B * H), CoSo off is verl's `ppo_loss` itself; and the row field
built from the agent loop's weights (`coso_weight_rows`)."""

import pytest
import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.config import ActorConfig
from verl.workers.utils.losses import ppo_loss

from verl_cua.integrations.verl.actor_loss import cua_actor_loss
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.coso import HOOK
from verl_cua.integrations.verl.coso import WEIGHT as COSO_WEIGHT
from verl_cua.integrations.verl.coso.fields import coso_weight_rows
from verl_cua.integrations.verl.estimator_plan import plan_for

B, P, R = 2, 3, 4


def _batch():
    g = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 0]], dtype=torch.float32)
    data = TensorDict(
        {
            "prompts": torch.ones(B, P, dtype=torch.long),
            "responses": torch.ones(B, R, dtype=torch.long),
            "attention_mask": torch.ones(B, P + R, dtype=torch.long),
            "response_mask": mask,
            "old_log_probs": -torch.rand(B, R, generator=g),
            "advantages": torch.randn(B, R, generator=g),
            COSO_WEIGHT: torch.tensor([[1.0, 0.0, 0.7, 0.5], [0.0, 1.0, 1.0, 0.3]]),
        },
        batch_size=B,
    )
    for key, value in {"dp_size": 1, "batch_num_tokens": None, "global_batch_size": None}.items():
        tu.assign_non_tensor_data(data, key, value)
    log_probs = -torch.rand(B * (P + R), generator=g)
    entropy = torch.rand(B * (P + R), generator=g).requires_grad_(True)
    return data, {"log_probs": log_probs, "entropy": entropy}, mask


def _config():
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, loss_agg_mode="token-mean")


def _coso(**settings):
    """What the trainer ships with cua.coso on: the run's plan (its hooks: coso) and its typed config."""
    cua = CuaConfig.from_mapping({"coso": {"enable": True, **settings}})
    plan = plan_for("grpo", cua)
    assert [hook.name for hook in plan.hooks] == ["coso"]
    return {"plan": plan, "cua": cua}


def test_coso_off_is_verl_ppo_loss_and_on_subtracts_the_weighted_entropy():
    data, out, mask = _batch()
    plain, _ = ppo_loss(_config(), out, data)
    off, _ = cua_actor_loss(_config(), out, data, mode="ppo")
    assert torch.equal(off, plain)
    off_plan = plan_for("grpo", CuaConfig())  # cua.coso off: the plan has no hook, the loss is verl's
    assert torch.equal(cua_actor_loss(_config(), out, data, mode="ppo", plan=off_plan, cua=CuaConfig())[0], plain)
    on, metrics = cua_actor_loss(_config(), out, data, mode="ppo", **_coso(coef=2.0, window=4))
    from verl.workers.utils.padding import no_padding_2_padding

    h = no_padding_2_padding(out["entropy"], data).detach()
    w = data[COSO_WEIGHT]
    bonus = float((w * h * mask).sum() / mask.sum())
    assert float(on.detach()) == pytest.approx(float(plain.detach()) - 2.0 * bonus, rel=1e-5)
    assert metrics["coso/causal_fraction"].values[0] == pytest.approx(4 / 6)
    on.backward()
    grad = no_padding_2_padding(out["entropy"].grad, data)
    assert torch.allclose(grad, -2.0 * w * mask / mask.sum())  # the bonus raises H on weighted model tokens only


def test_coso_needs_the_entropy():
    data, out, _ = _batch()
    with pytest.raises(ValueError, match="calculate_entropy"):
        cua_actor_loss(_config(), {"log_probs": out["log_probs"]}, data, mode="ppo", **_coso(coef=1.0))


def test_weight_rows_follow_the_mask_and_skip_excluded_rows():
    mask = torch.tensor([[1, 1, 0, 0, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    extra = [
        {"cua_coso_weights": [1.0, 0.0, 0.9, 0.9, 0.5], "cua_coso_seconds": 0.25},  # observation tokens: 0.9 dropped
        {"cua_coso_weights": [1.0, 1.0, 1.0], "cua_coso_seconds": 0.5},
        {},  # an infra row: no weights
    ]
    rows, metrics = coso_weight_rows(extra, mask, [False, True, True])
    assert rows[0][COSO_WEIGHT].tolist() == [1.0, 0.0, 0.0, 0.0, 0.5]
    assert all(set(row) == set(HOOK.row_fields) for row in rows)  # what the step hook declares it writes
    assert rows[1][COSO_WEIGHT].tolist() == [0.0] * 5 and rows[2][COSO_WEIGHT].tolist() == [0.0] * 5
    assert metrics["coso/weight_mean_rows"] == pytest.approx(0.5)
    assert metrics["coso/causal_fraction_rows"] == pytest.approx(2 / 3)
    assert metrics["coso/weight_s"] == pytest.approx(0.75)


def test_weights_of_a_real_tokenizers_tokens():
    # the tiny Qwen2.5-VL's tokenizer, as the agent loop decodes: special tokens skipped (their text is "": B = 0)
    from transformers import AutoTokenizer

    from verl_cua.algos.coso import action_parser, causal_weights, token_pieces
    from verl_cua.testing.tiny_models import build_tiny_model

    tok = AutoTokenizer.from_pretrained(str(build_tiny_model("qwen25vl")))
    ids = tok.encode("```python\npyautogui.click(50, 60)\n```\n", add_special_tokens=False)
    ids += [tok.convert_tokens_to_ids("<|im_end|>")]
    pieces = token_pieces(ids, lambda x: tok.decode(x, skip_special_tokens=True))
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=True)
    weights = causal_weights(pieces, action_parser("pyautogui", screen=(160, 210), image=(160, 210)))
    assert len(weights) == len(ids) and weights[-1] == 0.0
    digits = [w for w, p in zip(weights, pieces, strict=True) if p.strip().isdigit()]
    assert digits and all(w == 1.0 for w in digits)
