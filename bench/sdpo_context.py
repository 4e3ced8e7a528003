"""Does a model read SDPO's teacher context? `python -m bench.sdpo_context [--model PATH] [--layouts N]`.

SDPO's per-token advantage is log p_teacher - log p_student on the student's own response, the teacher being the
same model with a feedback block (a successful sibling's actions, the score, the final screenshot) inserted into
its prompt. That is a learning signal only if the block's *information* moves the log-probs more than the block's
mere *presence* does. On MiniWoB++ click-test layouts (real Chromium screenshots, the oracle's click from the DOM)
this scores the correct click as the response, in the model's own context and in teacher contexts built by
verl-cua's `TeacherContextBuilder`, and prints per-token means over the layouts of:

* `header`: a block that says nothing (the score only) minus the student: what the context shift alone does;
* `demo: right`: a block whose demo is this very click, minus the student;
* `demo: wrong`: a block whose demo is a click on the wrong place, minus the student;
* `information`: demo right minus demo wrong: what reading the demo is worth (a model that reads it: > 0);
* `teacher success`: the teacher as a policy: a greedy decode in the context a failed row gets when a sibling
  succeeded (the block holds that sibling's click), stepped in the real page: 1 when it hits the button.

**The gate.** SDPO's teacher must be a better policy than the student for its signal to teach anything (the paper's
§2; later work finds the gain linear in the initial student-teacher gap). A model passes when the block's presence
costs at most `GATE["header"]` nats a token either way, reading the demo is worth at least `GATE["information"]`
nats a token, and the teacher hits the button in at least `GATE["teacher success"]` of the layouts. `bench.learn`
runs it before every SDPO run and reports a curve whose gate failed as such.

Default model: the tiny warm-started Qwen2.5-VL of the learnable CPU setting (docs/learning.md); any local
Hugging Face Qwen-VL folder works (`--model`), on a GPU with `--device cuda`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench.requires import require

GATE = {"header": 0.3, "information": 1.0, "teacher success": 0.8}


def gate_failures(result: dict[str, list[float]]) -> list[str]:
    """What fails the gate (empty: it passes), one phrase each, from `probe`'s per-layout figures."""
    mean = {name: statistics.fmean(values) for name, values in result.items()}
    failures = []
    if abs(mean["header"]) > GATE["header"]:
        failures.append(f"block presence {mean['header']:+.2f} nats/token (bound +-{GATE['header']})")
    if mean["information"] < GATE["information"]:
        failures.append(f"information {mean['information']:+.2f} nats/token (< {GATE['information']})")
    if mean["teacher success"] < GATE["teacher success"]:
        failures.append(f"teacher success {mean['teacher success']:.2f} (< {GATE['teacher success']})")
    return failures


def gate_verdict(failures: list[str]) -> str:
    """PASS, or FAIL with what failed."""
    return "FAIL: " + "; ".join(failures) if failures else "PASS"


def _far_corner(box: tuple[float, ...], scale: float, screen: tuple[int, int]) -> tuple[int, int]:
    """The corner of the task area (below MiniWoB++'s instruction bar) farthest from the target's centre."""
    cx, cy = (box[0] + box[2]) / 2 * scale, (box[1] + box[3]) / 2 * scale
    corners = [(x, y) for x in (5, screen[0] - 5) for y in (55, screen[1] - 5)]
    return max(corners, key=lambda c: (c[0] - cx) ** 2 + (c[1] - cy) ** 2)


