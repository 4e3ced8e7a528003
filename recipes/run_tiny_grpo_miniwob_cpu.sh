#!/usr/bin/env bash
# The learnable CPU setting: GRPO that visibly raises a tiny model's success on a 2-core machine, the setting
# `bash recipes/quickstart.sh`, `python -m bench.learn` and the learning test all run. A tiny random Qwen2.5-VL built
# locally (no hub), warm-started by SFT into click syntax only (`pyautogui.click(x, y)` at uniformly random points:
# valid actions, never the answers), then trained by verl (`preset=cpu`: FSDP2 on cpu, `hf` rollout) on MiniWoB++
# click-test, one click per episode, a new button layout (seed) for every prompt; held-out layouts are scored by
# verl's validation before and after training (val-core/verl_cua/miniwob/acc/mean@N).
# Measured (60 steps, ~9 min, 4 runs): success over the first 5 steps 0.08-0.19 -> the last 5 0.39-0.48 (rise
# 0.21-0.35); held-out success 0.08-0.20 -> 0.38-0.44. What it learns is where buttons usually are: a policy that
# never looks at the screenshot can reach 0.58 on these layouts (docs/learning.md).
# Swap the estimator like any recipe: `bash recipes/run_tiny_grpo_miniwob_cpu.sh algorithm.adv_estimator=sdpo`.
# ICL=0.6 starts from a model whose SDPO teacher can read a demo (docs/learning.md; ~14 min to build, cached).
# OBSERVATION=screenshot_a11y_tree (or som) is the reading setting: the page's elements beside the screenshot and a
# warm start for reading (`verl_cua.testing.reading`: synthetic tables, random rows; ~18 min to build, cached).
# Needs the venv and system packages of `bash recipes/quickstart.sh`. Any Hydra override appended wins.
set -xeuo pipefail

cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
MODEL_PATH=${MODEL_PATH:-}                        # empty: build the warm-started tiny model (~1.5 min, cached)
TASKS=${TASKS:-click-test}
ICL=${ICL:-0}                                     # share of warm-start steps in SDPO's teacher context
OBSERVATION=${OBSERVATION:-screenshot}            # OSWorld's observation type (cua.env.observation)
OBSERVATION_TOKENS=${OBSERVATION_TOKENS:-300}     # the element table's budget per turn (MiniWoB++ pages: < 200)
MAX_STEPS=${MAX_STEPS:-1}                         # actions per episode (click-button-sequence: 3)
TRAIN_SEEDS=${TRAIN_SEEDS:-0-999}                 # layouts trained on
HELDOUT_SEEDS=${HELDOUT_SEEDS:-100000-100063}     # layouts never trained on
PROMPTS_PER_STEP=${PROMPTS_PER_STEP:-4}           # layouts per step
N_RESP=${N_RESP:-8}                               # episodes per layout (the GRPO group)
PPO_MINI_BATCH=${PPO_MINI_BATCH:-2}               # layouts per actor update: PROMPTS_PER_STEP/PPO_MINI_BATCH a step
LR=${LR:-2e-3}                                    # a tiny random model needs its warm start's scale, not 1e-6
KL_COEF=${KL_COEF:-0.05}                          # KL loss to the warm start: keeps the click syntax (docs/learning.md)
STEPS=${STEPS:-60}
SEED=${SEED:-0}                                   # the order of the layouts
HELDOUT_SAMPLES=${HELDOUT_SAMPLES:-2}             # sampled episodes per held-out layout
SAVE_FREQ=${SAVE_FREQ:--1}                        # e.g. SAVE_FREQ=${STEPS}: an FSDP checkpoint at the end
OUT=${OUT:-outputs/tiny_grpo_miniwob}
TRACE_DIR=${TRACE_DIR:-null}                      # a folder: every rollout, for `verl-cua view`

PY="${VENV}/bin/python"
if [ ! -x "${PY}" ]; then
    set +x
    echo "$(basename "$0"): no Python at ${PY}; set up the CPU stack first: bash recipes/quickstart.sh (or VENV=...)" >&2
    exit 1
fi
if [ -z "${MODEL_PATH}" ]; then
    MODEL_PATH=$("${PY}" -m verl_cua.testing.learning model --tasks "${TASKS}" --icl "${ICL}" \
        --observation "${OBSERVATION}")
fi
mkdir -p "${OUT}"
OUT=$(cd "${OUT}" && pwd)
"${PY}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds "${TRAIN_SEEDS}" \
    --out "${OUT}/train.parquet"
"${PY}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds "${HELDOUT_SEEDS}" \
    --out "${OUT}/heldout.parquet"
# metrics.jsonl: a fresh run starts it anew; a resume (the CPU preset's trainer.resume_mode=auto, from the last save
# in OUT/checkpoints) keeps the steps its checkpoint holds

VERL_FILE_LOGGER_PATH="${OUT}/metrics.jsonl" "${PY}" -m verl_cua.main \
    preset=cpu \
    algorithm.adv_estimator=grpo \
    data.train_files="${OUT}/train.parquet" \
    data.val_files="${OUT}/heldout.parquet" \
    data.train_batch_size="${PROMPTS_PER_STEP}" \
    data.seed="${SEED}" \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    actor_rollout_ref.actor.optim.lr="${LR}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${PPO_MINI_BATCH}" \
    actor_rollout_ref.actor.use_kl_loss=true \
    actor_rollout_ref.actor.kl_loss_coef="${KL_COEF}" \
    actor_rollout_ref.rollout.n="${N_RESP}" \
    actor_rollout_ref.rollout.val_kwargs.do_sample=true \
    actor_rollout_ref.rollout.val_kwargs.temperature=1.0 \
    actor_rollout_ref.rollout.val_kwargs.n="${HELDOUT_SAMPLES}" \
    cua.env.name=miniwob \
    cua.env.max_steps="${MAX_STEPS}" \
    cua.env.observation="${OBSERVATION}" \
    cua.env.observation_tokens="${OBSERVATION_TOKENS}" \
    cua.action.format=pyautogui \
    cua.action.max_tokens_per_step=24 \
    cua.trace.dir="${TRACE_DIR}" \
    trainer.total_training_steps="${STEPS}" \
    trainer.val_before_train=true \
    trainer.test_freq="${STEPS}" \
    trainer.save_freq="${SAVE_FREQ}" \
    trainer.experiment_name=tiny_grpo_miniwob \
    trainer.default_local_dir="${OUT}/checkpoints" \
    hydra.run.dir="${OUT}/hydra" \
    "$@"
