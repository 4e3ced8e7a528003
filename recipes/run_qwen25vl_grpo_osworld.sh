#!/usr/bin/env bash
# GRPO on OSWorld with Qwen2.5-VL-7B-Instruct, 1 node x 8 GPUs, vLLM rollout, OSWorld's docker provider: the
# baseline (episode reward in [0, 1] minus the invalid-action penalty, advantage normalised within the task's group).
# Any Hydra override appended to the command line wins, e.g. `bash recipes/run_qwen25vl_grpo_osworld.sh trainer.total_epochs=3`.
# What the OSWorld recipes share (vLLM, FSDP2, the env, step rows, the run's shape) is `preset=osworld`
# (verl_cua/integrations/verl/config/preset/osworld.yaml); the variables below are passed on top of it.
# Needs: `bash envs/osworld/install.sh`, Docker, /dev/kvm. Composes in CI (tests/recipes); not yet run on GPUs.
set -xeuo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-VL-7B-Instruct}
NNODES=${NNODES:-1}
N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-8}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-16}          # OSWorld tasks per step
N_RESP=${N_RESP:-8}                               # episodes per task (the group)
PPO_MINI_BATCH=${PPO_MINI_BATCH:-16}              # verl: an actor update takes PPO_MINI_BATCH x N_RESP rows (ROWS=step:
                                                  # ~MAX_STEPS updates a step, as each episode gives a row per step)
MICRO_BATCH=${MICRO_BATCH:-1}                     # rows per GPU per forward/backward
LOGPROB_MICRO_BATCH=${LOGPROB_MICRO_BATCH:-2}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-8192}      # ROWS=step: instruction, earlier actions, HISTORY_IMAGES screenshots
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-1024}  # ROWS=step: one turn; ROWS=episode needs the whole episode
MAX_TOKENS_PER_STEP=${MAX_TOKENS_PER_STEP:-512}
LR=${LR:-1e-6}
TP=${TP:-2}
GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.6}
PARAM_OFFLOAD=${PARAM_OFFLOAD:-false}
OPTIMIZER_OFFLOAD=${OPTIMIZER_OFFLOAD:-false}
USE_KL_LOSS=${USE_KL_LOSS:-true}                  # GRPO's KL to the reference policy (verl's GRPO examples)
KL_LOSS_COEF=${KL_LOSS_COEF:-0.01}
# OSWorld: AGENT_WORKERS x POOL_SIZE desktops at once (docker: 4 GB RAM and 4 cores each).
PROVIDER=${PROVIDER:-docker}
VM_PATH=${VM_PATH:-${PWD}/docker_vm_data/Ubuntu.qcow2}  # docker: OSWorld's Ubuntu image (downloaded once if absent)
AGENT_WORKERS=${AGENT_WORKERS:-8}
POOL_SIZE=${POOL_SIZE:-4}
MAX_STEPS=${MAX_STEPS:-15}                        # env steps per episode
ROWS=${ROWS:-step}                                # step: one training row per step | episode: one per episode
HISTORY_IMAGES=${HISTORY_IMAGES:-3}
MAX_PIXELS=${MAX_PIXELS:-1003520}                 # screenshots resized to at most this many pixels
RESET_TIMEOUT=${RESET_TIMEOUT:-600}               # a docker reset restarts the VM
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
EVALUATE_TIMEOUT=${EVALUATE_TIMEOUT:-300}
ACTION_FORMAT=${ACTION_FORMAT:-qwen25vl}
OSWORLD_DIR=${OSWORLD_DIR:-OSWorld}               # a clone of github.com/xlang-ai/OSWorld, checked out at f0ae387b3906
#   (the commit whose test_all.json desktop-env 1.0.2 loads whole; the dataset step drops and lists what it cannot run)
TASKS=${TASKS:-${OSWORLD_DIR}/evaluation_examples/test_all.json}  # 369 tasks; or JSON files/folders, comma-separated
DATA_DIR=${DATA_DIR:-data/osworld}
PROJECT_NAME=${PROJECT_NAME:-verl_cua}
EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen25vl7b_grpo_osworld}
LOGGER=${LOGGER:-[console,wandb]}
TOTAL_EPOCHS=${TOTAL_EPOCHS:-10}
SAVE_FREQ=${SAVE_FREQ:-20}
CKPT_KEEP=${CKPT_KEEP:-2}                         # checkpoints kept: verl removes older global_step_N/actor (~100 GB each
                                                  # for a 7-8B full fine-tune: fp32 weights, Adam); null keeps every one
