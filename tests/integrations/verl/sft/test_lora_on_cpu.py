"""LoRA on the `hf` rollout, as verl 0.9.1's vLLM path receives it (model.lora.merge=False): the base weights once
under `.base_layer` names, then each sync's adapter tensors plus `peft_config`, replacing the last adapter. The
server's log-probs must be the trainer's peft model's; and two LoRA training steps through verl on the CPU."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl")
peft = pytest.importorskip("peft")

from PIL import Image  # noqa: E402
from verl.utils.fsdp_utils import collect_lora_params, replace_lora_wrapper  # noqa: E402
from verl.utils.model import convert_weight_keys  # noqa: E402
from verl.workers.config import HFModelConfig, RolloutConfig  # noqa: E402

from verl_cua.integrations.hf_generation import load_model  # noqa: E402
from verl_cua.integrations.verl.hf_rollout.adapter import HFServerAdapter  # noqa: E402
from verl_cua.integrations.verl.hf_rollout.server import HFServer  # noqa: E402

GREEDY = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
# what verl's FSDP engine builds from actor_rollout_ref.model.{lora_rank,lora_alpha,target_modules,exclude_modules}
LORA = dict(r=8, lora_alpha=16, target_modules="all-linear", exclude_modules=".*visual.*", bias="none")


class _LocalHandle:
    """Stands in for the server's Ray handle: `handle.method.remote(...)` awaits the in-process server's method."""

    def __init__(self, server: HFServer):
        self.server = server

    def __getattr__(self, name: str) -> SimpleNamespace:
        return SimpleNamespace(remote=getattr(self.server, name))


def _setup(path: str, monkeypatch) -> tuple[HFServer, HFServerAdapter]:
    monkeypatch.setenv("RANK", "0")
    config = RolloutConfig(name="hf", prompt_length=512, response_length=8, tensor_model_parallel_size=1)
    server = HFServer(config, HFModelConfig(path=path))
    adapter = HFServerAdapter(config, HFModelConfig(path=path), None)
    adapter.server_handle = _LocalHandle(server)
    return server, adapter


def _trainer(path: str, seed: int, **lora) -> torch.nn.Module:
    """The trainer-side peft model (verl's `_build_lora_module` config) with a random, non-zero adapter."""
    model = peft.get_peft_model(
        load_model(path), peft.LoraConfig(task_type=peft.TaskType.CAUSAL_LM, **{**LORA, **lora})
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    return model.eval()


def _sync(adapter: HFServerAdapter, trainer, base: bool = False, step: int = 1) -> int:
    """What verl's `update_weights` sends (FSDP engine `get_per_tensor_param` -> `rollout.update_weights`)."""
    peft_config = trainer.peft_config["default"]
    sent = 0
    if base:  # base_sync_done=False: the whole base model, LoRA-targeted layers named `.base_layer.`
        params = collect_lora_params(trainer, layered_summon=False, base_sync_done=False)
        params = convert_weight_keys({replace_lora_wrapper(k, peft_config): v for k, v in params.items()}, trainer)
        kwargs = dict(peft_config=peft_config.to_dict(), base_sync_done=False, global_steps=step)
        sent += asyncio.run(adapter.update_weights(iter(params.items()), **kwargs))
    params = convert_weight_keys(collect_lora_params(trainer, layered_summon=False, base_sync_done=True), trainer)
    kwargs = dict(peft_config=peft_config.to_dict(), base_sync_done=True, global_steps=step)
    return sent + asyncio.run(adapter.update_weights(iter(params.items()), **kwargs))


def _image_prompt(server: HFServer) -> tuple[list[int], list[Image.Image]]:
    image = Image.new("RGB", (120, 90), (200, 10, 10))
    image.paste((255, 255, 255), (10, 10, 50, 40))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "click the button"}]}]
    text = server.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return server.processor(text=[text], images=[image], return_tensors="pt")["input_ids"][0].tolist(), [image]


def _served(server: HFServer, prompt: list[int], images) -> tuple[list[int], torch.Tensor]:
    out = asyncio.run(
        server.generate(
            prompt_ids=prompt, sampling_params={**GREEDY, "ignore_eos": True}, request_id="r", image_data=images
        )
    )
    return out.token_ids, torch.tensor(out.log_probs)


def _trainer_log_probs(server: HFServer, model, prompt: list[int], response: list[int], images) -> torch.Tensor:
    """Teacher-forced log-probs of `response` under `model` (the server's masking of banned ids)."""
    ids = torch.tensor([prompt + response])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), **server._vision_inputs(ids, images, {})}
    with torch.no_grad():
        logits = model(**inputs).logits[0].float()
    logits[:, server.banned_token_ids] = float("-inf")
    steps = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return steps.gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)


def _assert_serves(server: HFServer, trainer) -> torch.Tensor:
    prompt, images = _image_prompt(server)
    tokens, served = _served(server, prompt, images)
    torch.testing.assert_close(
        served, _trainer_log_probs(server, trainer, prompt, tokens, images), atol=1e-5, rtol=1e-5
    )
    return served


def _lora_modules(model: torch.nn.Module) -> set[str]:
    return {n.split(".lora_A")[0] for n, _ in model.named_parameters() if ".lora_A." in n}


