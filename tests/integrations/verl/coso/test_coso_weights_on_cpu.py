"""CoSo's turn hook (`coso.weights.CosoWeights`) on verl's real Qwen continuous-token builder and a real tokenizer: each
turn's weights land on that turn's model tokens of an episode row, context and boundary tokens get 0, exactly where
verl's own alignment puts the response mask; a step row gets its turn's weights cut to the response length."""

import pytest
from transformers import AutoTokenizer
from verl.utils.tokenizer.continuous_token import QwenContinuousTokenBuilder

from verl_cua.integrations.verl.config.schema import CuaConfig
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.hooks import TurnContext
from verl_cua.testing.tiny_models import build_tiny_model

CLICK = "```python\npyautogui.click(50, 60)\n```"
SCREEN = (160, 210)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(build_tiny_model("qwen25vl")))


def _turn(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]


def _hook(tokenizer, builder, response_length=1024):
    """The agent loop's construction: the plan's coso hook, its section, the loop's context."""
    cua = CuaConfig.from_mapping({"coso": {"enable": True}})
    (hook,) = [h for h in plan_for("grpo", cua).hooks if h.turns]
    context = TurnContext(tokenizer, "pyautogui", response_length, str.strip, builder.align_response_metadata)
    return hook.turn_hook(cua.coso, context)


def test_an_episode_rows_weights_follow_verls_response_mask_through_both_merges(tokenizer):
    builder = QwenContinuousTokenBuilder(tokenizer)
    hook = _hook(tokenizer, builder)
    runtime = tokenizer.encode("<|im_start|>user\nclick<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    mask, turns = [], [_turn(tokenizer, CLICK), _turn(tokenizer, "I wait.")]
    for k, ids in enumerate(turns):
        merged = builder.merge_assistant_tokens(runtime, ids)
        hook.on_turn(ids, SCREEN, SCREEN)
        hook.on_merge(merged, mask)
        mask, _ = builder.align_response_metadata(merged, mask)
        runtime = merged.token_ids
        if k == 0:  # an observation turn between the replies: Qwen's builder inserts a boundary newline first
            observation = tokenizer.encode("<|im_start|>user\nnext<|im_end|>\n", add_special_tokens=False)
            context = builder._merge_context_token_ids(runtime, observation)
            assert context.inserted_token_ids  # the boundary token is not model-generated
            hook.on_merge(context, mask)
            mask, _ = builder.align_response_metadata(context, mask)
            runtime = context.token_ids
    weights = hook.fields(None)["cua_coso_weights"]
    assert len(weights) == len(mask) and all(w == 0.0 for w, m in zip(weights, mask, strict=True) if m == 0)
    first = weights[: len(turns[0])]
    pieces = [tokenizer.decode([t], skip_special_tokens=True) for t in turns[0]]
    assert [w for w, p in zip(first, pieces, strict=True) if p.strip().isdigit()] and all(
        w == 1.0 for w, p in zip(first, pieces, strict=True) if p.strip().isdigit()
    )  # the click's coordinates cause the action
    assert sum(weights[len(turns[0]) :]) == 0.0  # "I wait." is no valid action: nothing in it is causal
    assert hook.fields(None)["cua_coso_seconds"] > 0.0


def test_a_step_row_gets_its_own_turns_weights_cut_to_the_response_length(tokenizer):
    builder = QwenContinuousTokenBuilder(tokenizer)
    hook = _hook(tokenizer, builder, response_length=5)
    first, second = _turn(tokenizer, CLICK), _turn(tokenizer, "I wait.")
    hook.on_turn(first, SCREEN, SCREEN)
    hook.on_turn(second, SCREEN, SCREEN)
    rows = [hook.fields(0), hook.fields(1)]
    assert [len(r["cua_coso_weights"]) for r in rows] == [5, len(second)] and len(second) < 5
    assert sum(rows[1]["cua_coso_weights"]) == 0.0
    assert rows[0]["cua_coso_weights"] == hook.turns[0][:5] and len(hook.turns[0]) == len(first) > 5


def test_a_turn_that_names_a_mark_is_weighed_against_the_marks_shown(tokenizer):
    """Set-of-marks: the hook parses a `tag_N` turn with the marks the agent loop passes, so its mark carries weight;
    the control, the same turn on a screen without marks, is invalid and weighs nothing."""
    builder = QwenContinuousTokenBuilder(tokenizer)
    hook = _hook(tokenizer, builder)
    ids = _turn(tokenizer, "```python\npyautogui.click(tag_2)\n```")
    hook.on_turn(ids, SCREEN, SCREEN, {1: (5, 5), 2: (50, 60)})
    hook.on_turn(ids, SCREEN, SCREEN)
    assert sum(hook.turns[0]) > 0 and sum(hook.turns[1]) == 0