TEST_FREQ=${TEST_FREQ:--1}
REPLAY=${REPLAY:-false}                           # ARPO-style: a buffered success replaces a row of an all-fail group
BUFFER_PER_TASK=${BUFFER_PER_TASK:-8}             # successes kept per task (for REPLAY)

# shellcheck source=recipes/osworld_preflight.sh
source recipes/osworld_preflight.sh

"${PYTHON}" -m verl_cua.integrations.verl.dataset --env osworld --tasks "${TASKS}" --out "${DATA_DIR}/train.parquet"

"${PYTHON}" -m verl_cua.main \
    preset=osworld \
    algorithm.adv_estimator=grpo \
    data.train_files="${DATA_DIR}/train.parquet" \
    data.val_files="${DATA_DIR}/train.parquet" \
    data.train_batch_size="${TRAIN_BATCH_SIZE}" \
    data.max_prompt_length="${MAX_PROMPT_LENGTH}" \
    data.max_response_length="${MAX_RESPONSE_LENGTH}" \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    actor_rollout_ref.actor.optim.lr="${LR}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${PPO_MINI_BATCH}" \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="${MICRO_BATCH}" \
    actor_rollout_ref.actor.use_kl_loss="${USE_KL_LOSS}" \
    actor_rollout_ref.actor.kl_loss_coef="${KL_LOSS_COEF}" \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.fsdp_config.param_offload="${PARAM_OFFLOAD}" \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload="${OPTIMIZER_OFFLOAD}" \
    actor_rollout_ref.rollout.n="${N_RESP}" \
    actor_rollout_ref.rollout.tensor_model_parallel_size="${TP}" \
    actor_rollout_ref.rollout.gpu_memory_utilization="${GPU_MEM_UTIL}" \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="${LOGPROB_MICRO_BATCH}" \
    actor_rollout_ref.rollout.agent.num_workers="${AGENT_WORKERS}" \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="${LOGPROB_MICRO_BATCH}" \
    cua.env.kwargs.provider="${PROVIDER}" \
    "${VM_ARGS[@]}" \
    cua.env.pool_size="${POOL_SIZE}" \
    cua.env.max_steps="${MAX_STEPS}" \
    cua.env.rows="${ROWS}" \
    cua.env.history_images="${HISTORY_IMAGES}" \
    cua.env.max_pixels="${MAX_PIXELS}" \
    cua.env.reset_timeout="${RESET_TIMEOUT}" \
    cua.env.step_timeout="${STEP_TIMEOUT}" \
    cua.env.evaluate_timeout="${EVALUATE_TIMEOUT}" \
    cua.action.format="${ACTION_FORMAT}" \
    cua.action.max_tokens_per_step="${MAX_TOKENS_PER_STEP}" \
    cua.replay.enable="${REPLAY}" \
    cua.buffer.per_task="${BUFFER_PER_TASK}" \
    trainer.logger="${LOGGER}" \
    trainer.project_name="${PROJECT_NAME}" \
    trainer.experiment_name="${EXPERIMENT_NAME}" \
    trainer.nnodes="${NNODES}" \
    trainer.n_gpus_per_node="${N_GPUS_PER_NODE}" \
    trainer.save_freq="${SAVE_FREQ}" \
    trainer.max_actor_ckpt_to_keep="${CKPT_KEEP}" \
    trainer.max_critic_ckpt_to_keep="${CKPT_KEEP}" \
    trainer.test_freq="${TEST_FREQ}" \
    trainer.total_epochs="${TOTAL_EPOCHS}" \
    "$@"
