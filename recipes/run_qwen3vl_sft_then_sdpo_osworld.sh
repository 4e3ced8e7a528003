#!/usr/bin/env bash
# The whole ladder in one script (ComputerRL's recipe): SFT warm-up of Qwen3-VL-8B-Instruct on trajectories of any agent
# (recipes/run_qwen3vl_sft_osworld.sh: `verl-cua sft-data` + verl's SFT trainer), then SDPO with Entropulse on OSWorld
# starting from the SFT checkpoint (recipes/run_qwen3vl_sdpo_osworld.sh), the SFT set seeding nothing else: the RL
# phase keeps its own success buffer for Entropulse's SFT phases.
# Both stages take their variables from the environment (SFT_RUNS, SFT_LR, SFT_EPOCHS here; the RL recipe's own list).
# Hydra overrides appended go to the RL stage; SFT_ARGS (a string of overrides) to the SFT stage.
set -xeuo pipefail

cd "$(dirname "$0")/.."

BASE_MODEL=${BASE_MODEL:-Qwen/Qwen3-VL-8B-Instruct}
SFT_RUNS=${SFT_RUNS:-outputs/eval/claude_osworld}  # eval run directories / trace directories, comma-separated
SFT_LR=${SFT_LR:-1e-5}
SFT_EPOCHS=${SFT_EPOCHS:-3}
SFT_ARGS=${SFT_ARGS:-}
ENTROPULSE=${ENTROPULSE:-fixed}                   # the ladder alternates RL and SFT on the agent's own successes
EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen3vl8b_sft_then_sdpo_osworld}
SFT_CKPT_DIR=${SFT_CKPT_DIR:-checkpoints/verl_cua/${EXPERIMENT_NAME}_sft}

# The RL stage's needs before the hours of SFT (each stage runs its own preflight too): its interpreter, GPUs and
# stack (checked on BASE_MODEL: the SFT checkpoint does not exist yet), and Docker for the docker provider
PYTHON=${PYTHON:-python3}
# shellcheck source=recipes/preflight.sh
source recipes/preflight.sh
require_python "$(osworld_client)"
if ! skip_preflight; then
    "${PYTHON}" -m verl_cua.doctor.preflight --prog "$(basename "$0")" --gpus "${N_GPUS_PER_NODE:-8}" \
        --nnodes "${NNODES:-1}" --tp "${TP:-2}" --rollout vllm --model "${BASE_MODEL}" \
        --logger "${LOGGER:-[console,wandb]}" -- "$@" || exit 1
    if [ "${PROVIDER:-docker}" = docker ]; then require_docker; fi
fi

# 1. SFT (skipped when its final checkpoint exists: a rerun resumes at RL)
if [ ! -f "${SFT_CKPT_DIR}/latest_checkpointed_iteration.txt" ]; then
    # shellcheck disable=SC2086
    MODEL_PATH="${BASE_MODEL}" SFT_RUNS="${SFT_RUNS}" LR="${SFT_LR}" TOTAL_EPOCHS="${SFT_EPOCHS}" \
        CKPT_DIR="${SFT_CKPT_DIR}" EXPERIMENT_NAME="${EXPERIMENT_NAME}_sft" \
        bash recipes/run_qwen3vl_sft_osworld.sh ${SFT_ARGS}
fi
SFT_MODEL="${SFT_CKPT_DIR}/global_step_$(cat "${SFT_CKPT_DIR}/latest_checkpointed_iteration.txt")/huggingface"

# 2. SDPO with Entropulse from the SFT checkpoint
MODEL_PATH="${SFT_MODEL}" ENTROPULSE="${ENTROPULSE}" EXPERIMENT_NAME="${EXPERIMENT_NAME}" \
    bash recipes/run_qwen3vl_sdpo_osworld.sh \
    "$@"
