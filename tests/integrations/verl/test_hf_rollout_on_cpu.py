"""The `hf` CPU rollout backend: registration, HFServer generation semantics, weight sync, and one run through Ray."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl")

from PIL import Image  # noqa: E402
from verl.workers.config import HFModelConfig, RolloutConfig  # noqa: E402

from verl_cua.integrations.hf_generation import truncate_at_stop  # noqa: E402
from verl_cua.integrations.verl.hf_rollout import register_hf_rollout  # noqa: E402
from verl_cua.integrations.verl.hf_rollout.adapter import HFServerAdapter  # noqa: E402
from verl_cua.integrations.verl.hf_rollout.replica import HFReplica, server_actor_name  # noqa: E402
from verl_cua.integrations.verl.hf_rollout.server import HFServer  # noqa: E402

FAMILIES = ["qwen25vl", "qwen3vl"]
RESPONSE_LENGTH = 8
GREEDY = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


@pytest.fixture(scope="module", params=FAMILIES)
def model_dir(request, tmp_path_factory) -> Path:
    """The shared tiny random checkpoint (its vocab is padded past the tokenizer's, so out-of-vocab ids exist)."""
    from verl_cua.testing.tiny_models import build_tiny_model

    return Path(build_tiny_model(request.param))


def _rollout_config(**overrides) -> RolloutConfig:
    kwargs = dict(name="hf", prompt_length=256, response_length=RESPONSE_LENGTH, tensor_model_parallel_size=1)
    return RolloutConfig(**{**kwargs, **overrides})


@pytest.fixture(scope="module")
def server(model_dir) -> HFServer:
    return HFServer(_rollout_config(), HFModelConfig(path=str(model_dir)))


@pytest.fixture
def pristine(server):
    """Restores the server's weights after a test that loads new ones."""
    saved = {k: v.clone() for k, v in server.model.state_dict().items()}
    yield server
    asyncio.run(server.load_weights(saved))


def _generate(server: HFServer, prompt_ids: list[int], images=None, **params):
    sampling = {**GREEDY, **params}
    return asyncio.run(
        server.generate(prompt_ids=prompt_ids, sampling_params=sampling, request_id="r", image_data=images)
    )


def _text_prompt(server: HFServer, text: str = "click the button") -> list[int]:
    encoded = server.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def _image_prompt(server: HFServer, image: Image.Image) -> list[int]:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "click the button"}]}]
    text = server.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return server.processor(text=[text], images=[image], return_tensors="pt")["input_ids"][0].tolist()


def _image(color) -> Image.Image:
    image = Image.new("RGB", (120, 90), color)
    image.paste((255, 255, 255), (10, 10, 50, 40))
    return image


def _banned(server: HFServer) -> set[int]:
    return set(server.banned_token_ids.tolist())


