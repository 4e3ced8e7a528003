"""The `cua.*` config, one frozen dataclass per section: each field's default, help and valid values or bounds.
config/cua/default.yaml and docs/config.md are generated from these (`python -m
verl_cua.integrations.verl.config.docs --write`); `CuaConfig.from_mapping` validates a mapping and fills defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl_cua.envs.observation import DEFAULT_BUDGET
from verl_cua.envs.spec import OBSERVATIONS
from verl_cua.eval.executor import ExecutorSettings
from verl_cua.integrations.ray_wait import DEFAULT_RESOURCE_TIMEOUT
from verl_cua.integrations.verl.config.fields import (
    ENTROPULSE_SCHEDULES,
    GIGPO_ANCHORS,
    GIGPO_NORMS,
    IMAGE_STORAGES,
    PLANNER_MODES,
    ROW_LAYOUTS,
    SDPO_LOSSES,
    SDPO_NORMALIZE,
    SDPO_TEACHERS,
    CuaConfigError,
    Section,
    env_names,
    env_names_text,
    executor_kinds,
    format_names,
    planner_spec_names,
    setting,
    trainable_formats,
    trainable_formats_text,
)

EXECUTOR = ExecutorSettings()  # the executor settings' defaults are the config's

__all__ = ["CuaConfig", "CuaConfigError", "EnvConfig", "TraceConfig"]


@dataclass(frozen=True)
class EnvConfig(Section):
    """The desktops an episode runs on, and how its screenshots become training rows."""

    name: str = setting(
        "miniwob",
        "the environment episodes run in",
        choices=env_names,
        valid=env_names_text,
    )
    kwargs: dict[str, Any] = setting(
        {},
        "keyword arguments for verl_cua.envs.make_env (for example provider: docker, "
        "action_space: pyautogui); add one with +cua.env.kwargs.KEY=VALUE",
    )
    pool_size: int = setting(2, "environments each agent-loop worker process keeps", low=1)
    idle_envs: int = setting(
        2,
        "environments each worker keeps idle beside its pool, loaded for tasks not running now (MiniWoB++ browsers, "
        "~0.4 GB each), so a batch that mixes tasks restarts no browser; 0: a task switch restarts one",
        low=0,
    )
    max_steps: int = setting(5, "model turns an episode may take", low=1)
    history_images: int = setting(
        3,
        "observations kept in the prompt with rows=step (screenshots, and element tables); older turns stay as text",
        low=1,
    )
    rows: str = setting(
        "episode",
        "the training row layout: episode puts a whole episode in one row, step makes one row per step",
        choices=ROW_LAYOUTS,
    )
    max_pixels: int = setting(
        50176, "each screenshot is resized to at most this many pixels before the processor sees it", low=1
    )
    image_storage: str = setting(
        "png",
        "how rows carry screenshots: png keeps PNG bytes and builds pixel_values per "
        "micro-batch at the forward; pixel_values stores verl's own fp32 patches in "
        "TransferQueue (about 22 MiB per 1M-pixel image)",
        choices=IMAGE_STORAGES,
    )
    success_threshold: float = setting(
        1.0, "an episode whose evaluator score reaches this counts as a success", low=0.0, high=1.0
    )
    reset_timeout: float = setting(
        120.0, "seconds one env reset may take; past it the episode is an infra failure", low=0.0
    )
    step_timeout: float = setting(
        60.0, "seconds one env step may take; past it the episode is an infra failure", low=0.0
    )
    evaluate_timeout: float = setting(
        120.0, "seconds the evaluator may take; past it the episode is an infra failure", low=0.0
    )
    observation: str = setting(
        "screenshot",
        "what the agent reads each turn (OSWorld's types): screenshot alone; screenshot_a11y_tree adds the page's or "
        "desktop's elements as a table (MiniWoB++'s DOM, the AT-SPI tree); som numbers the elements on the "
        "screenshot and lists the marks; a11y_tree shows the table alone, with no screenshot in any prompt",
        choices=OBSERVATIONS,
    )
    observation_tokens: int = setting(
        DEFAULT_BUDGET, "tokens of element table or marks a turn may show; the cut says where it was made", low=1
    )


@dataclass(frozen=True)
class ActionConfig(Section):
    """What the model writes and what an invalid action costs."""

    format: str = setting(
        "pyautogui",
        "the model's action format: how its output is parsed and its prompt written",
        choices=trainable_formats,
        valid=trainable_formats_text,
    )
    invalid_penalty: float = setting(0.1, "subtracted from the episode's reward for each invalid action", low=0.0)
    max_tokens_per_step: int = setting(
        256, "generation budget of one turn (rollout.response_length also caps the whole episode)", low=1
    )


@dataclass(frozen=True)
class TraceConfig(Section):
    """Training rollouts written to disk in the eval format, for `verl-cua view DIR` (per-step reward and advantage)."""

    dir: str | None = setting(
        None, "where traced rollouts go; null: tracing off; on multi-node runs a path every node shares"
    )
    every: int = setting(1, "trace every N-th training step", low=1)
    fraction: float = setting(
        1.0, "share of prompt groups traced (whole groups, picked by a hash of their uid)", low=0.0, high=1.0
    )
    log_episodes: int = setting(
        0,
        "traced episodes per traced step sent to trainer.logger's image-capable backends "
        "(wandb, tensorboard) with their actions and rewards; 0: off; needs cua.trace.dir",
        low=0,
    )


@dataclass(frozen=True)
class SdpoConfig(Section):
    """SDPO's loss and teacher; needs algorithm.adv_estimator=sdpo or sdpo_grpo (docs/algorithms.md)."""

    loss: str = setting(
        "logit",
        "sdpo's loss: logit is a divergence over the student's top-k ids plus a tail bucket; "
        "token is -A log pi with A = log q - log p (sdpo_grpo mixes in GRPO advantages and is "
        "token-level either way)",
        choices=SDPO_LOSSES,
    )
    topk: int = setting(100, "logit loss: token ids compared per position (the student's top-k)", low=1)
    alpha: float = setting(
        0.5,
        "logit loss: 0 is KL(teacher||student), 1 is KL(student||teacher), 0.5 is Jensen-Shannon",
        low=0.0,
        high=1.0,
    )
    add_tail: bool = setting(True, "logit loss: a (k+1)-th bucket holds the probability outside the top-k")
    normalize: str = setting(
        "reprompted",
        "sdpo: the loss is averaged over the model tokens of reprompted rows (reprompted) or of every row (all)",
        choices=SDPO_NORMALIZE,
    )
    teacher: str = setting(
        "ema",
        "the teacher's weights: ema is an EMA of the policy (a host copy per actor rank), frozen the initial policy "
        "(the same copy, never updated), current the live policy (unregularised; the paper sees it diverge)",
        choices=SDPO_TEACHERS,
    )
    ema_rate: float = setting(
        0.05, "ema teacher: after every update theta_T <- (1 - rate) * theta_T + rate * theta", low=0.0, high=1.0
    )
    is_clip: float | None = setting(
        2.0, "cap of the SDPO loss's truncated importance weight; null: no weight (all ones)", low=1.0
    )
    grpo_lambda: float = setting(
        0.9,
        "sdpo_grpo: A = grpo_lambda * A_GRPO + (1 - grpo_lambda) * A_SDPO on every row (the SDPO paper's mix for "
        "weaker models, 0.9 there)",
        low=0.0,
        high=1.0,
    )
    demo: bool = setting(True, "teacher context: the actions of a successful sibling, as text")
    feedback: bool = setting(True, "teacher context: the evaluator's feedback text")
    final_screenshot: bool = setting(True, "teacher context: the failed attempt's last screenshot, as an image")
    tree_feedback: bool = setting(
        True,
        "teacher context, with cua.env.observation other than screenshot: the feedback adds the element table's "
        "change over the failed attempt's last step (rows removed and added), or its final table where that step "
        "changed none (the roadmap's accessibility-tree diff)",
    )
    feedback_only_without_demo: bool = setting(
        True,
        "teacher context: the feedback text and the final screenshot only when no demo exists (the reference's "
        "environment_feedback_only_without_solution)",
    )
    dont_reprompt_on_self_success: bool = setting(True, "a success is never its own demonstration")
    max_feedback_chars: int = setting(2000, "the evaluator's feedback is cut to this many characters", low=1)
    max_demo_tokens: int = setting(
        8192, "the demonstration is cut to this many tokens (whole actions; the latest are dropped first)", low=1
    )


