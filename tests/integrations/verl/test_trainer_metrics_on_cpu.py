"""The step's GUI and response-mask metrics come from the fields the step fetched once (`StepFields`): `step` computes
them before it clears its view, `_compute_metrics` reports them without asking TransferQueue again."""

import torch
from transformers import AutoTokenizer
from verl.trainer.ppo.v1.trainer_base import KVBatchMeta
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from verl_cua.algos.entropulse import Entropulse
from verl_cua.algos.success_buffer import SuccessBuffer
from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.rows import step_fields
from verl_cua.integrations.verl.rows.step_fields import StepFieldsView
from verl_cua.integrations.verl.trainer import CuaTrainer
from verl_cua.testing.tiny_models import build_tiny_model


def test_the_mask_metrics_are_the_steps_one_fetch_reported_after_the_view_is_cleared(monkeypatch):
    tokenizer = AutoTokenizer.from_pretrained(str(build_tiny_model("qwen25vl")))
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    responses = torch.tensor([[5, pad, pad, 6], [7, 8, pad, 9]])
    masks = torch.tensor([[1, 0, 0, 1], [1, 1, 0, 0]])
    extra = {"cua_infra_failure": False, "cua_steps": 1, "cua_invalid_actions": 0, "cua_score": 0.0,
             "cua_truncated": False, "cua_env_seconds": 1.0, "cua_generate_seconds": 1.0}  # fmt: skip
    rows = {
        f"k{i}": {"uid": "g", "session_id": i, "extra_fields": {**extra, "cua_success": i == 0},
                  "responses": responses[i], "response_mask": masks[i]}
        for i in range(2)
    }  # fmt: skip
    calls = []

    def get(keys, partition_id=None, select_fields=None):  # TransferQueue's answer: tensor fields as jagged tensors
        calls.append(list(select_fields))
        out = {f: [rows[k][f] for k in keys] for f in select_fields if all(f in rows[k] for k in keys)}
        for name in ("responses", "response_mask"):
            out[name] = torch.nested.as_nested_tensor(out[name], layout=torch.jagged)
        return out

    monkeypatch.setattr(step_fields.tq, "kv_batch_get", get)
    batch = KVBatchMeta(keys=list(rows), tags=[{}, {}], partition_id="train")

    def verl_step(self, metrics, timing_raw):  # verl's step, whose advantage step read the fields once
        self.step_fields.of(batch)
        return batch

    monkeypatch.setattr(PPOTrainerSync, "step", verl_step)
    monkeypatch.setattr(PPOTrainerSync, "_compute_metrics", lambda self, *args, **kwargs: None)
    trainer = object.__new__(CuaTrainer)
    trainer.cua = CuaConfig()
    trainer.plan = plan_for("grpo", trainer.cua)
    trainer.step_fields, trainer.cua_totals = StepFieldsView(), {"infra_failures": 0, "episodes": 0}
    trainer.entropulse, trainer.success_buffer = Entropulse(trainer.cua.entropulse), SuccessBuffer()
    trainer.tokenizer, trainer.processor = tokenizer, None
    metrics = {}
    assert trainer.step(metrics, {}) is batch
    assert metrics["cua/step_field_fetches"] == 1 and trainer.step_fields._current is None  # cleared
    reported = {}
    trainer._compute_metrics(batch, reported, {}, global_steps=1, epoch=0)
    assert len(calls) == 1  # no second fetch for the metrics
    assert reported["cua/response_model_tokens"] == 4 and reported["cua/response_observation_tokens"] == 4
    assert reported["cua/response_image_tokens_masked"] == 3 and reported["cua/response_image_tokens_trained"] == 0
    assert reported["cua/infra_failures_total"] == 0 and reported["cua/success_rate"] == 0.5