def _forward_log_probs(server: HFServer, prompt: list[int], response: list[int], temperature: float = 1.0):
    """Teacher-forced log_softmax(masked logits / T) over the response positions, shape (len(response), vocab)."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = server.model(input_ids=ids, mm_token_type_ids=torch.zeros_like(ids)).logits[0].float()
    logits[:, server.banned_token_ids] = float("-inf")
    return torch.log_softmax(logits[len(prompt) - 1 : -1] / temperature, dim=-1)


def _assert_sampled_log_probs(output, steps: torch.Tensor) -> None:
    expected = steps.gather(-1, torch.tensor(output.token_ids).unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(torch.tensor(output.log_probs), expected, atol=1e-5, rtol=1e-5)


# ---- registration ---------------------------------------------------------------------------------------------


def test_register_hf_rollout_resolves_replica_and_adapter_idempotently():
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import get_rollout_replica_class

    register_hf_rollout()
    register_hf_rollout()
    assert get_rollout_replica_class("hf") is HFReplica
    assert get_rollout_class("hf", "async") is HFServerAdapter


# ---- HFServer in process --------------------------------------------------------------------------------------


def test_greedy_is_deterministic_and_log_probs_match_a_forward_pass(server):
    prompt = _text_prompt(server)
    first, second = _generate(server, prompt), _generate(server, prompt)
    assert first.token_ids == second.token_ids and first.log_probs == second.log_probs
    assert 1 <= len(first.token_ids) == len(first.log_probs) <= RESPONSE_LENGTH
    assert all(lp <= 0 for lp in first.log_probs)
    assert first.stop_reason == "completed" and first.extra_fields == {"global_steps": None}
    steps = _forward_log_probs(server, prompt, first.token_ids)
    assert first.token_ids == steps.argmax(-1).tolist()  # greedy = argmax of the masked logits
    _assert_sampled_log_probs(first, steps)


def test_log_probs_are_omitted_unless_requested(server):
    assert _generate(server, _text_prompt(server), logprobs=False).log_probs is None


def test_max_tokens_and_the_default_response_budget_are_respected(server):
    prompt = _text_prompt(server)
    assert len(_generate(server, prompt, max_tokens=3, ignore_eos=True).token_ids) == 3
    assert len(_generate(server, prompt, max_new_tokens=2, ignore_eos=True).token_ids) == 2
    assert len(_generate(server, prompt, ignore_eos=True).token_ids) == RESPONSE_LENGTH
    with pytest.raises(ValueError, match="max_model_len"):
        _generate(server, [1] * server.max_model_len)


def test_generation_stops_at_eos_and_at_stop_token_ids(server, monkeypatch):
    prompt = _text_prompt(server)
    first = _generate(server, prompt).token_ids[0]
    assert _generate(server, prompt, stop_token_ids=[first]).token_ids == [first]
    monkeypatch.setattr(server, "eos_token_ids", [first])
    stopped = _generate(server, prompt)
    assert stopped.token_ids == [first] and len(stopped.log_probs) == 1
    assert len(_generate(server, prompt, ignore_eos=True).token_ids) == RESPONSE_LENGTH


def test_truncate_at_stop_drops_padding_after_the_first_stop_id():
    assert truncate_at_stop([5, 7, 2, 0, 0], [2]) == [5, 7, 2]
    assert truncate_at_stop([5, 7], [2]) == [5, 7]


def test_seeded_sampling_is_reproducible_and_never_samples_banned_ids(server):
    prompt = _text_prompt(server)
    hot = {"temperature": 5.0, "max_tokens": 64, "ignore_eos": True}  # near uniform: banned ids would show up
    runs = [_generate(server, prompt, seed=seed, **hot) for seed in (1, 1, 2)]
    assert runs[0].token_ids == runs[1].token_ids and runs[0].token_ids != runs[2].token_ids
    sampled = {t for run in runs for t in run.token_ids}
    assert not sampled & _banned(server), "sampled a vision placeholder or an id past the tokenizer"
    assert _banned(server) >= {server.image_token_id, server.video_token_id}
    assert all(lp <= 0 for run in runs for lp in run.log_probs)
    _assert_sampled_log_probs(runs[0], _forward_log_probs(server, prompt, runs[0].token_ids, temperature=5.0))


def test_top_k_one_sampling_equals_greedy(server):
    prompt = _text_prompt(server)
    assert _generate(server, prompt, temperature=1.0, top_k=1, seed=3).token_ids == _generate(server, prompt).token_ids


def test_image_prompt_generates_and_the_image_changes_the_output(server):
    red, blue = _image((200, 10, 10)), _image((10, 10, 200))
    prompt = _image_prompt(server, red)
    assert prompt.count(server.image_token_id) > 1  # expanded pads, sent as they are
    out_red, out_blue = _generate(server, prompt, [red]), _generate(server, prompt, [blue])
    assert 1 <= len(out_red.token_ids) == len(out_red.log_probs)
    assert not set(out_red.token_ids) & _banned(server)
    assert out_red.log_probs != out_blue.log_probs  # pixel values reach the model
    # same log-probs as a teacher-forced forward on the processor's own inputs (M-RoPE positions included)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "click the button"}]}]
    text = server.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = server.processor(text=[text], images=[red], return_tensors="pt")
    built = server._vision_inputs(torch.tensor([prompt]), [red], {})
    assert torch.equal(built["mm_token_type_ids"], inputs["mm_token_type_ids"].to(built["mm_token_type_ids"].dtype))
    assert torch.equal(built["image_grid_thw"], inputs["image_grid_thw"])
    response = torch.tensor([out_red.token_ids])
    inputs["input_ids"] = torch.cat([inputs["input_ids"], response], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    inputs["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(response)], dim=1)
    with torch.no_grad():
        logits = server.model(**inputs).logits[0].float()
    logits[:, server.banned_token_ids] = float("-inf")
    _assert_sampled_log_probs(out_red, torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1))


def test_image_placeholder_mismatch_raises_a_clear_error(server):
    image = _image((200, 10, 10))
    prompt = _image_prompt(server, image)
    short = list(prompt)
    short.remove(server.image_token_id)
    with pytest.raises(ValueError, match="image placeholder tokens"):
        _generate(server, short, [image])
    with pytest.raises(ValueError, match="no image_data"):
        _generate(server, prompt)


def _together(server: HFServer, requests: list[tuple[list[int], list | None, dict]]) -> list:
    """The requests sent at once, as a step's concurrent episodes send them; each its outcome or its exception."""

    async def run():
        calls = [
            server.generate(prompt_ids=p, sampling_params={**GREEDY, **params}, request_id=str(i), image_data=images)
            for i, (p, images, params) in enumerate(requests)
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(run())


def test_concurrent_requests_share_a_batch_and_get_what_each_alone_gets(server):
    # screenshots of three sizes (so three image-token counts) and prompts of different lengths, left-padded in one
    # batch; each row keeps its own token budget
    images = [_image((40 * i, 200 - 30 * i, 90)).resize((120 + 28 * (i % 3), 90)) for i in range(5)]
    requests = [(_image_prompt(server, im), [im], {"max_tokens": 3 + i}) for i, im in enumerate(images)]
    requests.append((_text_prompt(server, "a text-only prompt in the same batch"), None, {"max_tokens": 6}))
    alone = [_generate(server, p, images, **params) for p, images, params in requests]
    server.batch_sizes.clear()
    together = _together(server, requests)
    assert max(server.batch_sizes) >= 2, server.batch_sizes  # the waiting requests went as one batch
    for (_, _, params), a, b in zip(requests, alone, together, strict=True):
        assert b.token_ids == a.token_ids and len(b.token_ids) <= params["max_tokens"]
        assert b.log_probs == pytest.approx(a.log_probs, abs=1e-5)


def test_a_bad_request_fails_alone_and_seeded_or_penalised_ones_are_never_batched(server):
    image = _image((200, 10, 10))
    good = _image_prompt(server, image)
    bad = list(good)
    bad.remove(server.image_token_id)
    server.batch_sizes.clear()
    outcomes = _together(server, [(good, [image], {}), (bad, [image], {}), (good, [image], {})])
    assert isinstance(outcomes[1], ValueError) and "image placeholder tokens" in str(outcomes[1])
    assert outcomes[0].token_ids == outcomes[2].token_ids == _generate(server, good, [image]).token_ids
    hot = {"temperature": 5.0, "max_tokens": 16, "ignore_eos": True}
    server.batch_sizes.clear()
    seeded = _together(server, [(good, [image], {**hot, "seed": s}) for s in (1, 1, 2)])
    assert set(server.batch_sizes) == {1}  # each seeded request draws from its own RNG stream, alone
    assert seeded[0].token_ids == seeded[1].token_ids != seeded[2].token_ids
    server.batch_sizes.clear()
    _together(server, [(good, [image], {"repetition_penalty": 1.3})] * 3)
    assert set(server.batch_sizes) == {1}  # a penalty would count the batch's left padding as repeated tokens


def test_load_weights_changes_generation_and_accepts_trainer_names(pristine):
    server = pristine
    prompt = _text_prompt(server)
    before = _generate(server, prompt, ignore_eos=True)
    generator = torch.Generator().manual_seed(0)
    perturbed = {k: v + torch.randn(v.shape, generator=generator) for k, v in server.model.state_dict().items()}
    assert asyncio.run(server.load_weights(perturbed)) == len(perturbed)
    after = _generate(server, prompt, ignore_eos=True)
    assert after.log_probs != before.log_probs
    embed = next(k for k in perturbed if k.endswith("embed_tokens.weight"))
    wrapped = [("_fsdp_wrapped_module." + embed, perturbed[embed].double()), ("lm_head.weight", perturbed[embed])]
    assert asyncio.run(server.load_weights(wrapped)) == 2


def test_load_weights_rejects_unknown_names_and_wrong_shapes(server):
    with pytest.raises(KeyError, match="match no model parameter.*not.a.weight"):
        asyncio.run(server.load_weights([("not.a.weight", torch.zeros(1))]))
    embed = next(k for k in server.model.state_dict() if k.endswith("embed_tokens.weight"))
    with pytest.raises(ValueError, match="shape"):
        asyncio.run(server.load_weights({embed: torch.zeros(1)}))


def test_lifecycle_calls_are_no_ops_and_global_steps_reach_token_output(server):
    async def lifecycle():
        await server.wake_up(tags=["weights"])
        await server.sleep()
        for call in (server.clear_kv_cache, server.release_kv_cache, server.resume_kv_cache, server.resume_generation):
            await call()
        await server.start_profile(role="x")
        await server.stop_profile()
        aborted = await server.abort_all_requests(reject_request=True)
        await server.set_global_steps(5)
        return aborted

    assert asyncio.run(lifecycle()) == {"aborted_count": 0, "request_ids": []}
    try:
        assert _generate(server, _text_prompt(server)).extra_fields == {"global_steps": 5}
    finally:
        asyncio.run(server.set_global_steps(None))


def test_video_inputs_are_rejected_with_a_clear_error(server):
    with pytest.raises(NotImplementedError, match="text and image"):
        asyncio.run(
            server.generate(prompt_ids=[1], sampling_params=dict(GREEDY), request_id="r", video_data=[object()])
        )


# ---- HFServerAdapter without a server -------------------------------------------------------------------------


def _adapter(model_dir: Path, monkeypatch, rank: int, tp: int, replica_rank: int = -1) -> HFServerAdapter:
    monkeypatch.setenv("RANK", str(rank))
    config = _rollout_config(tensor_model_parallel_size=tp)
    return HFServerAdapter(config, HFModelConfig(path=str(model_dir)), None, replica_rank=replica_rank)


@pytest.mark.parametrize("as_async", [False, True])
def test_adapter_off_rank_drains_the_whole_weight_iterator_without_a_server(model_dir, monkeypatch, as_async):
    adapter = _adapter(model_dir, monkeypatch, rank=3, tp=2)
    assert (adapter.replica_rank, adapter.rollout_rank, adapter.has_server) == (1, 1, False)
    consumed = []

    def weights():
        for i in range(5):
            consumed.append(i)
            yield f"w{i}", torch.zeros(2)

    async def async_weights():
        for item in weights():
            yield item

    source = async_weights() if as_async else weights()
    assert asyncio.run(adapter.update_weights(source, global_steps=1)) == 0
    assert consumed == list(range(5))


def test_adapter_rejects_delta_flush(model_dir, monkeypatch):
    adapter = _adapter(model_dir, monkeypatch, rank=0, tp=1)
    with pytest.raises(NotImplementedError, match="named_tensors"):
        asyncio.run(adapter.update_weights(iter([]), wire_format="delta_flush"))


# ---- through Ray ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_replica_launches_a_named_cpu_server_and_the_adapter_syncs_weights(ray_cluster, model_dir, monkeypatch):
    from omegaconf import OmegaConf

    start = time.monotonic()
    model_config = OmegaConf.create({"path": str(model_dir)})  # the raw trainer DictConfig, as verl passes it
    replica = HFReplica(replica_rank=0, config=_rollout_config(), model_config=model_config, gpus_per_node=1)
    assert replica.rollout_worker_use_gpu() is False
    asyncio.run(replica.init_hybrid(SimpleNamespace(workers=[None])))
    handle = ray_cluster.get_actor(server_actor_name(0))
    assert replica.server_handle is not None and replica.server_address == "hf-replica-0"
    try:
        local = HFServer(_rollout_config(), HFModelConfig(path=str(model_dir)))
        prompt = _text_prompt(local)

        def remote_generate():
            return ray_cluster.get(
                handle.generate.remote(prompt_ids=prompt, sampling_params=dict(GREEDY), request_id="x")
            )

        before = remote_generate()
        assert before.token_ids == _generate(local, prompt).token_ids
        asyncio.run(replica.sleep())
        asyncio.run(replica.wake_up())
        asyncio.run(replica.clear_kv_cache())

        adapter = _adapter(model_dir, monkeypatch, rank=0, tp=1)
        generator = torch.Generator().manual_seed(0)
        weights = ((k, v + torch.randn(v.shape, generator=generator)) for k, v in local.model.state_dict().items())
        assert asyncio.run(adapter.update_weights(weights, global_steps=7)) == len(local.model.state_dict())
        after = remote_generate()
        assert after.extra_fields == {"global_steps": 7} and after.log_probs != before.log_probs
    finally:
        _kill(ray_cluster, handle, server_actor_name(0))
    assert time.monotonic() - start < 60


def _kill(ray, handle, name: str) -> None:
    """Kill the server and wait until its name is free for the next parametrisation."""
    ray.kill(handle)
    for _ in range(100):
        try:
            ray.get_actor(name)
        except ValueError:
            return
        time.sleep(0.1)


def test_replica_refuses_standalone_and_colocated_modes(model_dir):
    replica = HFReplica(replica_rank=0, config=_rollout_config(), model_config=None, gpus_per_node=1)
    with pytest.raises(NotImplementedError, match="hybrid mode only"):
        asyncio.run(replica.init_standalone())
    with pytest.raises(NotImplementedError, match="hybrid mode only"):
        asyncio.run(replica.init_colocated(None))
