#!/usr/bin/env bash
# GiGPO on OSWorld inside verl-agent (its trainer, rollout loop and GiGPO), Qwen2.5-VL-7B-Instruct, 1 node x 8 GPUs.
# verl-agent's CLI and keys (as its examples/gigpo_trainer/run_sokoban.sh), plus `+env.osworld.*` for our desktops;
# `python -m verl_cua.verl_agent_main` is verl-agent's main_ppo with verl-cua installed in its TaskRunner.
# ADV_ESTIMATOR=cua_gigpo swaps in verl-cua's GiGPO (one value per episode and per step, copies deduplicated).
# Needs: a verl-agent checkout (VERL_AGENT_DIR, `pip install -e .` there, at the commit in patches/verl-agent/UPSTREAM;
# the patches are optional), `bash envs/osworld/install.sh`, Docker, /dev/kvm. Composes in CI; not yet run on GPUs.
set -xeuo pipefail

cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
VERL_AGENT_DIR=${VERL_AGENT_DIR:-${PWD}/verl-agent}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-VL-7B-Instruct}
ENGINE=${ENGINE:-vllm}
NNODES=${NNODES:-1}
N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-8}
TRAIN_DATA_SIZE=${TRAIN_DATA_SIZE:-2}             # OSWorld tasks per step
GROUP_SIZE=${GROUP_SIZE:-8}                       # env.rollout.n: episodes per task; desktops = TRAIN_DATA_SIZE x GROUP_SIZE
VAL_DATA_SIZE=${VAL_DATA_SIZE:-16}                # validation episodes at once (the same desktops, never at the same time)
ADV_ESTIMATOR=${ADV_ESTIMATOR:-gigpo}             # gigpo (verl-agent's) | cua_gigpo (verl-cua's) | grpo | ...
GIGPO_MODE=${GIGPO_MODE:-mean_norm}               # mean_norm | mean_std_norm
STEP_ADVANTAGE_W=${STEP_ADVANTAGE_W:-1.0}
GAMMA=${GAMMA:-0.95}
PPO_MINI_BATCH=${PPO_MINI_BATCH:-32}              # step samples per actor update
MICRO_BATCH=${MICRO_BATCH:-2}
LOGPROB_MICRO_BATCH=${LOGPROB_MICRO_BATCH:-4}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-4096}      # system prompt + task + HISTORY_LENGTH outputs + one screenshot
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-512}
LR=${LR:-1e-6}
TP=${TP:-2}
GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.5}
KL_LOSS_COEF=${KL_LOSS_COEF:-0.01}
INVALID_ACTION_PENALTY=${INVALID_ACTION_PENALTY:-0.1}
MAX_STEPS=${MAX_STEPS:-15}
HISTORY_LENGTH=${HISTORY_LENGTH:-2}               # earlier model outputs in the prompt, as text
ACTION_FORMAT=${ACTION_FORMAT:-qwen25vl}
MAX_PIXELS=${MAX_PIXELS:-1003520}                 # screenshots resized to at most this many pixels (1280 tokens)
PROVIDER=${PROVIDER:-docker}
VM_PATH=${VM_PATH:-${PWD}/docker_vm_data/Ubuntu.qcow2}
RESET_TIMEOUT=${RESET_TIMEOUT:-600}
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
EVALUATE_TIMEOUT=${EVALUATE_TIMEOUT:-300}
OSWORLD_DIR=${OSWORLD_DIR:-${PWD}/OSWorld}        # a clone of github.com/xlang-ai/OSWorld at f0ae387b3906 (checked)
TASKS=${TASKS:-${OSWORLD_DIR}/evaluation_examples/test_all.json}
VAL_TASKS=${VAL_TASKS:-${TASKS}}
DATA_DIR=${DATA_DIR:-${PWD}/data/verl_agent_osworld}
PROJECT_NAME=${PROJECT_NAME:-verl_agent_osworld}
EXPERIMENT_NAME=${EXPERIMENT_NAME:-gigpo_qwen25vl_7b}
LOGGER=${LOGGER:-[console,wandb]}
TOTAL_EPOCHS=${TOTAL_EPOCHS:-10}
SAVE_FREQ=${SAVE_FREQ:-20}
TEST_FREQ=${TEST_FREQ:--1}