def probe(model_path: str, layouts: int, device: str = "cpu", task: str = "click-test", observation: str = "screenshot",
          tokens: int = 2000) -> dict[str, list[float]]:  # fmt: skip
    """Per-layout mean per-token differences (teacher - student) of the correct click's log-probs, by block kind;
    `observation`: what the prompts show (OSWorld's type; the reading setting's table), trimmed to `tokens`."""
    import torch
    from transformers import AutoModelForImageTextToText
    from verl.utils import hf_processor, hf_tokenizer

    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import target_box
    from verl_cua.envs.task_sets import resolve_tasks
    from verl_cua.integrations.verl.sdpo.context import TeacherContextBuilder, feedback_block
    from verl_cua.testing.log_probs import response_log_probs, student_prompt
    from verl_cua.testing.miniwob_oracle import solution
    from verl_cua.testing.warm_start import click_text

    tokenizer, processor = hf_tokenizer(model_path), hf_processor(model_path)
    model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
    builder = TeacherContextBuilder(tokenizer, processor)
    end = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    out: dict[str, list[float]] = {
        "header": [],
        "demo: right": [],
        "demo: wrong": [],
        "information": [],
        "teacher success": [],
    }
    env = MiniWoBEnv(task, observation=observation, observation_tokens=tokens)
    try:
        for ref in resolve_tasks("miniwob", [task], f"200000-{200000 + layouts - 1}"):
            obs = env.reset(ref.task)
            right, wrong = solution(env, obs)[0], click_text(*_far_corner(target_box(env, task), env.scale, obs.screen))
            prompt, mm = student_prompt(processor, obs)
            response = torch.tensor(tokenizer.encode(right, add_special_tokens=False) + end)
            student = response_log_probs(model, torch.cat([prompt, response]), mm, len(response), builder.image_pad)
            scores = {}
            for name, demo in (("header", None), ("demo: right", [right]), ("demo: wrong", [wrong])):
                built = builder.build(prompt, response, mm, feedback_block(demo, 0.0, "", None))
                teacher = response_log_probs(
                    model, built["input_ids"], built["multi_modal_inputs"], len(response), builder.image_pad
                )
                scores[name] = float((teacher - student).mean())
                out[name].append(scores[name])
            out["information"].append(scores["demo: right"] - scores["demo: wrong"])
            empty = torch.zeros(0, dtype=prompt.dtype)
            built = builder.build(prompt, empty, mm, feedback_block([right], 0.0, "", None))
            decoded = greedy_turn(model, tokenizer, built["input_ids"], built["multi_modal_inputs"], builder.image_pad)
            out["teacher success"].append(float(env.step(decoded, format="pyautogui").reward > 0))
    finally:
        env.close()
    return out


def greedy_turn(model, tokenizer, input_ids, mm: dict, image_pad: int, max_new_tokens: int = 32) -> str:
    """The model's greedy turn after the 1-D prompt `input_ids` (images in `mm`), as text."""
    import torch

    from verl_cua.testing.log_probs import model_inputs

    kwargs = model_inputs(model, input_ids, mm, image_pad)
    with torch.no_grad():
        out = model.generate(**kwargs, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, kwargs["input_ids"].shape[1] :], skip_special_tokens=True)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a local Hugging Face Qwen-VL folder (default: the learnable one)")
    ap.add_argument("--layouts", type=int, default=16, help="click-test layouts (seeds 200000 on, never trained on)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="write the per-layout figures here as JSON")
    ap.add_argument("--gate", action="store_true", help="exit 1 when the gate fails")
    args = ap.parse_args(argv)
    require("bench.sdpo_context", ("torch", "verl", "miniwob"))
    if args.model is None:
        from verl_cua.testing.learning import learnable_model

        args.model = str(learnable_model())
    result = probe(args.model, args.layouts, args.device)
    print(f"bench.sdpo_context: {args.model}, {args.layouts} click-test layouts; teacher - student, nats per token")
    for name, values in result.items():
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        mean, low, high = statistics.fmean(values), min(values), max(values)
        print(f"  {name:15s} {mean:+.3f} (sd {sd:.3f}, min {low:+.3f}, max {high:+.3f})")
    failures = gate_failures(result)
    print(f"gate: {gate_verdict(failures)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, **result, "gate_failures": failures}, indent=1))
    return 1 if failures and args.gate else 0


if __name__ == "__main__":
    sys.exit(main())
