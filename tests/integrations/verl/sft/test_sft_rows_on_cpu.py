"""SFT rows are the agent loop's tokens. Recorded Claude and vLLM replies (the eval tests' fixtures, on their fake
desktop) and a traced MiniWoB++ episode (real Chromium) become `verl-cua sft-data` rows for Qwen2.5-VL and Qwen3-VL;
verl's own MultiTurnSFTDataset tokenizes them; `GUIAgentLoop` then plays the same episode answering with the converted
replies, and its prompt + response tokens and screenshots are the SFT row's."""

import pandas as pd
import pytest
from test_agent_loop_on_cpu import oracle_texts, run_loop  # the sibling test module's loop harness
from transformers import AutoProcessor
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from verl_cua.envs import EnvPool, register_env
from verl_cua.envs.task_sets import TaskRef
from verl_cua.envs.trajectory import EpisodeWriter, write_json
from verl_cua.eval import ChatClient, EpisodeSettings, run_episode
from verl_cua.sft.data import SFTDataConfig, build
from verl_cua.testing.chat_server import ScriptedChatServer
from verl_cua.testing.recorded_replies import ANTHROPIC, ANTHROPIC_DONE, OPENAI_DONE, OPENAI_TEXT, FakeDesktop

FORMAT = {"qwen25vl": "qwen25vl", "qwen3vl": "qwen3vl"}  # each tiny family's own tool-call format
RECORDED = {"vllm-qwen3vl": ("openai", "qwen3vl", [OPENAI_TEXT, OPENAI_DONE]),
            "claude": ("anthropic", "claude", [ANTHROPIC, ANTHROPIC_DONE])}  # fmt: skip
register_env("recorded_desktop", "verl_cua.testing.recorded_replies:FakeDesktop")


def recorded_run(tmp_path, name: str):
    """An eval run directory of one recorded episode (the eval harness's own episode runner and writer)."""
    api, fmt, replies = RECORDED[name]
    run = tmp_path / f"run-{name}"
    server = ScriptedChatServer({"Submit": replies})
    try:
        client = ChatClient(api, f"recorded-{name}", base_url=server.url, api_key="sk-test", retries=0)
        with EnvPool(FakeDesktop, 1) as pool, pool.acquire() as lease:
            writer = EpisodeWriter(run / "forms" / "submit")
            result = run_episode(lease, TaskRef("fake", "submit", "forms", "submit"), client, EpisodeSettings(fmt),
                                 writer)  # fmt: skip
            writer.finish(result)
    finally:
        server.close()
    write_json(run / "run.json", {"model": f"recorded-{name}", "format": fmt})
    assert result["status"] == "success"
    return run


def sft_rows(run, model_path, fmt, rows, tmp_path):
    """`verl-cua sft-data` on `run`, then verl's MultiTurnSFTDataset on the parquet: [(row, item)] by step."""
    out = tmp_path / f"sft-{fmt}-{rows}.parquet"
    processor = AutoProcessor.from_pretrained(model_path)
    card = build(SFTDataConfig(runs=[str(run)], format=fmt, model=model_path, out=str(out), rows=rows), processor)
    config = {"pad_mode": "no_padding", "max_length": 1 << 20, "messages_key": "messages", "image_key": "images"}
    dataset = MultiTurnSFTDataset(str(out), processor.tokenizer, config=config, processor=processor)
    frame = pd.read_parquet(out)
    items = sorted(((frame.iloc[i]["step_index"], frame.iloc[i], dataset[i]) for i in range(len(frame))),
                   key=lambda t: t[0])  # fmt: skip
    return card, [(row, item) for _, row, item in items], processor.tokenizer


def replies(sft, rows: str) -> list[str]:
    """The assistant turns of the SFT rows, in step order."""
    if rows == "step":
        return [row["messages"].tolist()[-1]["content"] for row, _ in sft]
    return [m["content"] for m in sft[0][0]["messages"].tolist() if m["role"] == "assistant"]