@dataclass(frozen=True)
class GigpoConfig(Section):
    """GiGPO's step-level groups; needs algorithm.adv_estimator=gigpo (docs/algorithms.md)."""

    gamma: float = setting(0.95, "discount of the step return", low=0.0, high=1.0)
    step_weight: float = setting(1.0, "A = A_episode + step_weight * A_step", low=0.0)
    norm: str = setting(
        "mean",
        "advantage normaliser: mean keeps F_norm = 1 (the paper's default), std divides by "
        "the group's standard deviation",
        choices=GIGPO_NORMS,
    )
    anchor: str = setting(
        "screen",
        "the state key that groups steps: screen hashes the screenshot downscaled and "
        "quantised (a clock or cursor does not split a group), screenshot its exact pixels, a11y "
        "the accessibility tree",
        choices=GIGPO_ANCHORS,
    )


@dataclass(frozen=True)
class CosoConfig(Section):
    """CoSo's entropy bonus on the tokens that cause the parsed action; composes with grpo, gigpo and verl's
    estimators, not with sdpo/sdpo_grpo (docs/algorithms.md)."""

    enable: bool = setting(
        False,
        "add -coef * token-mean(B * H) to the PPO loss: H each model token's entropy, B in [0, 1] whether masking "
        "the window of tokens from it changes the parsed action (normalised per step)",
    )
    coef: float = setting(
        0.01,
        "the bonus's weight lambda (PPO's usual entropy coefficient; the paper's 1.0 came with grad clip 0.01)",
        low=0.0,
    )
    window: int = setting(4, "tokens masked together per counterfactual (the paper's w)", low=1)