KWARGS_PREFIX=+env.osworld.kwargs
PREFLIGHT_HOST=verl-agent                         # its own verl: no 0.9.1 pin in the preflight
# shellcheck source=recipes/osworld_preflight.sh
source recipes/osworld_preflight.sh
(cd "${VERL_AGENT_DIR}" && "${PYTHON}" -c "import agent_system.environments, gigpo.core_gigpo") \
    || die "no verl-agent at VERL_AGENT_DIR=${VERL_AGENT_DIR}; clone it, check out patches/verl-agent/UPSTREAM, pip install -e ."

"${PYTHON}" -m verl_cua.integrations.verl.dataset --host verl-agent --env osworld --tasks "${TASKS}" --out "${DATA_DIR}/train.parquet"
"${PYTHON}" -m verl_cua.integrations.verl.dataset --host verl-agent --env osworld --tasks "${VAL_TASKS}" --out "${DATA_DIR}/test.parquet"

cd "${VERL_AGENT_DIR}"
"${PYTHON}" -m verl_cua.verl_agent_main \
    algorithm.adv_estimator="${ADV_ESTIMATOR}" \
    data.train_files="${DATA_DIR}/train.parquet" \
    data.val_files="${DATA_DIR}/test.parquet" \
    data.train_batch_size="${TRAIN_DATA_SIZE}" \
    data.val_batch_size="${VAL_DATA_SIZE}" \
    data.max_prompt_length="${MAX_PROMPT_LENGTH}" \
    data.max_response_length="${MAX_RESPONSE_LENGTH}" \
    data.filter_overlong_prompts=True \
    data.truncation=error \
    data.return_raw_chat=True \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.model.enable_gradient_checkpointing=True \
    actor_rollout_ref.actor.optim.lr="${LR}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${PPO_MINI_BATCH}" \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="${MICRO_BATCH}" \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef="${KL_LOSS_COEF}" \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.fsdp_config.param_offload=False \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
    actor_rollout_ref.actor.use_invalid_action_penalty=True \
    actor_rollout_ref.actor.invalid_action_penalty_coef="${INVALID_ACTION_PENALTY}" \
    actor_rollout_ref.rollout.name="${ENGINE}" \
    actor_rollout_ref.rollout.tensor_model_parallel_size="${TP}" \
    actor_rollout_ref.rollout.gpu_memory_utilization="${GPU_MEM_UTIL}" \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="${LOGPROB_MICRO_BATCH}" \
    actor_rollout_ref.rollout.enable_chunked_prefill=False \
    actor_rollout_ref.rollout.enforce_eager=False \
    actor_rollout_ref.rollout.free_cache_engine=False \
    actor_rollout_ref.rollout.val_kwargs.temperature=0.4 \
    actor_rollout_ref.rollout.val_kwargs.do_sample=True \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="${LOGPROB_MICRO_BATCH}" \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    algorithm.use_kl_in_reward=False \
    algorithm.gamma="${GAMMA}" \
    algorithm.gigpo.step_advantage_w="${STEP_ADVANTAGE_W}" \
    algorithm.gigpo.mode="${GIGPO_MODE}" \
    env.env_name=osworld \
    env.seed=0 \
    env.max_steps="${MAX_STEPS}" \
    env.history_length="${HISTORY_LENGTH}" \
    env.rollout.n="${GROUP_SIZE}" \
    +env.osworld.tasks="'${TASKS}'" \
    +env.osworld.val_tasks="'${VAL_TASKS}'" \
    +env.osworld.format="${ACTION_FORMAT}" \
    +env.osworld.max_pixels="${MAX_PIXELS}" \
    +env.osworld.reset_timeout="${RESET_TIMEOUT}" \
    +env.osworld.step_timeout="${STEP_TIMEOUT}" \
    +env.osworld.evaluate_timeout="${EVALUATE_TIMEOUT}" \
    +env.osworld.kwargs.provider="${PROVIDER}" \
    "${VM_ARGS[@]}" \
    trainer.critic_warmup=0 \
    trainer.logger="${LOGGER}" \
    trainer.project_name="${PROJECT_NAME}" \
    trainer.experiment_name="${EXPERIMENT_NAME}" \
    trainer.n_gpus_per_node="${N_GPUS_PER_NODE}" \
    trainer.nnodes="${NNODES}" \
    trainer.save_freq="${SAVE_FREQ}" \
    trainer.test_freq="${TEST_FREQ}" \
    trainer.total_epochs="${TOTAL_EPOCHS}" \
    trainer.val_before_train=False \
    "$@"