def test_an_adapter_sync_serves_the_trainers_peft_policy_and_the_next_replaces_it(tiny_model, monkeypatch):
    _, path = tiny_model
    server, adapter = _setup(path, monkeypatch)
    prompt, images = _image_prompt(server)
    _, base = _served(server, prompt, images)
    first, second = _trainer(path, seed=1), _trainer(path, seed=2)
    assert _sync(adapter, first) == 28  # lora_A + lora_B of 7 projections x 2 layers; nothing of the vision tower
    assert asyncio.run(
        server.generate(prompt_ids=prompt, sampling_params=GREEDY, request_id="r", image_data=images)
    ).extra_fields == {"global_steps": 1}
    served_first = _assert_serves(server, first)
    assert (served_first - base[: len(served_first)]).abs().max() > 1e-2  # the adapter is applied at all
    served = _lora_modules(server.model)
    assert served == {n.removeprefix("base_model.model.") for n in _lora_modules(first)} and len(served) == 14
    assert not any("visual" in n for n in served)
    _sync(adapter, second, step=2)  # replaces, never accumulates: the second policy exactly
    _assert_serves(server, second)
    # a different LoraConfig rebuilds the layers: rank 4 on q/v only
    narrow = _trainer(path, seed=3, r=4, target_modules=["q_proj", "v_proj"])
    assert _sync(adapter, narrow, step=3) == 8
    _assert_serves(server, narrow)
    assert len(_lora_modules(server.model)) == 4


def test_the_first_lora_sync_loads_base_weights_under_base_layer_names(tiny_model, monkeypatch):
    """load_format=dummy: verl sends the base once (`base_sync_done=False`) before the first adapter."""
    _, path = tiny_model
    server, adapter = _setup(path, monkeypatch)
    trainer = _trainer(path, seed=4)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in trainer.named_parameters():
            if "lora_" not in name:
                param.add_(torch.randn(param.shape, generator=generator) * 0.05)
    base_names = collect_lora_params(trainer, layered_summon=False, base_sync_done=False)
    assert _sync(adapter, trainer, base=True) == len(base_names) + 28
    _assert_serves(server, trainer)
    _sync(adapter, trainer, base=True, step=2)  # a base sync with the adapter already injected lands in base_layer
    _assert_serves(server, trainer)


def test_an_incomplete_or_foreign_adapter_is_rejected_whole(tiny_model, monkeypatch):
    _, path = tiny_model
    server, adapter = _setup(path, monkeypatch)
    trainer = _trainer(path, seed=5)
    params = convert_weight_keys(collect_lora_params(trainer, layered_summon=False, base_sync_done=True), trainer)
    config = trainer.peft_config["default"].to_dict()
    items = list(params.items())
    with pytest.raises(KeyError, match="lacks 1 LoRA tensor"):
        asyncio.run(adapter.update_weights(iter(items[1:]), peft_config=config, base_sync_done=True))
    with pytest.raises(KeyError, match="match no LoRA layer"):
        asyncio.run(
            adapter.update_weights(
                iter([*items, ("x.lora_A.weight", items[0][1])]), peft_config=config, base_sync_done=True
            )
        )


# ---- two LoRA training steps through verl -----------------------------------------------------------------------


@pytest.mark.e2e
def test_two_lora_steps_through_verl_serve_the_trained_adapter(tmp_path, chromium):
    """A cold tiny Qwen3-VL (CI's GRPO run of that family) on one click-test seed; the entropy bonus gives the
    adapter a gradient whatever the rewards, and a high learning rate makes step 1's adapter move the policy well
    clear of the base. Step 2's rollouts must come from that adapter: the hf server's log-probs match the actor's
    (base + adapter) while the reference (the actor with its adapter disabled: verl's ref_in_actor under LoRA) sits
    far apart."""
    from verl_cua.integrations.verl import dataset
    from verl_cua.testing.cpu_train import train_on_cpu
    from verl_cua.testing.tiny_models import build_tiny_model

    model = str(build_tiny_model("qwen3vl"))
    train = tmp_path / "train.parquet"
    assert dataset.main(["--env", "miniwob", "--tasks", "click-test", "--seeds", "84", "--out", str(train)]) == 0
    run = train_on_cpu(
        tmp_path,
        model,
        train,
        "data.train_batch_size=1",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1",
        "cua.env.max_steps=1",
        "cua.action.max_tokens_per_step=16",
        "actor_rollout_ref.model.lora_rank=8",
        "actor_rollout_ref.model.lora_alpha=16",
        "actor_rollout_ref.model.target_modules=all-linear",
        "actor_rollout_ref.model.exclude_modules=.*visual.*",
        "actor_rollout_ref.actor.optim.lr=5e-2",
        "actor_rollout_ref.actor.entropy_coeff=0.01",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
    )
    first, second = run["steps"]
    # rollout vs actor on the rollout's tokens, in log space (k3 estimate of their KL); the hf rollout and the
    # FSDP actor differ by ~2e-4 here without any adapter (step 1: lora_B is zero, so the adapter is the base)
    assert first["actor/kl_loss"] == pytest.approx(0.0, abs=1e-7)
    for m in (first, second):
        assert m["training/rollout_probs_diff_valid"] == 1
        assert m["rollout_corr/k3_kl"] < 1e-3, m["rollout_corr/k3_kl"]
    # after step 1 the adapter is far from the base: a server still on the base would show this KL above
    assert second["actor/kl_loss"] > 3e-3, second["actor/kl_loss"]
    # the trainer's adapter: the language model's 14 projections, nothing of the vision tower, trained
    state = torch.load(tmp_path / "ckpt/global_step_2/actor/model_world_size_1_rank_0.pt", weights_only=False)
    lora = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in state.items() if "lora_" in k}
    assert len(lora) == 28 and not any("visual" in k for k in lora), sorted(lora)[:4]
    assert all(v.abs().max() > 0 for k, v in lora.items() if "lora_B" in k)