@dataclass(frozen=True)
class BufferConfig(Section):
    """The success buffer that SDPO demos, replay and Entropulse SFT draw on."""

    per_task: int = setting(8, "successful trajectories kept whole per task instance", low=1)


@dataclass(frozen=True)
class ReplayConfig(Section):
    """ARPO-style replay: a buffered success replaces the last episode of a group whose episodes all failed."""

    enable: bool = setting(False, "turn success replay on")
    std_threshold: float = setting(
        0.05, "a group counts as all-failed when its task scores' standard deviation is below this", low=0.0
    )
    mean_threshold: float = setting(
        0.2, "a group counts as all-failed only when its task scores' mean is also below this", low=0.0, high=1.0
    )


@dataclass(frozen=True)
class EntropulseConfig(Section):
    """RL phases alternating with SFT phases on the buffered successes (docs/algorithms.md)."""

    schedule: str = setting(
        "none",
        "when RL pauses for SFT: none never; fixed every rl_steps; entropy when the "
        "entropy EMA falls below ratio x its early value",
        choices=ENTROPULSE_SCHEDULES,
    )
    rl_steps: int = setting(50, "fixed schedule: RL steps between SFT phases", low=1)
    sft_steps: int = setting(5, "SFT steps per phase", low=1)
    sft_batch_size: int = setting(8, "trajectories per SFT step", low=1)
    ratio: float = setting(
        0.5,
        "entropy schedule: an SFT phase starts when the entropy EMA < ratio x the early entropy",
        low=0.0,
        low_open=True,
        high=1.0,
    )
    ema: float = setting(
        0.9, "entropy schedule: the EMA's weight on its previous value", low=0.0, high=1.0, high_open=True
    )
    early_steps: int = setting(5, "entropy schedule: the first RL steps whose mean entropy is the early value", low=1)
    min_rl_steps: int = setting(20, "entropy schedule: the fewest RL steps before an SFT phase", low=1)


@dataclass(frozen=True)
class ResumeConfig(Section):
    """Resuming from verl's checkpoint (`trainer.resume_mode`): our state is saved in each `global_step_N` folder."""

    allow_changes: bool = setting(
        False,
        "load a checkpoint's state although settings it depends on changed (estimator, env, row layout, image "
        "storage, action format, buffer size, teacher, Entropulse schedule); by default such a resume stops",
    )


@dataclass(frozen=True)
class PreflightConfig(Section):
    """Checks before Ray starts (the GPUs asked against those found, the model path, the Python stack, the desktops'
    needs) and a bound on Ray's waits for resources while the run starts and runs."""

    skip: bool = setting(False, "start without the checks (SKIP_PREFLIGHT=1 in the environment does the same)")
    resource_timeout: float = setting(
        DEFAULT_RESOURCE_TIMEOUT,
        "seconds Ray may leave a placement group or an actor waiting for resources the cluster lacks (GPUs, CPU "
        "slots) before the run stops with one line naming them; 0 waits forever",
        low=0.0,
    )


