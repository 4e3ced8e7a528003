#!/usr/bin/env bash
# CODA Stage 1 online on OSWorld (docs/coda.md): GRPO trains a Qwen2.5-VL-32B-Instruct planner (the paper's cerebrum;
# MODEL_PATH=Qwen/Qwen2.5-VL-7B-Instruct fits a smaller node) that writes a Thought each step; a frozen
# UI-TARS-1.5-7B executor on its own OpenAI-compatible vLLM server turns it into the action, and only the planner's
# tokens are trained (`cua.planner.mode=online`, one row per step, the episode's OSWorld score). The paper's objective
# on verl's GRPO: group size N_RESP, a k3 KL loss to the reference (low_var_kl), 1/|p| per plan then the group mean
# (seq-mean-token-mean). The executor: EXECUTOR_URL names one already serving (its /v1), or, left empty, the recipe
# starts `vllm serve EXECUTOR_MODEL` on EXECUTOR_GPUS itself (log in EXECUTOR_LOG), waits for its /v1/models and stops
# it when the recipe exits. Those GPUs are outside verl's pool: verl sees PLANNER_GPUS only (CUDA_VISIBLE_DEVICES),
# so N_GPUS_PER_NODE counts PLANNER_GPUS, not the node (default 6 + 2 of an 8-GPU node). A dead executor, or one that
# does not serve EXECUTOR_MODEL, is one preflight line before anything starts; mid-run it is infra, counted.
# Any Hydra override appended to the command line wins, e.g. `bash recipes/run_qwen25vl_coda_osworld.sh trainer.total_epochs=3`.
# What the OSWorld recipes share is `preset=osworld` (verl_cua/integrations/verl/config/preset/osworld.yaml).
# Needs: `bash envs/osworld/install.sh`, Docker, /dev/kvm, and vLLM for the executor (VLLM, unless EXECUTOR_URL is
# set) with curl. Composes in CI (tests/recipes); not yet run on GPUs.
set -xeuo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-VL-32B-Instruct}  # the planner (CODA's); Qwen/Qwen2.5-VL-7B-Instruct: smaller
NNODES=${NNODES:-1}
N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-6}             # verl's GPUs a node: PLANNER_GPUS' count (8: executor elsewhere)
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-12}          # OSWorld tasks per step (x N_RESP: a multiple of verl's GPUs)
N_RESP=${N_RESP:-8}                               # episodes per task: the GRPO group (CODA's is unpublished; 8)
PPO_MINI_BATCH=${PPO_MINI_BATCH:-12}              # verl: an actor update takes PPO_MINI_BATCH x N_RESP rows (one row a
                                                  # step: ~MAX_STEPS updates a trainer step)
MICRO_BATCH=${MICRO_BATCH:-1}                     # rows per GPU per forward/backward
LOGPROB_MICRO_BATCH=${LOGPROB_MICRO_BATCH:-2}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-8192}      # the planner's context: prompt, 15 steps of text, 2 screenshots
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-1024}  # one plan
MAX_TOKENS_PER_STEP=${MAX_TOKENS_PER_STEP:-512}
LR=${LR:-1e-6}
TP=${TP:-2}                                       # the planner's rollout: a 32B replica on 2 GPUs
GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.6}
PARAM_OFFLOAD=${PARAM_OFFLOAD:-false}
OPTIMIZER_OFFLOAD=${OPTIMIZER_OFFLOAD:-true}      # a 32B full fine-tune's Adam state in host RAM (~260 GB)
KL_LOSS_COEF=${KL_LOSS_COEF:-0.01}                # the k3 KL's weight (CODA's is unpublished; verl's GRPO examples)
# OSWorld: AGENT_WORKERS x POOL_SIZE desktops at once (docker: 4 GB RAM and 4 cores each).
PROVIDER=${PROVIDER:-docker}
VM_PATH=${VM_PATH:-${PWD}/docker_vm_data/Ubuntu.qcow2}  # docker: OSWorld's Ubuntu image (downloaded once if absent)
AGENT_WORKERS=${AGENT_WORKERS:-8}
POOL_SIZE=${POOL_SIZE:-4}
MAX_STEPS=${MAX_STEPS:-15}                        # env steps per episode
HISTORY_IMAGES=${HISTORY_IMAGES:-2}               # the budget's count: the planner sees the previous and current one
MAX_PIXELS=${MAX_PIXELS:-1003520}                 # screenshots resized to at most this many pixels (executor's too)
RESET_TIMEOUT=${RESET_TIMEOUT:-600}               # a docker reset restarts the VM
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
EVALUATE_TIMEOUT=${EVALUATE_TIMEOUT:-300}
ACTION_FORMAT=${ACTION_FORMAT:-uitars}            # the planner's own Action lines (an eval of the planner alone)
OSWORLD_DIR=${OSWORLD_DIR:-OSWorld}               # a clone of github.com/xlang-ai/OSWorld, checked out at f0ae387b3906
TASKS=${TASKS:-${OSWORLD_DIR}/evaluation_examples/test_all.json}  # 369 tasks; or JSON files/folders, comma-separated
DATA_DIR=${DATA_DIR:-data/osworld}
PROJECT_NAME=${PROJECT_NAME:-verl_cua}
EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen25vl32b_coda_osworld}
LOGGER=${LOGGER:-[console,wandb]}
TOTAL_EPOCHS=${TOTAL_EPOCHS:-10}
SAVE_FREQ=${SAVE_FREQ:-20}
CKPT_KEEP=${CKPT_KEEP:-2}                         # checkpoints kept (a 32B full fine-tune's is ~400 GB); null keeps all
TEST_FREQ=${TEST_FREQ:--1}
# The executor (cua.executor.*): frozen, outside verl's resource pools.
EXECUTOR_URL=${EXECUTOR_URL:-}                    # an executor already serving, e.g. http://HOST:8000/v1; empty: the
                                                  # recipe starts one (VLLM, EXECUTOR_GPUS, EXECUTOR_PORT below)
