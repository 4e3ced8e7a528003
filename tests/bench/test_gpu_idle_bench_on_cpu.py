"""`bench.gpu_idle` at a small size: the cached engine expands each distinct screenshot once and spends less CPU than
expanding every row of every pass, grid prompts give verl's tokens for less CPU, and the packed top-k passes move a
response/sequence share of the bytes."""

import json

from bench import gpu_idle


def test_the_gpu_idle_bench_shows_each_saving_against_its_anchor(tmp_path):
    args = ["--rows", "4", "--episodes", "1", "--steps", "4", "--prompts", "3", "--out", str(tmp_path)]
    assert gpu_idle.main(args) == 0
    record = json.loads((tmp_path / "gpu_idle.json").read_text())
    engine, prompts, tq = record["engine"], record["agent_loop"], record["transfer_queue"]
    assert engine["screenshots_expanded_after"] == engine["screenshots_distinct"] == 5  # 4 turns and the final one
    assert engine["screenshots_expanded_before"] > 5
    assert engine["cpu_s_after"] < engine["cpu_s_before"]
    assert prompts["same_tokens"] and prompts["cpu_ms_per_prompt_after"] < prompts["cpu_ms_per_prompt_before"]
    assert tq["student_pass_bytes_per_row_after"] == tq["response_tokens"] * tq["topk"] * 4
    assert tq["gb_per_step_after"] < tq["gb_per_step_before"] / 50
