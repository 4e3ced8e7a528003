#!/usr/bin/env bash
# Flagship: SDPO on OSWorld with Qwen3-VL-8B-Instruct, 1 node x 8 H100, vLLM rollout, OSWorld's docker provider.
# SDPO (arXiv:2601.20802): the policy, shown a successful sibling's actions, the evaluator's feedback and its own
# final screenshot, is its own (EMA) teacher; the loss is the Jensen-Shannon divergence between student and teacher
# over the student's top-100 tokens plus a tail bucket, at every model token (docs/algorithms.md). Defaults follow
# the SDPO authors' reproduction settings: lr 1e-5 with 10 warm-up steps, EMA rate 0.05, importance weights truncated
# at 2, rollout importance-sampling correction per token at 2. One actor update per step with ROWS=episode; with
# ROWS=step a step holds ~MAX_STEPS rows per episode, so verl makes ~MAX_STEPS updates of PPO_MINI_BATCH x N_RESP rows.
# LoRA: LORA_RANK=16 (0 = full fine-tune). Entropulse (ComputerRL, arXiv:2508.14040): ENTROPULSE=fixed|entropy.
# Any Hydra override appended to the command line wins, e.g. `bash recipes/run_qwen3vl_sdpo_osworld.sh trainer.total_epochs=3`.
# What the OSWorld recipes share (vLLM, FSDP2, the env, step rows, the run's shape) is `preset=osworld`
# (verl_cua/integrations/verl/config/preset/osworld.yaml); the variables below are passed on top of it.
# Needs: `bash envs/osworld/install.sh`, Docker, /dev/kvm. Composes in CI (tests/recipes); not yet run on GPUs.
set -xeuo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-VL-8B-Instruct}
NNODES=${NNODES:-1}
N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-8}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-16}          # OSWorld tasks per step
N_RESP=${N_RESP:-8}                               # episodes per task (the group)
PPO_MINI_BATCH=${PPO_MINI_BATCH:-16}              # verl: an actor update takes PPO_MINI_BATCH x N_RESP rows (ROWS=step:
                                                  # ~MAX_STEPS updates a step, as each episode gives a row per step)
MICRO_BATCH=${MICRO_BATCH:-1}                     # rows per GPU per forward/backward
LOGPROB_MICRO_BATCH=${LOGPROB_MICRO_BATCH:-2}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-8192}      # ROWS=step: instruction, earlier actions, HISTORY_IMAGES screenshots
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-1024}  # ROWS=step: one turn; ROWS=episode: the whole episode (~21000 at
                                                  # 15 steps; a shorter budget fails at start, naming the need)
MAX_TOKENS_PER_STEP=${MAX_TOKENS_PER_STEP:-512}
LORA_RANK=${LORA_RANK:-0}                         # 0: full fine-tune; >0: LoRA on the language model's linear layers
LORA_ALPHA=${LORA_ALPHA:-32}
if [ "${LORA_RANK}" -gt 0 ]; then
    LR=${LR:-5e-5}                                # LoRA: no reference setting; 5x the full fine-tune's
else
    LR=${LR:-1e-5}                                # SDPO's reference setting (full fine-tune)
fi
LR_WARMUP_STEPS=${LR_WARMUP_STEPS:-10}
TP=${TP:-2}
GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.6}
PARAM_OFFLOAD=${PARAM_OFFLOAD:-false}
OPTIMIZER_OFFLOAD=${OPTIMIZER_OFFLOAD:-false}
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
ACTION_FORMAT=${ACTION_FORMAT:-qwen3vl}
OSWORLD_DIR=${OSWORLD_DIR:-OSWorld}               # a clone of github.com/xlang-ai/OSWorld, checked out at f0ae387b3906
#   (the commit whose test_all.json desktop-env 1.0.2 loads whole; the dataset step drops and lists what it cannot run)
TASKS=${TASKS:-${OSWORLD_DIR}/evaluation_examples/test_all.json}  # 369 tasks; or JSON files/folders, comma-separated
DATA_DIR=${DATA_DIR:-data/osworld}
PROJECT_NAME=${PROJECT_NAME:-verl_cua}
EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen3vl8b_sdpo_osworld}
LOGGER=${LOGGER:-[console,wandb]}
TOTAL_EPOCHS=${TOTAL_EPOCHS:-10}
SAVE_FREQ=${SAVE_FREQ:-20}
SHAKEDOWN=${SHAKEDOWN:-0}                         # 1 (a first run): train step 1 and save, resume and train step 2
                                                  # and save, then go on (resumed): the first ~140 GB save and a
                                                  # resume within the first hours, not after SAVE_FREQ steps
CKPT_KEEP=${CKPT_KEEP:-2}                         # checkpoints kept: verl removes older global_step_N/actor (~140 GB each
                                                  # for an 8B full fine-tune with SDPO's EMA); null keeps every one
