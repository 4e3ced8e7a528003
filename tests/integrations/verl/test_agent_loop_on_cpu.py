"""`gui_agent` with verl's real AgentLoopBase, continuous-token builder, tokenizer and processor, on real MiniWoB++
in Chromium. The LLM server is scripted (it answers the oracle's actions), so outcomes are known exactly."""

import pytest
from PIL import Image
from verl.workers.rollout.replica import TokenOutput

from verl_cua.actions import parse_action, render_action
from verl_cua.envs import make_env
from verl_cua.testing.miniwob_oracle import solution
from verl_cua.testing.scripted_rollout import ScriptedServer, run_sample


def oracle_texts(task: str, seed: int) -> list[str]:
    env = make_env("miniwob", task=task, action_format="pyautogui")
    try:
        return solution(env, env.reset({"task": task, "seed": seed}))
    finally:
        env.close()


def run_loop(model, texts, *overrides, task="click-test", seed=0, aborts=0, **row):
    def server(tokenizer):
        return AbortingServer(tokenizer, texts, aborts) if aborts else ScriptedServer(tokenizer, texts)

    return run_sample(model, server, ["cua.env.pool_size=1", *overrides], extra_info={"task": task, "seed": seed},
                      **row)  # fmt: skip


def _image_pad_runs(ids, pad_id):
    return sum(1 for i, t in enumerate(ids) if t == pad_id and (i == 0 or ids[i - 1] != pad_id))


