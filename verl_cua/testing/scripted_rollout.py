"""A scripted stand-in for verl's rollout server in agent-loop tests, and a runner of one `gui_agent` sample with
verl's real AgentLoopBase, tokenizer and processor on a tiny local Qwen-VL."""

from __future__ import annotations

import asyncio
from typing import Any

from verl.workers.rollout.replica import TokenOutput

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
HF_TYPE = {"qwen25vl": "qwen2_5_vl", "qwen3vl": "qwen3_vl"}


class ScriptedServer:
    """Answers each generate call with the next scripted text (as tokens, ending in <|im_end|>); not a model."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.calls = tokenizer, list(texts), []

    async def generate(self, *, request_id, prompt_ids, sampling_params, image_data=None, **kwargs):
        """The next scripted text's tokens, cut to the request's `max_tokens`."""
        self.calls.append({"prompt_ids": list(prompt_ids), "images": len(image_data or []), **sampling_params})
        text = self.texts.pop(0) if self.texts else "WAIT"
        ids = self.tokenizer.encode(text, add_special_tokens=False)[: sampling_params["max_tokens"] - 1]
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def run_sample(model: tuple[str, str], server_factory, overrides: list[str], **row: Any):
    """Run one `gui_agent` sample (`row`: the dataset row's fields) with the server `server_factory(tokenizer)`
    makes; returns (the loop's output, the server, the tokenizer). The worker's env pools are closed after."""
    from transformers import AutoProcessor, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from verl_cua.integrations.verl import env_service
    from verl_cua.integrations.verl.agent_loop import GUIAgentLoop
    from verl_cua.testing.cpu_config import cpu_config

    family, path = model
    cfg = cpu_config(path, *overrides)
    tokenizer, processor = AutoTokenizer.from_pretrained(path), AutoProcessor.from_pretrained(path)
    server = server_factory(tokenizer)

    async def main():
        loop = GUIAgentLoop(
            trainer_config=DictConfigWrap(cfg),
            server_manager=server,
            tokenizer=tokenizer,
            processor=processor,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(cfg.data),
            hf_model_type=HF_TYPE[family],
        )
        return await loop.run(dict(SAMPLING), **row)

    try:
        return asyncio.run(main()), server, tokenizer
    finally:
        env_service.close_all()