def assert_same_tokens(outs, rows, tokenizer):
    """Each agent-loop row's tokens are the SFT row's, up to the newline the chat template puts after the last turn."""
    newline = tokenizer.encode("\n", add_special_tokens=False)
    assert len(outs) == len(rows)
    for out, (row, item) in zip(outs, rows, strict=True):
        agent = list(out.prompt_ids) + list(out.response_ids)
        sft = item["input_ids"].tolist()
        assert sft == agent + newline
        # trained tokens: each reply and its end-of-turn in both, plus the template's newline after each in SFT
        turns = int(row["turns"])
        assert int(item["loss_mask"].sum()) == sum(out.response_mask) + turns * len(newline)
        images = out.multi_modal_data["images"]
        assert len(row["images"]) == len(images) == int(item["multi_modal_inputs"]["image_grid_thw"].shape[0])


@pytest.mark.parametrize("rows", ["episode", "step"])
@pytest.mark.parametrize("source", list(RECORDED))
def test_recorded_replies_become_the_agent_loops_rows(tiny_model, tmp_path, source, rows):
    family, path = tiny_model
    fmt = FORMAT[family]
    card, sft, tokenizer = sft_rows(recorded_run(tmp_path, source), path, fmt, rows, tmp_path)
    texts = replies(sft, rows)
    assert len(texts) == 2 and "<tool_call>" in texts[0] and "The Submit button is in the middle." in texts[0]
    assert (
        card["episodes"] == 1
        and card["steps"] == 2
        and card["per_source_model"] == {f"recorded-{source}": {"episodes": 1, "steps": 2}}
    )
    outs, _server, _tok = run_loop(tiny_model, texts, "cua.env.name=recorded_desktop", f"cua.env.rows={rows}",
                                   f"cua.action.format={fmt}", "cua.env.max_steps=5", task="submit")  # fmt: skip
    outs = outs if isinstance(outs, list) else [outs]
    assert outs[0].extra_fields["cua_success"] and outs[0].extra_fields["cua_steps"] == 2  # same clicks, same result
    assert_same_tokens(outs, sft, tokenizer)
    assert card["tokens"]["total"] == sum(len(item["input_ids"]) for _, item in sft)  # the card counts exactly


@pytest.mark.parametrize("tiny_model", ["qwen3vl"], indirect=True)
@pytest.mark.parametrize("rows", ["episode", "step"])
def test_a_traced_miniwob_episode_becomes_the_agent_loops_rows(tiny_model, chromium, tmp_path, rows):
    """A training trace of the oracle (pyautogui, screen pixels) re-rendered as Qwen3-VL tool calls: the agent loop
    answering with them solves the same page and builds the SFT rows' tokens, history text included (rows=step)."""
    texts = oracle_texts("enter-text", 3)
    trace = tmp_path / "trace"
    run_loop(tiny_model, texts, "cua.env.max_steps=5", f"cua.trace.dir={trace}", task="enter-text", seed=3,
             uid="0a1b2c3d", session_id=0, global_steps=1)  # fmt: skip
    family, path = tiny_model
    card, sft, tokenizer = sft_rows(trace, path, "qwen3vl", rows, tmp_path)
    assert card["steps"] == 3 and card["per_task"] == {"enter-text": {"episodes": 1, "steps": 3}}
    texts = replies(sft, rows)
    assert all("<tool_call>" in r for r in texts) and '"type"' in texts[1]
    outs, _server, _tok = run_loop(tiny_model, texts, f"cua.env.rows={rows}", "cua.env.max_steps=5",
                                   "cua.action.format=qwen3vl", task="enter-text", seed=3)  # fmt: skip
    outs = outs if isinstance(outs, list) else [outs]
    assert outs[0].extra_fields["cua_success"]  # the re-rendered actions solve the real page
    assert_same_tokens(outs, sft, tokenizer)