def test_oracle_episode_succeeds_and_the_mask_covers_model_tokens_only(tiny_model, chromium):
    texts = oracle_texts("enter-text", 3)  # click the field, type, click submit: three model turns
    out, server, tok = run_loop(tiny_model, texts, "cua.env.max_steps=5", task="enter-text", seed=3)
    extra = out.extra_fields
    assert extra["cua_success"] and out.reward_score == 1.0 and extra["cua_invalid_actions"] == 0
    assert extra["cua_steps"] == 3 and len(server.calls) == 3
    # every generated token has mask 1, everything else in the response (screenshots, turn scaffolding) 0
    generated = sum(len(tok.encode(t, add_special_tokens=False)) + 1 for t in texts)
    assert sum(out.response_mask) == generated
    assert len(out.response_mask) == len(out.response_ids) > generated
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    masked_pads = [m for t, m in zip(out.response_ids, out.response_mask, strict=True) if t == pad]
    assert masked_pads and set(masked_pads) == {0}
    # one screenshot per turn, all in context, each an image-pad run in the token sequence
    images = out.multi_modal_data["images"]
    assert len(images) == 3 and [c["images"] for c in server.calls] == [1, 2, 3]
    assert _image_pad_runs(out.prompt_ids + out.response_ids, pad) == 3
    assert out.response_logprobs is not None and len(out.response_logprobs) == len(out.response_ids)
    assert extra["cua_final_screenshot"][:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("tiny_model", ["qwen3vl"], indirect=True)  # the format is the family's choice, not its code
def test_an_api_gui_episode_acts_through_agent_primitives_and_an_app_api_the_env_lacks_is_invalid(tiny_model, chromium):
    """ComputerRL's API-GUI format in the training loop: the oracle's clicks and typing as Agent calls succeed; an app
    API MiniWoB does not have is an invalid action with its one-line reason; every turn shows the focused app."""
    oracle = [parse_action(t, format="pyautogui", screen=(160, 210)) for t in oracle_texts("enter-text", 3)]
    texts = ["```python\nAgent.open_app(app_name='vlc')\n```"]
    texts += [render_action(p.actions, format="api_gui", screen=(160, 210)) for p in oracle]
    assert all(t.startswith("```python\nAgent.") for t in texts[1:])
    out, server, tok = run_loop(
        tiny_model, texts, "cua.env.max_steps=5", "cua.action.format=api_gui", task="enter-text", seed=3
    )
    extra = out.extra_fields
    assert extra["cua_success"] and extra["cua_steps"] == 4 and extra["cua_invalid_actions"] == 1
    assert "MiniWoB has no app APIs" in extra["cua_feedback"]
    context = tok.decode(out.prompt_ids + out.response_ids)
    assert "Agent.click(coordinates=[x, y], num_clicks=1" in context  # the api_gui system prompt
    assert context.count("Focused app: none.") == 4  # the first turn and each of the 3 after a reply
    assert "Elements on the screen" not in context and "Marks on" not in context  # the default: a screenshot alone
    assert "elements" not in extra["cua_feedback"]


def test_a_som_episode_shows_the_page_s_marks_every_turn_and_its_trace_keeps_them(tiny_model, chromium, tmp_path):
    """cua.env.observation=som in the training loop: the marks beside each screenshot, the first turn's and the one
    after the reply (the prompt's text, as the model reads it); the traced steps keep what each one read."""
    from verl_cua.envs.trajectory import read_episode

    som = ("cua.env.max_steps=2", "cua.env.observation=som", f"cua.trace.dir={tmp_path}")
    out, server, tok = run_loop(tiny_model, ["WAIT", "WAIT"], *som, uid="0a1b2c3d4e5f", session_id=0, global_steps=1)
    context = tok.decode(out.prompt_ids + out.response_ids)
    assert context.count("Marks on the screenshot:\nmark\ttag") == 2 and "\tbutton\tClick Me!\t" in context
    steps = read_episode(out.extra_fields["cua_trace_dir"]).steps
    assert len(steps) == 2 and all(s["elements_text"] and s["elements_text"] in context for s in steps)
    # the failed attempt's feedback (SDPO's teacher reads it): WAIT changed nothing, so the final marks
    assert out.extra_fields["cua_feedback"].startswith("The screen's elements at the end:\nmark\ttag")


def test_an_a11y_tree_episode_shows_the_table_and_no_screenshot_in_either_layout(tiny_model, chromium):
    """cua.env.observation=a11y_tree: the element table each turn and no image anywhere (no image tokens, no
    multi-modal data for verl), in the episode and the step layouts; the control, som, holds its screenshots; a
    mark named by the model (tag_N) lands on that mark."""
    image_pad = "<|image_pad|>"
    out, _server, tok = run_loop(tiny_model, ["WAIT", "WAIT"], "cua.env.max_steps=2", "cua.env.observation=a11y_tree")
    context = tok.decode(out.prompt_ids + out.response_ids)
    assert context.count("Elements on the screen:\ntag\ttext") == 2 and "You get no screenshot" in context
    assert image_pad not in context and out.multi_modal_data == {}
    assert out.extra_fields["cua_final_screenshot"] is None  # SDPO's teacher gets the final table instead
    rows, _server, tok = run_loop(tiny_model, ["WAIT", "WAIT"], "cua.env.max_steps=2", "cua.env.rows=step",
                                  "cua.env.observation=a11y_tree", "cua.env.history_images=2")  # fmt: skip
    assert [o.multi_modal_data for o in rows] == [{}, {}]
    prompts = [tok.decode(o.prompt_ids) for o in rows]
    assert all(image_pad not in p and "Elements on the screen" in p for p in prompts)
    # the window of observations: the second step's prompt holds the table before step 1 and the current one
    assert "Before step 1" not in prompts[0] and prompts[1].count("Elements on the screen:") == 2
    assert "Before step 1: Elements on the screen:" in prompts[1]
    control, _server, tok = run_loop(tiny_model, ["```python\npyautogui.click(tag_1)\n```"], "cua.env.max_steps=1",
                                     "cua.env.observation=som")  # fmt: skip
    assert image_pad in tok.decode(control.prompt_ids) and len(control.multi_modal_data["images"]) == 1
    assert control.extra_fields["cua_success"] and control.extra_fields["cua_invalid_actions"] == 0  # tag_1: the button


def test_invalid_outputs_are_penalised_and_not_sent(tiny_model, chromium):
    out, _server, _tok = run_loop(tiny_model, ["I think I should click.", "pyautogui.click("], "cua.env.max_steps=2")
    extra = out.extra_fields
    assert extra["cua_invalid_actions"] == 2 and not extra["cua_success"]
    assert out.reward_score == pytest.approx(-0.2)  # 0 success - 0.1 x 2 invalid
    assert "not valid" in extra["cua_feedback"]


def test_step_rows_share_the_episode_reward_and_keep_the_last_k_screenshots(tiny_model, chromium):
    texts = oracle_texts("enter-text", 3)
    outs, server, tok = run_loop(
        tiny_model,
        texts,
        "cua.env.rows=step",
        "cua.env.history_images=2",
        "cua.env.max_steps=5",
        task="enter-text",
        seed=3,
    )
    assert isinstance(outs, list) and len(outs) == 3
    assert {o.reward_score for o in outs} == {1.0}
    assert [o.extra_fields["step_index"] for o in outs] == [0, 1, 2]
    assert [len(o.multi_modal_data["images"]) for o in outs] == [1, 2, 2]
    assert all(sum(o.response_mask) == len(o.response_ids) for o in outs)  # step rows: only model tokens
    third_prompt = tok.decode(outs[2].prompt_ids)
    assert "Previous actions:" in third_prompt and "Step 2:" in third_prompt  # earlier turns as text


def test_a_dead_env_is_an_infra_failure_with_zero_reward(tiny_model, chromium, monkeypatch):
    from verl_cua.envs import miniwob

    def broken_reset(self, task=None):
        raise miniwob.InfraFailure("browser gone")

    monkeypatch.setattr(miniwob.MiniWoBEnv, "reset", broken_reset)
    out, server, _ = run_loop(tiny_model, ["WAIT"], "actor_rollout_ref.rollout.calculate_log_probs=true")
    assert out.extra_fields["cua_infra_failure"] and "browser gone" in out.extra_fields["cua_infra_error"]
    assert out.reward_score == 0.0 and server.calls == [] and sum(out.response_mask) == 0
    # its row carries rollout log-probs like its siblings', else verl's old-log-prob step fails on the batch
    assert out.response_logprobs == [0.0] * len(out.response_ids)


def test_a_desktop_the_agent_broke_is_its_failure_kept_in_training_not_masked(tiny_model, chromium, monkeypatch):
    from verl_cua.envs import miniwob
    from verl_cua.envs.base import StepResult, step_info

    def breaking_step(self, action, *, format=None):  # what an env says once the agent broke its desktop
        info = step_info(action_valid=True, desktop_broken=True, error="the agent broke its desktop: Xvfb gone")
        return StepResult(self._last, 0.0, True, info)

    monkeypatch.setattr(miniwob.MiniWoBEnv, "step", breaking_step)
    out, _server, _ = run_loop(tiny_model, ["WAIT"])
    assert out.extra_fields["cua_desktop_broken"] and not out.extra_fields["cua_infra_failure"]
    assert out.reward_score == 0.0 and sum(out.response_mask) > 0  # a failure it trains on, like any other


def test_traced_episode_is_written_in_the_eval_format(tiny_model, chromium, tmp_path):
    from verl_cua.envs.trajectory import read_episode

    texts = oracle_texts("enter-text", 3)
    outs, _server, _tok = run_loop(
        tiny_model, texts, "cua.env.rows=step", "cua.env.max_steps=5", f"cua.trace.dir={tmp_path}",
        task="enter-text", seed=3, uid="0a1b2c3d4e5f", session_id=2, global_steps=7,
    )  # fmt: skip
    episode_dir = tmp_path / "step_000007" / "enter-text-seed3" / "0a1b2c3d-2"
    assert {o.extra_fields["cua_trace_dir"] for o in outs} == {str(episode_dir)}
    episode = read_episode(episode_dir)
    assert episode.status == "success" and episode.result["reward"] == 1.0 and episode.result["steps"] == 3
    assert episode.result["end_reason"] == "env_done"  # MiniWoB ended it on the successful submit
    assert [s["model_text"] for s in episode.steps] == texts and all(s["valid"] for s in episode.steps)
    seen = [o.multi_modal_data["images"][-1] for o in outs]  # the screenshot each step row acted on
    for step, image in zip(episode.steps, seen, strict=True):
        assert (episode_dir / step["screenshot"]).is_file() and step["screen"] == [160, 210]
        with Image.open(episode_dir / step["screenshot"]) as saved:
            assert saved.size == image.size and saved.convert("RGB").tobytes() == image.tobytes()
    assert (episode_dir / episode.result["final_screenshot"]).is_file()
    # a group that is not sampled writes nothing
    out, _server, _tok = run_loop(tiny_model, ["WAIT"], "cua.env.max_steps=1", f"cua.trace.dir={tmp_path}",
                                  "cua.trace.every=2", uid="ffff", session_id=0, global_steps=7)  # fmt: skip
    assert out.extra_fields["cua_trace_dir"] == "" and not (tmp_path / "step_000007" / "click-test-seed0").exists()


class AbortingServer(ScriptedServer):
    """Aborts the first `aborts` requests (an empty reply, as vLLM's server gives during a weight sync)."""

    def __init__(self, tokenizer, texts, aborts):
        super().__init__(tokenizer, texts)
        self.aborts = aborts

    async def generate(self, *, request_id, prompt_ids, sampling_params, image_data=None, **kwargs):
        if self.aborts:
            self.aborts -= 1
            self.calls.append({"aborted": True})
            return TokenOutput(token_ids=[], log_probs=[], stop_reason="aborted")
        return await super().generate(
            request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, image_data=image_data
        )


@pytest.mark.parametrize("tiny_model", ["qwen25vl"], indirect=True)  # the retry is the loop's, not the model's
@pytest.mark.parametrize("rows", ["episode", "step"])
def test_an_aborted_request_is_sent_again_and_never_scored_as_an_invalid_action(tiny_model, chromium, rows):
    from verl_cua.integrations.verl import agent_loop

    texts = oracle_texts("click-test", 0)
    out, server, _ = run_loop(tiny_model, texts, f"cua.env.rows={rows}", aborts=2)
    out = out[0] if isinstance(out, list) else out
    assert out.extra_fields["cua_success"] and out.extra_fields["cua_invalid_actions"] == 0
    assert out.extra_fields["cua_aborted_requests"] == 2 and len(server.calls) == 3

    # a server that keeps aborting: the episode is an infra failure (masked), not an agent's invalid action
    out, server, _ = run_loop(tiny_model, texts, f"cua.env.rows={rows}", aborts=99)
    out = out[0] if isinstance(out, list) else out
    extra = out.extra_fields
    assert extra["cua_infra_failure"] and "aborted" in extra["cua_infra_error"]
    assert extra["cua_invalid_actions"] == 0 and out.reward_score == 0.0
    assert len(server.calls) == 1 + agent_loop.ABORT_RETRIES


@pytest.mark.parametrize(
    "tiny_model", ["qwen25vl"], indirect=True
)  # the alignment is verl's builder's, not the model's
@pytest.mark.parametrize("rows", ["episode", "step"])
def test_coso_weights_ride_with_the_response_mask_in_both_row_layouts(tiny_model, chromium, rows):
    """`cua.coso.enable`: the loop's CoSo turn hook gives each row one weight per response token, 0 wherever the mask
    is (screenshots, turn scaffolding), the oracle's actions causal; without it no row carries weights."""
    texts = oracle_texts("enter-text", 3)  # click the field, type, click submit
    out, _server, _tok = run_loop(
        tiny_model,
        texts,
        "cua.env.max_steps=5",
        "cua.coso.enable=true",
        f"cua.env.rows={rows}",
        task="enter-text",
        seed=3,
    )
    outs = out if isinstance(out, list) else [out]
    assert outs[0].extra_fields["cua_success"] and len(outs) == (3 if rows == "step" else 1)
    for row in outs:
        weights, mask = row.extra_fields["cua_coso_weights"], row.response_mask
        assert len(weights) == len(mask) == len(row.response_ids)
        assert all(w == 0.0 for w, m in zip(weights, mask, strict=True) if m == 0)
        assert (0 in mask) == (rows == "episode")  # an episode row holds the screenshots between its turns
        assert max(weights) == 1.0 and row.extra_fields["cua_coso_seconds"] > 0.0
    plain, _server, _tok = run_loop(tiny_model, texts[:1], "cua.env.max_steps=1", f"cua.env.rows={rows}")
    plain = plain if isinstance(plain, list) else [plain]
    assert all("cua_coso_weights" not in row.extra_fields for row in plain)


def test_the_processor_pixel_cap_is_read_from_a_transformers5_size_dict():
    from transformers.image_utils import SizeDict

    from verl_cua.integrations.verl.agent_loop import _image_grid

    class Processor:
        class image_processor:  # noqa: N801
            patch_size, merge_size = 16, 2
            size = SizeDict(longest_edge=50176, shortest_edge=3136)

    assert _image_grid(Processor, 1_003_520) == (32, 50176)  # the processor's cap wins over a larger env cap
    assert _image_grid(Processor, 20_000) == (32, 20_000)
    Processor.image_processor.size = {"longest_edge": 40000}
    assert _image_grid(Processor, 1_003_520) == (32, 40000)
