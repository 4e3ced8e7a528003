#!/usr/bin/env bash
# Quickstart on a fresh CPU machine: installs verl-cua with verl 0.9.1 and MiniWoB++, then the whole loop (on 2 cores
# about 15 minutes the first time, 10 once the venv and the model are cached; measured in docs/quickstart.md):
#   1. train: a tiny Qwen2.5-VL built locally (no hub) and warm-started into click syntax only, trained with verl's
#      GRPO on MiniWoB++ click-test, a new button layout every prompt (recipes/run_tiny_grpo_miniwob_cpu.sh);
#   2. merge: the final FSDP checkpoint into a Hugging Face folder with verl's own model merger;
#   3. evaluate: the initial and the trained model, each behind `verl-cua serve`, on layouts never trained on
#      (`verl-cua eval`; the held-out score, so verl's own validation is off here);
#   4. view: both runs side by side (`verl-cua view`), and a summary of the curve and the held-out success.
# Writes OUT/summary.json (per-step figures, first- and last-window success, held-out success of both models and
# their grounding gaps: looking at the screenshot, or a learned prior of where buttons are), OUT/curve.png (the
# learning curve: `python -m bench.curve`, matplotlib from the `bench` extra) and OUT/report.html. Any Hydra override
# appended goes to the trainer.
set -xeuo pipefail

VENV=${VENV:-.venv}
STEPS=${STEPS:-40}                              # GRPO steps, 32 episodes each (the recipe's other settings
                                                # come from the environment too, e.g. LR)
TRAIN_SEEDS=${TRAIN_SEEDS:-0-999}               # click-test layouts trained on
HELDOUT_SEEDS=${HELDOUT_SEEDS:-100000-100063}   # click-test layouts never trained on
EVAL_TEMPERATURE=${EVAL_TEMPERATURE:-1.0}       # sample as in training: the policy's own success rate
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
    torch==2.14.1 torchvision==0.29.1 -e '.[verl,miniwob,bench]'
PY="${VENV}/bin/python"
CLI="${VENV}/bin/verl-cua"

SERVER_PID=
trap 'if [ -n "${SERVER_PID}" ]; then kill "${SERVER_PID}" 2>/dev/null || true; fi' EXIT

# serve_and_eval NAME MODEL_DIR: serve the model on a free port, score it on the held-out layouts, stop the server
serve_and_eval() {
    local name=$1 model=$2 log="${OUT}/eval/$1.serve.log" url=
    rm -rf "${OUT:?}/eval/${name}"
    mkdir -p "${OUT}/eval"
    "${CLI}" serve "${model}" --port 0 --served-model-name "${name}" >"${log}" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 240); do
        url=$(sed -n 's/^verl-cua serve: .* at \(http[^ ]*\)$/\1/p' "${log}")
        if [ -n "${url}" ] || ! kill -0 "${SERVER_PID}" 2>/dev/null; then
            break
        fi
        sleep 0.5
    done
    if [ -z "${url}" ]; then
        set +x
        echo "quickstart: verl-cua serve ${model} did not come up; its log: ${log}" >&2
        exit 1
    fi
    "${CLI}" eval \
        --env miniwob \
        --tasks click-test \
        --seeds "${HELDOUT_SEEDS}" \
        --model "${name}" \
        --base-url "${url}" \
        --format pyautogui \
        --max-steps 1 \
        --max-tokens 24 \
        --temperature "${EVAL_TEMPERATURE}" \
        --workers 2 \
        --no-progress \
        --out "${OUT}/eval/${name}"
    kill "${SERVER_PID}"
    wait "${SERVER_PID}" || true
    SERVER_PID=
}

# 1. train (the initial model is built and warm-started once, then cached); stdout is its path, progress on stderr
set +x
echo "quickstart: the initial model: a tiny Qwen2.5-VL built here and warm-started into click syntax on the CPU" \
    "(the first run only: minutes, progress below; cached in ${VERL_CUA_CACHE:-${HOME}/.cache/verl-cua} afterwards)" >&2
set -x
MODEL=$("${PY}" -m verl_cua.testing.learning model)
START=$(date +%s)
VENV="${VENV}" OUT="${OUT}/train" STEPS="${STEPS}" TRAIN_SEEDS="${TRAIN_SEEDS}" SAVE_FREQ="${STEPS}" MODEL_PATH="${MODEL}" \
    bash recipes/run_tiny_grpo_miniwob_cpu.sh \
    trainer.experiment_name=quickstart \
    trainer.val_before_train=false \
    trainer.test_freq=-1 \
    "$@"
END=$(date +%s)

# 2. merge the last checkpoint into a Hugging Face folder
rm -rf "${OUT}/model"
"${PY}" -m verl.model_merger merge \
    --backend fsdp \
    --local_dir "${OUT}/train/checkpoints/global_step_${STEPS}/actor" \
    --target_dir "${OUT}/model"

# 3. evaluate both models on the held-out layouts, 4. view them side by side
serve_and_eval initial "${MODEL}"
serve_and_eval trained "${OUT}/model"
"${CLI}" view "${OUT}/eval/initial" "${OUT}/eval/trained" --out "${OUT}/report.html" \
    --title "quickstart: the initial and the trained model on held-out click-test layouts"

"${PY}" -m verl_cua.integrations.verl.summary "${OUT}/train/metrics.jsonl" \
    --seconds $((END - START)) \
    --eval initial="${OUT}/eval/initial" \
    --eval trained="${OUT}/eval/trained" \
    --blind "click-test:${TRAIN_SEEDS}:${HELDOUT_SEEDS}" \
    --out "${OUT}/summary.json"
rm -f "${OUT}/curve.png"
"${PY}" -m bench.curve "${OUT}/summary.json" --metrics "${OUT}/train/metrics.jsonl" --out "${OUT}/curve.png"
set +x
CURVE=
if [ -f "${OUT}/curve.png" ]; then
    CURVE="; learning curve ${OUT}/curve.png"
fi
echo "quickstart: report ${OUT}/report.html (open it in a browser); summary ${OUT}/summary.json${CURVE}"
