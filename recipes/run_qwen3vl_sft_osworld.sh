#!/usr/bin/env bash
# SFT warm-up of Qwen3-VL-8B-Instruct on trajectories: eval runs of any agent (`verl-cua eval`, e.g. Claude on OSWorld)
# and training traces (cua.trace.dir) become multi-turn, multi-image SFT rows in Qwen3-VL's tool-call format with
# `verl-cua sft-data` (the agent loop's prompt layout: ROWS, HISTORY_IMAGES, MAX_PIXELS as the RL recipe sets them),
# then verl's own SFT trainer (FSDP2, torchrun, one process per GPU) tunes the model on them.
# SFT_RUNS: the run directories, comma-separated. The Hugging Face folder RL starts from is
# ${CKPT_DIR}/global_step_<last>/huggingface (printed at the end; recipes/run_qwen3vl_sft_then_sdpo_osworld.sh uses it).
# Any Hydra override appended goes to the SFT trainer (config: verl_cua/integrations/verl/config/sft/cua_sft.yaml).
set -xeuo pipefail

cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-VL-8B-Instruct}
N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-8}
SFT_RUNS=${SFT_RUNS:-outputs/eval/claude_osworld}  # eval run directories / trace directories, comma-separated
ACTION_FORMAT=${ACTION_FORMAT:-qwen3vl}           # the target model's format: actions are re-rendered into it
SELECT=${SELECT:-success}                         # success | all | reward>=X
MAX_PER_TASK=${MAX_PER_TASK:-4}                   # episodes per task at most (the shortest kept)
ROWS=${ROWS:-step}                                # as the RL recipe: one row per step | episode: one per episode
HISTORY_IMAGES=${HISTORY_IMAGES:-3}
MAX_PIXELS=${MAX_PIXELS:-1003520}
DATA_DIR=${DATA_DIR:-data/osworld_sft}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-64}          # rows per optimizer step (all GPUs)
MICRO_BATCH=${MICRO_BATCH:-1}
MAX_TOKEN_LEN=${MAX_TOKEN_LEN:-16384}             # tokens per GPU per micro-batch (dynamic batching)
MAX_LENGTH=${MAX_LENGTH:-16384}                   # a longer row is an error (truncation would cut screenshots)
LR=${LR:-1e-5}
TOTAL_EPOCHS=${TOTAL_EPOCHS:-3}
LORA_RANK=${LORA_RANK:-0}                         # 0: full fine-tune; >0: LoRA (the vision tower stays frozen)
LORA_ALPHA=${LORA_ALPHA:-32}
PROJECT_NAME=${PROJECT_NAME:-verl_cua}
EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen3vl8b_sft_osworld}
CKPT_DIR=${CKPT_DIR:-checkpoints/${PROJECT_NAME}/${EXPERIMENT_NAME}}
LOGGER=${LOGGER:-[console,wandb]}
CKPT_KEEP=${CKPT_KEEP:-2}                         # checkpoints kept (verl removes older ones); null keeps every one

# shellcheck source=recipes/preflight.sh
source recipes/preflight.sh
require_python
if ! skip_preflight; then  # before torchrun starts a process per GPU
    "${PYTHON}" -m verl_cua.doctor.preflight --prog "$(basename "$0")" --gpus "${N_GPUS_PER_NODE}" \
        --model "${MODEL_PATH}" --logger "${LOGGER}" -- "$@" || exit 1
fi

IFS=, read -r -a RUNS <<< "${SFT_RUNS}"
"${PYTHON}" -m verl_cua.cli sft-data "${RUNS[@]}" \
    --format "${ACTION_FORMAT}" \
    --model "${MODEL_PATH}" \
    --out "${DATA_DIR}/train.parquet" \
    --rows "${ROWS}" \
    --history-images "${HISTORY_IMAGES}" \
    --max-pixels "${MAX_PIXELS}" \
    --select "${SELECT}" \
    --max-per-task "${MAX_PER_TASK}"

"${TORCHRUN}" --standalone --nnodes=1 --nproc_per_node="${N_GPUS_PER_NODE}" -m verl_cua.sft_main \
    data.train_files="${DATA_DIR}/train.parquet" \
    data.train_batch_size="${TRAIN_BATCH_SIZE}" \
    data.micro_batch_size_per_gpu="${MICRO_BATCH}" \
    data.max_token_len_per_gpu="${MAX_TOKEN_LEN}" \
    data.max_length="${MAX_LENGTH}" \
    model.path="${MODEL_PATH}" \
    model.enable_gradient_checkpointing=true \
    model.lora_rank="${LORA_RANK}" \
    model.lora_alpha="${LORA_ALPHA}" \
    engine.strategy=fsdp2 \
    optim.lr="${LR}" \
    trainer.default_local_dir="${CKPT_DIR}" \
    trainer.max_ckpt_to_keep="${CKPT_KEEP}" \
    trainer.project_name="${PROJECT_NAME}" \
    trainer.experiment_name="${EXPERIMENT_NAME}" \
    trainer.logger="${LOGGER}" \
    trainer.total_epochs="${TOTAL_EPOCHS}" \
    trainer.n_gpus_per_node="${N_GPUS_PER_NODE}" \
    "$@"
set +x
echo "SFT model for RL: ${CKPT_DIR}/global_step_$(cat "${CKPT_DIR}/latest_checkpointed_iteration.txt" 2>/dev/null || echo N)/huggingface"