EXECUTOR_MODEL=${EXECUTOR_MODEL:-ByteDance-Seed/UI-TARS-1.5-7B}  # the name the server serves (and the one started)
EXECUTOR_FORMAT=${EXECUTOR_FORMAT:-uitars}        # the action format its replies are parsed with
EXECUTOR_TEMPERATURE=${EXECUTOR_TEMPERATURE:-0.0}  # CODA's code samples at 1.0; 0 grounds deterministically
EXECUTOR_MAX_TOKENS=${EXECUTOR_MAX_TOKENS:-256}
EXECUTOR_TIMEOUT=${EXECUTOR_TIMEOUT:-60}          # seconds a request may wait (then retried; after the retries: infra)
EXECUTOR_RETRIES=${EXECUTOR_RETRIES:-3}
EXECUTOR_KEY_ENV=${EXECUTOR_KEY_ENV:-null}        # the variable holding the endpoint's key; null: none (a local vLLM)
VLLM=${VLLM:-vllm}                                # the command that serves the executor (EXECUTOR_URL empty)
EXECUTOR_GPUS=${EXECUTOR_GPUS:-6,7}               # its CUDA_VISIBLE_DEVICES: outside verl's pool
PLANNER_GPUS=${PLANNER_GPUS:-0,1,2,3,4,5}         # verl's CUDA_VISIBLE_DEVICES while the recipe serves the executor
EXECUTOR_HOST=${EXECUTOR_HOST:-127.0.0.1}         # the address it binds (NNODES>1: one every node reaches)
EXECUTOR_PORT=${EXECUTOR_PORT:-8100}
EXECUTOR_TP=${EXECUTOR_TP:-2}                     # vllm serve --tensor-parallel-size (EXECUTOR_GPUS' count)
EXECUTOR_GPU_MEM_UTIL=${EXECUTOR_GPU_MEM_UTIL:-0.9}
EXECUTOR_MAX_MODEL_LEN=${EXECUTOR_MAX_MODEL_LEN:-32768}
EXECUTOR_IMAGES=${EXECUTOR_IMAGES:-2}             # screenshots per request (CODA's: previous and current)
EXECUTOR_WAIT=${EXECUTOR_WAIT:-1200}              # seconds its /v1/models may take to answer (a first start downloads)
EXECUTOR_LOG=${EXECUTOR_LOG:-outputs/${EXPERIMENT_NAME}/executor.log}

# serve_executor: start `VLLM serve EXECUTOR_MODEL` on EXECUTOR_GPUS in a session of its own (stopped on exit), then
# wait until EXECUTOR_URL/models answers; one line and exit 1 if it cannot start, dies or stays silent.
serve_executor() {
    command -v "${VLLM}" >/dev/null || die "VLLM=${VLLM} is not on PATH: install vLLM for the executor, set VLLM= to" \
        "its command, or serve the executor elsewhere and set EXECUTOR_URL"
    command -v curl >/dev/null || die "waiting for the executor's server needs curl; or serve it yourself and set" \
        "EXECUTOR_URL"
    if curl -sf --max-time 5 -o /dev/null "${EXECUTOR_URL}/models"; then
        die "a server already answers at ${EXECUTOR_URL}: set EXECUTOR_URL=${EXECUTOR_URL} to use it, or" \
            "EXECUTOR_PORT= to a free port"
    fi
    mkdir -p "$(dirname "${EXECUTOR_LOG}")"
    CUDA_VISIBLE_DEVICES="${EXECUTOR_GPUS}" setsid "${VLLM}" serve "${EXECUTOR_MODEL}" --host "${EXECUTOR_HOST}" \
        --port "${EXECUTOR_PORT}" --tensor-parallel-size "${EXECUTOR_TP}" \
        --gpu-memory-utilization "${EXECUTOR_GPU_MEM_UTIL}" --max-model-len "${EXECUTOR_MAX_MODEL_LEN}" \
        --limit-mm-per-prompt "{\"image\": ${EXECUTOR_IMAGES}}" >"${EXECUTOR_LOG}" 2>&1 &
    EXECUTOR_PID=$!
    trap stop_executor EXIT
    local xtrace deadline=$((SECONDS + EXECUTOR_WAIT))
    xtrace=$(set +o | grep xtrace)  # one line while it waits, not a trace every few seconds
    set +x
    echo "$(basename "$0"): waiting up to ${EXECUTOR_WAIT} s for the executor at ${EXECUTOR_URL}" \
        "(log: ${EXECUTOR_LOG})" >&2
    until curl -sf --max-time 5 -o /dev/null "${EXECUTOR_URL}/models"; do
        kill -0 "${EXECUTOR_PID}" 2>/dev/null || die "the executor's server (${VLLM} serve ${EXECUTOR_MODEL}) exited" \
            "before ${EXECUTOR_URL}/models answered; its log: ${EXECUTOR_LOG}"
        [ "${SECONDS}" -lt "${deadline}" ] || die "${EXECUTOR_URL}/models did not answer in ${EXECUTOR_WAIT} s" \
            "(EXECUTOR_WAIT); the executor's log: ${EXECUTOR_LOG}"
        sleep 2
    done
    eval "${xtrace}"
}

