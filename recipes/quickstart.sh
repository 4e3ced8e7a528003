#!/usr/bin/env bash
# Quickstart on a fresh CPU machine: installs verl-cua with verl 0.9.1 and MiniWoB++, builds a tiny random
# Qwen2.5-VL locally (no hub; random weights plus a short SFT into click syntax, so it emits valid and invalid
# actions, hits and misses), and runs a few real GRPO steps of verl's trainer on 4 MiniWoB++ tasks on the CPU
# (`preset=cpu`: cpu platform, FSDP2 on cpu, `hf` rollout). Prints a summary and writes
# outputs/quickstart/summary.json. It shows the machinery works; a tiny model does not learn the tasks.
set -xeuo pipefail

VENV=${VENV:-.venv}
FAMILY=${FAMILY:-qwen25vl}                      # qwen25vl | qwen3vl
TASKS=${TASKS:-click-test,click-button,enter-text,focus-text}
STEPS=${STEPS:-3}
N=${N:-2}                                       # rollouts per task (GRPO group size)
MAX_STEPS=${MAX_STEPS:-2}                       # env steps per episode
FORMAT=${FORMAT:-pyautogui}
OUT=${OUT:-outputs/quickstart}
APT_PACKAGES=(chromium chromium-driver fonts-liberation)

cd "$(dirname "$0")/.."

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        set +x
        echo "quickstart: missing system packages; run: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi

if [ ! -x "${VENV}/bin/python" ]; then
    python3 -m venv "${VENV}"
fi
# tests/constraints.txt keeps torch/torchvision at the builds on this machine's disk (no multi-GB download).
"${VENV}/bin/python" -m pip --disable-pip-version-check -q install -c tests/constraints.txt \
    torch==2.14.1 torchvision==0.29.1 -e '.[verl,miniwob]'
PY="${VENV}/bin/python"

MODEL=$("${PY}" -m verl_cua.testing.warm_start "$("${PY}" -m verl_cua.testing.tiny_models --family "${FAMILY}")")
mkdir -p "${OUT}"
"${PY}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds 0 --out "${OUT}/train.parquet"
NUM_TASKS=$(echo "${TASKS}" | tr ',' '\n' | grep -c .)
rm -f "${OUT}/metrics.jsonl"

START=$(date +%s)
VERL_FILE_LOGGER_PATH="${PWD}/${OUT}/metrics.jsonl" "${PY}" -m verl_cua.main \
    preset=cpu \
    data.train_files="${OUT}/train.parquet" \
    data.val_files="${OUT}/train.parquet" \
    data.train_batch_size="${NUM_TASKS}" \
    actor_rollout_ref.model.path="${MODEL}" \
    actor_rollout_ref.rollout.n="${N}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${NUM_TASKS}" \
    algorithm.adv_estimator=grpo \
    cua.env.name=miniwob \
    cua.env.max_steps="${MAX_STEPS}" \
    cua.action.format="${FORMAT}" \
    cua.action.max_tokens_per_step=32 \
    trainer.total_training_steps="${STEPS}" \
    trainer.experiment_name=quickstart \
    trainer.default_local_dir="${OUT}/checkpoints" \
    "$@"
END=$(date +%s)

"${PY}" -m verl_cua.integrations.verl.summary "${OUT}/metrics.jsonl" \
    --seconds $((END - START)) \
    --out "${OUT}/summary.json"