TEST_FREQ=${TEST_FREQ:--1}
# SDPO (cua.sdpo.*)
SDPO_LOSS=${SDPO_LOSS:-logit}                     # logit: top-k divergence | token: -A log pi, A = log q - log p
SDPO_TOPK=${SDPO_TOPK:-100}
SDPO_ALPHA=${SDPO_ALPHA:-0.5}                     # 0: KL(teacher||student), 1: KL(student||teacher), 0.5: JSD
SDPO_TEACHER=${SDPO_TEACHER:-ema}                 # ema (an EMA of the weights, per actor rank on the host) | current
SDPO_EMA_RATE=${SDPO_EMA_RATE:-0.05}
SDPO_IS_CLIP=${SDPO_IS_CLIP:-2.0}
SDPO_DEMO=${SDPO_DEMO:-true}
SDPO_FEEDBACK=${SDPO_FEEDBACK:-true}
SDPO_FINAL_SCREENSHOT=${SDPO_FINAL_SCREENSHOT:-true}
BUFFER_PER_TASK=${BUFFER_PER_TASK:-8}             # successful trajectories kept per task instance (demos, SFT)
ROLLOUT_IS=${ROLLOUT_IS:-token}                   # rollout importance sampling (vLLM vs FSDP log-probs): token | null
ROLLOUT_IS_THRESHOLD=${ROLLOUT_IS_THRESHOLD:-2.0}
# Entropulse (cua.entropulse.*): off by default
ENTROPULSE=${ENTROPULSE:-none}                    # none | fixed | entropy
ENTROPULSE_RL_STEPS=${ENTROPULSE_RL_STEPS:-50}
ENTROPULSE_SFT_STEPS=${ENTROPULSE_SFT_STEPS:-5}
ENTROPULSE_SFT_BATCH=${ENTROPULSE_SFT_BATCH:-8}
ENTROPULSE_RATIO=${ENTROPULSE_RATIO:-0.5}
ENTROPULSE_MIN_RL_STEPS=${ENTROPULSE_MIN_RL_STEPS:-20}
TRACE_DIR=${TRACE_DIR:-outputs/${EXPERIMENT_NAME}/trace}  # rollouts for `verl-cua view`; TRACE_DIR=null: off
TRACE_EVERY=${TRACE_EVERY:-20}                    # every N-th training step
TRACE_FRACTION=${TRACE_FRACTION:-0.125}           # of the prompt groups (2 of 16 tasks x N_RESP episodes)

# shellcheck source=recipes/osworld_preflight.sh
source recipes/osworld_preflight.sh
LORA_ARGS=()
if [ "${LORA_RANK}" -gt 0 ]; then
    LORA_ARGS=(
        actor_rollout_ref.model.lora_rank="${LORA_RANK}"
        actor_rollout_ref.model.lora_alpha="${LORA_ALPHA}"
        actor_rollout_ref.model.target_modules=all-linear
        actor_rollout_ref.model.exclude_modules='.*visual.*'
    )
fi

"${PYTHON}" -m verl_cua.integrations.verl.dataset --env osworld --tasks "${TASKS}" --out "${DATA_DIR}/train.parquet"

train() {
"${PYTHON}" -m verl_cua.main \
    preset=osworld \
    algorithm.adv_estimator=sdpo \
    algorithm.rollout_correction.rollout_is="${ROLLOUT_IS}" \
    algorithm.rollout_correction.rollout_is_threshold="${ROLLOUT_IS_THRESHOLD}" \
    data.train_files="${DATA_DIR}/train.parquet" \
    data.val_files="${DATA_DIR}/train.parquet" \
    data.train_batch_size="${TRAIN_BATCH_SIZE}" \
    data.max_prompt_length="${MAX_PROMPT_LENGTH}" \
    data.max_response_length="${MAX_RESPONSE_LENGTH}" \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    "${LORA_ARGS[@]}" \
    actor_rollout_ref.actor.optim.lr="${LR}" \
    actor_rollout_ref.actor.optim.lr_warmup_steps="${LR_WARMUP_STEPS}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${PPO_MINI_BATCH}" \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="${MICRO_BATCH}" \
    actor_rollout_ref.actor.use_kl_loss=false \
    actor_rollout_ref.actor.fsdp_config.param_offload="${PARAM_OFFLOAD}" \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload="${OPTIMIZER_OFFLOAD}" \
    actor_rollout_ref.rollout.calculate_log_probs=true \
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
    cua.sdpo.loss="${SDPO_LOSS}" \
    cua.sdpo.topk="${SDPO_TOPK}" \
    cua.sdpo.alpha="${SDPO_ALPHA}" \
    cua.sdpo.teacher="${SDPO_TEACHER}" \
    cua.sdpo.ema_rate="${SDPO_EMA_RATE}" \
    cua.sdpo.is_clip="${SDPO_IS_CLIP}" \
    cua.sdpo.demo="${SDPO_DEMO}" \
    cua.sdpo.feedback="${SDPO_FEEDBACK}" \
    cua.sdpo.final_screenshot="${SDPO_FINAL_SCREENSHOT}" \
    cua.buffer.per_task="${BUFFER_PER_TASK}" \
    cua.entropulse.schedule="${ENTROPULSE}" \
    cua.entropulse.rl_steps="${ENTROPULSE_RL_STEPS}" \
    cua.entropulse.sft_steps="${ENTROPULSE_SFT_STEPS}" \
    cua.entropulse.sft_batch_size="${ENTROPULSE_SFT_BATCH}" \
    cua.entropulse.ratio="${ENTROPULSE_RATIO}" \
    cua.entropulse.min_rl_steps="${ENTROPULSE_MIN_RL_STEPS}" \
    cua.trace.dir="${TRACE_DIR}" \
    cua.trace.every="${TRACE_EVERY}" \
    cua.trace.fraction="${TRACE_FRACTION}" \
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
}

if [ "${SHAKEDOWN}" = 1 ]; then  # verl resumes from the latest checkpoint (trainer.resume_mode=auto)
    train trainer.total_training_steps=1 trainer.save_freq=1 "$@"
    train trainer.total_training_steps=2 trainer.save_freq=1 "$@"
fi
train "$@"