# stop_executor: the EXIT trap of serve_executor: its server's session gets SIGTERM, then SIGKILL after 30 s.
stop_executor() {
    kill -TERM -- "-${EXECUTOR_PID}" 2>/dev/null || kill -TERM "${EXECUTOR_PID}" 2>/dev/null || return 0
    for _ in $(seq 30); do
        kill -0 "${EXECUTOR_PID}" 2>/dev/null || return 0
        sleep 1
    done
    kill -KILL -- "-${EXECUTOR_PID}" 2>/dev/null || kill -KILL "${EXECUTOR_PID}" 2>/dev/null || true
}

SERVE_EXECUTOR=  # 1: this recipe serves the executor (EXECUTOR_URL was empty)
PREFLIGHT_OVERRIDES=()  # what the preflight checks beyond the variables: an executor already serving (before downloads)
if [ -z "${EXECUTOR_URL}" ]; then
    SERVE_EXECUTOR=1
    EXECUTOR_URL=http://${EXECUTOR_HOST}:${EXECUTOR_PORT}/v1
    if [ -z "${VERL_CUA_COMPOSE_ONLY:-}" ]; then  # verl's pool leaves the executor's GPUs alone
        IFS=, read -ra SERVED_ON <<< "${EXECUTOR_GPUS}"
        for gpu in "${SERVED_ON[@]}"; do
            case ",${PLANNER_GPUS}," in *",${gpu},"*)
                echo "$(basename "$0"): GPU ${gpu} is in EXECUTOR_GPUS=${EXECUTOR_GPUS} and" \
                    "PLANNER_GPUS=${PLANNER_GPUS}: the executor's GPUs are outside verl's pool; name each GPU in one" \
                    "of them" >&2
                exit 1 ;;
            esac
        done
        export CUDA_VISIBLE_DEVICES="${PLANNER_GPUS}"
    fi
else
    PREFLIGHT_OVERRIDES=(cua.planner.mode=online cua.executor.kind=openai "cua.executor.base_url=${EXECUTOR_URL}"
                         "cua.executor.model=${EXECUTOR_MODEL}" "cua.executor.api_key_env=${EXECUTOR_KEY_ENV}")
fi

# shellcheck source=recipes/osworld_preflight.sh
source recipes/osworld_preflight.sh

"${PYTHON}" -m verl_cua.integrations.verl.dataset --env osworld --tasks "${TASKS}" --out "${DATA_DIR}/train.parquet"

if [ -n "${SERVE_EXECUTOR}" ] && [ -z "${VERL_CUA_COMPOSE_ONLY:-}" ]; then
    serve_executor  # after the downloads; the trainer's preflight checks it serves EXECUTOR_MODEL
fi

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
    actor_rollout_ref.actor.use_kl_loss=true \
    actor_rollout_ref.actor.kl_loss_coef="${KL_LOSS_COEF}" \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean \
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
    cua.env.rows=step \
    cua.env.history_images="${HISTORY_IMAGES}" \
    cua.env.max_pixels="${MAX_PIXELS}" \
    cua.env.reset_timeout="${RESET_TIMEOUT}" \
    cua.env.step_timeout="${STEP_TIMEOUT}" \
    cua.env.evaluate_timeout="${EVALUATE_TIMEOUT}" \
    cua.action.format="${ACTION_FORMAT}" \
    cua.action.max_tokens_per_step="${MAX_TOKENS_PER_STEP}" \
    cua.planner.mode=online \
    cua.planner.spec=coda \
    cua.executor.kind=openai \
    cua.executor.base_url="${EXECUTOR_URL}" \
    cua.executor.model="${EXECUTOR_MODEL}" \
    cua.executor.format="${EXECUTOR_FORMAT}" \
    cua.executor.temperature="${EXECUTOR_TEMPERATURE}" \
    cua.executor.max_tokens="${EXECUTOR_MAX_TOKENS}" \
    cua.executor.timeout_s="${EXECUTOR_TIMEOUT}" \
    cua.executor.retries="${EXECUTOR_RETRIES}" \
    cua.executor.api_key_env="${EXECUTOR_KEY_ENV}" \
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