@dataclass(frozen=True)
class ExecutorConfig(Section):
    """The frozen executor a planner's thought goes to with `cua.planner.mode` on (CODA's cerebellum): any
    OpenAI-compatible endpoint, outside verl's resource pools; a dead or slow executor is infra, counted."""

    kind: str = setting(
        EXECUTOR.kind,
        "openai: an OpenAI-compatible chat endpoint; standin_grounding: the CPU tests' stand-in (no model)",
        choices=executor_kinds,
    )
    base_url: str = setting(EXECUTOR.base_url, "the endpoint; requests go to {base_url}/chat/completions")
    model: str = setting(EXECUTOR.model, "the model name the endpoint serves (vLLM's --served-model-name)")
    format: str = setting(
        EXECUTOR.format, "the action format the executor's reply is parsed with", choices=format_names
    )
    temperature: float = setting(
        EXECUTOR.temperature, "the executor's sampling temperature (CODA's code: 1.0)", low=0.0
    )
    max_tokens: int = setting(EXECUTOR.max_tokens, "the most tokens of one executor reply", low=1)
    timeout_s: float = setting(EXECUTOR.timeout_s, "seconds one request may wait for the executor", low=0.0,
                               low_open=True)  # fmt: skip
    retries: int = setting(EXECUTOR.retries, "further tries after a timeout, a refused connection or a 429/5xx", low=0)
    backoff_s: float = setting(EXECUTOR.backoff_s, "seconds before the first retry, doubled per retry", low=0.0)
    api_key_env: str | None = setting(None, "the environment variable holding the endpoint's key (none: no key)")
    extra_body: dict[str, Any] = setting(
        {},
        "extra request fields, e.g. {continue_final_message: true, add_generation_prompt: false} for vLLM to continue "
        "the thought instead of opening a new turn (CODA's code opens one)",
    )


@dataclass(frozen=True)
class PlannerConfig(Section):
    """A planner-executor agent (CODA): the policy writes a plan, the frozen executor turns it into the action; only
    the planner's tokens are trained."""

    mode: str = setting(
        "none",
        "none: the policy acts itself; recorded: step rows of recorded states scored against their labelled action "
        "(CODA's Stage 1, no desktop); online: episodes on cua.env with the env's score",
        choices=PLANNER_MODES,
    )
    spec: str = setting("coda", "the planner's prompts, history window and split rules", choices=planner_spec_names)


@dataclass(frozen=True)
class CuaConfig(Section):
    """verl-cua's own keys (`cua.*`), merged into verl's ppo_trainer config by cua_trainer.yaml."""

    env: EnvConfig = setting(EnvConfig, EnvConfig.__doc__)
    action: ActionConfig = setting(ActionConfig, ActionConfig.__doc__)
    trace: TraceConfig = setting(TraceConfig, TraceConfig.__doc__)
    sdpo: SdpoConfig = setting(SdpoConfig, SdpoConfig.__doc__)
    gigpo: GigpoConfig = setting(GigpoConfig, GigpoConfig.__doc__)
    coso: CosoConfig = setting(CosoConfig, CosoConfig.__doc__)
    buffer: BufferConfig = setting(BufferConfig, BufferConfig.__doc__)
    replay: ReplayConfig = setting(ReplayConfig, ReplayConfig.__doc__)
    entropulse: EntropulseConfig = setting(EntropulseConfig, EntropulseConfig.__doc__)
    resume: ResumeConfig = setting(ResumeConfig, ResumeConfig.__doc__)
    preflight: PreflightConfig = setting(PreflightConfig, PreflightConfig.__doc__)
    planner: PlannerConfig = setting(PlannerConfig, PlannerConfig.__doc__)
    executor: ExecutorConfig = setting(ExecutorConfig, ExecutorConfig.__doc__)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, prefix: str = "cua") -> CuaConfig:
        """The typed config of a `cua` mapping (a dict or OmegaConf node): checked (one-line `CuaConfigError`),
        missing keys and sections filled with their defaults."""
        return super().from_mapping(mapping, prefix)
