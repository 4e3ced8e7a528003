#!/usr/bin/env bash
# GPU smoke test: does the GPU stack train at all? One GPU, a small Qwen2.5-VL from the Hub, MiniWoB++ in Chromium,
# vLLM rollout, FSDP2 actor; STEPS steps of each estimator (GRPO, SDPO, GiGPO), with LoRA off and on: six short runs,
# ~15 minutes on one H100 (most of it vLLM and Ray start-up). Not learning, just the plumbing: every run must log
# STEPS training steps. Then one more SDPO run with the actor's parameters offloaded (PARAM_OFFLOAD_SDPO=true): the
# EMA teacher then reads host copies that verl fills with non-blocking copies. First: `verl-cua doctor
# recipes/gpu_smoke.sh` (driver, versions, budgets).
# Needs `pip install -e '.[vllm,miniwob]'` and Chromium (`apt-get install chromium chromium-driver`). Hydra
# overrides appended go to every run.
set -xeuo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-VL-3B-Instruct}
ESTIMATORS=${ESTIMATORS:-grpo sdpo gigpo}
LORA_RANKS=${LORA_RANKS:-0 16}                    # 0: full fine-tune; 16: LoRA (vision tower excluded)
STEPS=${STEPS:-2}
TASKS=${TASKS:-click-test,click-button}
PROMPTS_PER_STEP=${PROMPTS_PER_STEP:-2}
N_RESP=${N_RESP:-4}
MAX_STEPS=${MAX_STEPS:-2}                         # env steps per episode (step rows)
GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.35}                # vLLM's share; the actor takes the rest
PARAM_OFFLOAD_SDPO=${PARAM_OFFLOAD_SDPO:-true}   # one more SDPO run (EMA teacher) with param_offload=true
OUT=${OUT:-outputs/gpu_smoke}

# shellcheck source=recipes/preflight.sh
source recipes/preflight.sh
require_python "miniwob=MiniWoB++ (the miniwob extra)=install it there ($(command -v "${PYTHON}" || echo "${PYTHON}") -m pip install -e '.[miniwob]')"
mkdir -p "${OUT}"
OUT=$(cd "${OUT}" && pwd)
"${PYTHON}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds 0-63 \
    --out "${OUT}/train.parquet"

smoke() {
    local estimator=$1 lora_rank=$2 name=$3 lr=1e-6
    shift 3
    if [ "${lora_rank}" -gt 0 ]; then lr=1e-5; fi
    rm -f "${OUT}/${name}.jsonl"
    VERL_FILE_LOGGER_PATH="${OUT}/${name}.jsonl" "${PYTHON}" -m verl_cua.main \
        algorithm.adv_estimator="${estimator}" \
        data.train_files="${OUT}/train.parquet" \
        data.val_files="${OUT}/train.parquet" \
        data.train_batch_size="${PROMPTS_PER_STEP}" \
        data.max_prompt_length=4096 \
        data.max_response_length=256 \
        actor_rollout_ref.model.path="${MODEL_PATH}" \
        actor_rollout_ref.model.lora_rank="${lora_rank}" \
        actor_rollout_ref.model.lora_alpha=32 \
        actor_rollout_ref.model.target_modules=all-linear \
        actor_rollout_ref.model.exclude_modules='.*visual.*' \
        actor_rollout_ref.model.enable_gradient_checkpointing=true \
        actor_rollout_ref.actor.strategy=fsdp2 \
        actor_rollout_ref.actor.optim.lr="${lr}" \
        actor_rollout_ref.actor.ppo_mini_batch_size="${PROMPTS_PER_STEP}" \
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \
        actor_rollout_ref.actor.use_kl_loss=false \
        actor_rollout_ref.rollout.name=vllm \
        actor_rollout_ref.rollout.n="${N_RESP}" \
        actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
        actor_rollout_ref.rollout.gpu_memory_utilization="${GPU_MEM_UTIL}" \
        actor_rollout_ref.rollout.enforce_eager=true \
        actor_rollout_ref.rollout.calculate_log_probs=true \
        actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 \
        actor_rollout_ref.rollout.agent.num_workers=2 \
        cua.env.name=miniwob \
        cua.env.pool_size=4 \
        cua.env.rows=step \
        cua.env.max_steps="${MAX_STEPS}" \
        cua.env.max_pixels=200704 \
        cua.action.format=qwen25vl \
        cua.action.max_tokens_per_step=128 \
        trainer.n_gpus_per_node=1 \
        trainer.nnodes=1 \
        trainer.total_training_steps="${STEPS}" \
        trainer.val_before_train=false \
        trainer.test_freq=-1 \
        trainer.save_freq=-1 \
        trainer.logger=[console,file] \
        trainer.experiment_name="gpu_smoke_${name}" \
        trainer.default_local_dir="${OUT}/checkpoints/${name}" \
        hydra.run.dir="${OUT}/hydra/${name}" \
        "$@"
}

for estimator in ${ESTIMATORS}; do
    for lora_rank in ${LORA_RANKS}; do
        smoke "${estimator}" "${lora_rank}" "${estimator}_lora${lora_rank}" "$@"
    done
done
if [ "${PARAM_OFFLOAD_SDPO}" = true ]; then
    smoke sdpo 0 sdpo_param_offload cua.sdpo.teacher=ema actor_rollout_ref.actor.fsdp_config.param_offload=true "$@"
fi
"${PYTHON}" -m verl_cua.testing.smoke_runs "${OUT}" --steps "${STEPS}"
