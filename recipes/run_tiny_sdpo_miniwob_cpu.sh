#!/usr/bin/env bash
# SDPO with an Entropulse fixed schedule, for real on a CPU machine: the tiny warm-started Qwen2.5-VL of the
# quickstart family (built locally, no hub; warm-started 800 steps, so its clicks are valid and spread over the
# screen), MiniWoB++ click-test seeds 84 and 116 (~100 px buttons its clicks hit 25-35% of the time), 8 episodes per
# task, 2 steps of verl's trainer (`preset=cpu`: FSDP2 on cpu, `hf` rollout). One Entropulse cycle: 2 RL steps, then
# 1 SFT step on the buffered successes (skipped, and logged, if there are none). It shows the machinery runs; a
# tiny model does not learn the task.
# Needs the venv and system packages of `bash recipes/quickstart.sh`. Any Hydra override appended wins.
set -xeuo pipefail

cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
FAMILY=${FAMILY:-qwen25vl}                        # qwen25vl | qwen3vl (tiny random models built locally)
MODEL_PATH=${MODEL_PATH:-}                        # empty: build the tiny warm-started model
WARM_STEPS=${WARM_STEPS:-800}                     # SFT steps into click syntax of the tiny model
TASKS=${TASKS:-click-test}
SEEDS=${SEEDS:-84,116}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-2}           # tasks x seeds
N_RESP=${N_RESP:-8}                               # episodes per task (the group)
STEPS=${STEPS:-2}
MAX_STEPS=${MAX_STEPS:-2}                         # env steps per episode
MAX_TOKENS_PER_STEP=${MAX_TOKENS_PER_STEP:-48}
ACTION_FORMAT=${ACTION_FORMAT:-pyautogui}         # the warm start teaches pyautogui clicks
ENTROPULSE=${ENTROPULSE:-fixed}
ENTROPULSE_RL_STEPS=${ENTROPULSE_RL_STEPS:-2}
ENTROPULSE_SFT_STEPS=${ENTROPULSE_SFT_STEPS:-1}
ENTROPULSE_SFT_BATCH=${ENTROPULSE_SFT_BATCH:-2}
OUT=${OUT:-outputs/tiny_sdpo_miniwob}
TRACE_DIR=${TRACE_DIR:-${OUT}/trace}                # every rollout, for `verl-cua view`; TRACE_DIR=null: off

PY="${VENV}/bin/python"
if [ ! -x "${PY}" ]; then
    set +x
    echo "$(basename "$0"): no Python at ${PY}; set up the CPU stack first: bash recipes/quickstart.sh (or VENV=...)" >&2
    exit 1
fi
if [ -z "${MODEL_PATH}" ]; then
    TINY=$("${PY}" -m verl_cua.testing.tiny_models --family "${FAMILY}")
    MODEL_PATH=$("${PY}" -m verl_cua.testing.warm_start "${TINY}" --steps "${WARM_STEPS}")
fi
mkdir -p "${OUT}"
OUT=$(cd "${OUT}" && pwd)
"${PY}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds "${SEEDS}" --out "${OUT}/train.parquet"
# metrics.jsonl: a fresh run starts it anew; a resume (the CPU preset's trainer.resume_mode=auto, from the last save
# in OUT/checkpoints) keeps the steps its checkpoint holds

START=$(date +%s)
VERL_FILE_LOGGER_PATH="${OUT}/metrics.jsonl" "${PY}" -m verl_cua.main \
    preset=cpu \
    algorithm.adv_estimator=sdpo \
    algorithm.use_kl_in_reward=false \
    data.train_files="${OUT}/train.parquet" \
    data.val_files="${OUT}/train.parquet" \
    data.train_batch_size="${TRAIN_BATCH_SIZE}" \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    actor_rollout_ref.rollout.n="${N_RESP}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${TRAIN_BATCH_SIZE}" \
    actor_rollout_ref.actor.use_kl_loss=false \
    cua.env.name=miniwob \
    cua.env.max_steps="${MAX_STEPS}" \
    cua.action.format="${ACTION_FORMAT}" \
    cua.action.max_tokens_per_step="${MAX_TOKENS_PER_STEP}" \
    cua.entropulse.schedule="${ENTROPULSE}" \
    cua.entropulse.rl_steps="${ENTROPULSE_RL_STEPS}" \
    cua.entropulse.sft_steps="${ENTROPULSE_SFT_STEPS}" \
    cua.entropulse.sft_batch_size="${ENTROPULSE_SFT_BATCH}" \
    cua.trace.dir="${TRACE_DIR}" \
    trainer.total_training_steps="${STEPS}" \
    trainer.experiment_name=tiny_sdpo_miniwob \
    trainer.default_local_dir="${OUT}/checkpoints" \
    "$@"
END=$(date +%s)

"${PY}" -m verl_cua.integrations.verl.summary "${OUT}/metrics.jsonl" \
    --seconds $((END - START)) \
    --out "${OUT}/summary.json"
