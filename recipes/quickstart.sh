#!/usr/bin/env bash
# Quickstart on a fresh CPU machine: installs verl-cua with verl 0.9.1 and MiniWoB++, then the whole loop (on 2 cores
# about 17 minutes the first time, 11 once the venv and the model are cached; measured in docs/quickstart.md):
#   1. train: a tiny Qwen2.5-VL built locally (no hub) and warm-started into click syntax only, trained with verl's
#      GRPO on MiniWoB++ click-test, a new button layout every prompt (recipes/run_tiny_grpo_miniwob_cpu.sh);
#   2. merge: the final FSDP checkpoint into a Hugging Face folder with verl's own model merger;
#   3. evaluate: the initial and the trained model, each behind `verl-cua serve`, on layouts never trained on
#      (`verl-cua eval`; the held-out score, so verl's own validation is off here);
#   4. view: both runs side by side (`verl-cua view`), and a summary of the curve and the held-out success.
# Ctrl-C (or a kill) loses little: the venv's install, the warm start (checkpointed in the model cache) and the
# training (a checkpoint every SAVE_EVERY steps) continue where they stopped when the same command runs again; the
# summary then covers every step once. FRESH=1 trains again from step 0.
# Writes OUT/summary.json (per-step figures, first- and last-window success, held-out success of both models and
# their grounding gaps: looking at the screenshot, or a learned prior of where buttons are), OUT/curve.png (the
# learning curve: `python -m bench.curve`, matplotlib from the `bench` extra) and OUT/report.html. Any Hydra override
# appended goes to the trainer.
set -xeuo pipefail

VENV=${VENV:-.venv}
STEPS=${STEPS:-40}                              # GRPO steps, 32 episodes each (the recipe's other settings
                                                # come from the environment too, e.g. LR)
SAVE_EVERY=${SAVE_EVERY:-10}                    # a checkpoint every N steps (and at the last): a rerun goes on from it
FRESH=${FRESH:-0}                               # 1: drop OUT's training and train from step 0
TRAIN_SEEDS=${TRAIN_SEEDS:-0-999}               # click-test layouts trained on
HELDOUT_SEEDS=${HELDOUT_SEEDS:-100000-100063}   # click-test layouts never trained on
EVAL_TEMPERATURE=${EVAL_TEMPERATURE:-1.0}       # sample as in training: the policy's own success rate
OUT=${OUT:-outputs/quickstart}
APT_PACKAGES=(chromium chromium-driver fonts-liberation)

cd "$(dirname "$0")/.."
if ! [ "${SAVE_EVERY}" -ge 1 ] 2>/dev/null || ! [ "${STEPS}" -ge 1 ] 2>/dev/null; then
    set +x
    echo "quickstart: STEPS and SAVE_EVERY must be positive integers (got STEPS=${STEPS}, SAVE_EVERY=${SAVE_EVERY})" >&2
    exit 2
fi
CKPT="${OUT}/train/checkpoints"
SERVER_PID=
TRAINING_SINCE=
MODEL=
STAMP=
{ set +x; } 2>/dev/null
# shellcheck source=recipes/lib/stages.sh
source recipes/lib/stages.sh
STAGES_OF=quickstart
STAGES_TOTAL=8
if [ "${FRESH}" = 1 ]; then STAGES_RERUN="without FRESH=1"; fi
# what a stop leaves for the rerun (stages.sh prints it in its one line), and the eval server to stop on any exit
stages_kept() {
    local kept=()
    if [ -f "${STAMP:-/nonexistent}" ]; then kept+=("the installed venv ${VENV}"); fi
    if [ -n "${MODEL:-}" ]; then
        kept+=("the initial model ${MODEL}")
    elif compgen -G "${VERL_CUA_CACHE:-${HOME}/.cache/verl-cua}/tiny-models/.*.state/*.pt" >/dev/null; then
        kept+=("the warm start's last checkpoint in the model cache")
    fi
    if [ -f "${CKPT}/latest_checkpointed_iteration.txt" ]; then
        kept+=("training checkpoint of step $(cat "${CKPT}/latest_checkpointed_iteration.txt")/${STEPS}")
    fi
    local IFS=,
    echo "${kept[*]}" | sed 's/,/, /g'
}
stages_cleanup() {
    if [ -n "${TRAINING_SINCE:-}" ]; then add_training_seconds; fi
    if [ -n "${SERVER_PID:-}" ]; then kill "${SERVER_PID}" 2>/dev/null || true; fi
}
# add_training_seconds: this run's training time, added to OUT/train/wall_seconds (the summary's, over all runs)
add_training_seconds() {
    local before
    before=$(cat "${OUT}/train/wall_seconds" 2>/dev/null || echo 0)
    echo $((before + $(date +%s) - TRAINING_SINCE)) >"${OUT}/train/wall_seconds"
    TRAINING_SINCE=
}
stages_traps
set -x

stage "system packages (${APT_PACKAGES[*]})"
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        ticking "apt-get update" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive ticking "apt-get install ${missing[*]}" \
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        set +x
        echo "quickstart: missing system packages; run: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi

stage "Python packages: verl-cua with verl 0.9.1, MiniWoB++ and the bench extra into ${VENV}"
if [ ! -x "${VENV}/bin/python" ]; then
    python3 -m venv "${VENV}"
fi
# tests/constraints.txt keeps torch/torchvision at the builds on this machine's disk (no multi-GB download). A stamp
# of what was installed skips pip when nothing changed (pip's own check of a full venv takes ~20 s).
STAMP="${VENV}/.verl-cua-quickstart-$(cat pyproject.toml tests/constraints.txt | sha256sum | cut -c1-16)"
if [ ! -f "${STAMP}" ]; then
    ticking "pip install" "${VENV}/bin/python" -m pip --disable-pip-version-check -q install -c tests/constraints.txt \
        torch==2.14.1 torchvision==0.29.1 -e '.[verl,miniwob,bench]'
    rm -f "${VENV}"/.verl-cua-quickstart-*
    touch "${STAMP}"
else
    stage_note "already installed (${STAMP##*/}; delete it to reinstall)"
fi
PY="${VENV}/bin/python"
CLI="${VENV}/bin/verl-cua"

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
        --out "${OUT}/eval/${name}"
    kill "${SERVER_PID}"
    wait "${SERVER_PID}" || true
    SERVER_PID=
}

# 1. the initial model: built and warm-started once, then cached (stdout is its path, progress on stderr)
stage "the initial model: a tiny Qwen2.5-VL built here and warm-started into click syntax" \
    "(the first run only; cached in ${VERL_CUA_CACHE:-${HOME}/.cache/verl-cua})"
MODEL=$("${PY}" -m verl_cua.testing.learning model)

# 2. train, saving every SAVE_EVERY steps; a rerun resumes from the last save (the CPU preset's resume_mode=auto).
# A rerun must train what the saved run trained: its inputs (all but STEPS, which may grow) are kept beside it.
if [ "${FRESH}" = 1 ]; then
    rm -rf "${OUT:?}/train"
fi
mkdir -p "${OUT}/train"
INPUTS="model=${MODEL} train_seeds=${TRAIN_SEEDS} save_every=${SAVE_EVERY} overrides=$*"
RECIPE_ENV='^(LR|KL_COEF|PROMPTS_PER_STEP|N_RESP|PPO_MINI_BATCH|SEED|TASKS|MAX_STEPS)='  # the recipe's own knobs
INPUTS+=" env=$({ env | grep -E "${RECIPE_ENV}" || true; } | sort | tr '\n' ' ')"
SAVED=$(cat "${CKPT}/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
if [ "${SAVED}" -gt 0 ] && [ "$(cat "${OUT}/train/inputs.txt" 2>/dev/null)" != "${INPUTS}" ]; then
    set +x
    echo "quickstart: ${OUT}/train holds a run of other settings (${OUT}/train/inputs.txt); FRESH=1 trains anew" \
        "there, or OUT=another/folder" >&2
    exit 2
fi
if [ "${SAVED}" -gt "${STEPS}" ] || { [ "${SAVED}" -gt 0 ] && [ ! -d "${CKPT}/global_step_${SAVED}" ]; }; then
    set +x
    echo "quickstart: ${OUT}/train holds a run of ${SAVED} steps; STEPS=${SAVED} uses it," \
        "FRESH=1 trains ${STEPS} anew" >&2
    exit 2
fi
echo "${INPUTS}" >"${OUT}/train/inputs.txt"
if [ "${SAVED}" -eq "${STEPS}" ]; then
    stage "training: done earlier (${CKPT}/global_step_${SAVED}; FRESH=1 trains again)"
else
    if [ "${SAVED}" -gt 0 ]; then
        stage "training: GRPO on MiniWoB++ click-test, continuing from its checkpoint at step ${SAVED}/${STEPS}"
    else
        stage "training: GRPO on MiniWoB++ click-test, ${STEPS} steps (a line a step, all metrics in" \
            "${OUT}/train/metrics.jsonl; a checkpoint every ${SAVE_EVERY})"
    fi
    TRAINING_SINCE=$(date +%s)
    VENV="${VENV}" OUT="${OUT}/train" STEPS="${STEPS}" TRAIN_SEEDS="${TRAIN_SEEDS}" SAVE_FREQ="${SAVE_EVERY}" \
        MODEL_PATH="${MODEL}" bash recipes/run_tiny_grpo_miniwob_cpu.sh \
        trainer.experiment_name=quickstart \
        trainer.logger='[file]' \
        trainer.val_before_train=false \
        trainer.test_freq=-1 \
        "$@"
    add_training_seconds
fi

# 3. merge the last checkpoint into a Hugging Face folder
stage "merging the checkpoint of step ${STEPS} into a Hugging Face folder (verl's model merger)"
rm -rf "${OUT}/model"
ticking "verl's model merger" "${PY}" -m verl.model_merger merge \
    --backend fsdp \
    --local_dir "${CKPT}/global_step_${STEPS}/actor" \
    --target_dir "${OUT}/model"

# 4. evaluate both models on the held-out layouts, 5. view them side by side
stage "evaluating the initial model on the held-out layouts ${HELDOUT_SEEDS}"
serve_and_eval initial "${MODEL}"
stage "evaluating the trained model on the held-out layouts ${HELDOUT_SEEDS}"
serve_and_eval trained "${OUT}/model"
stage "report, summary and learning curve"
"${CLI}" view "${OUT}/eval/initial" "${OUT}/eval/trained" --out "${OUT}/report.html" \
    --title "quickstart: the initial and the trained model on held-out click-test layouts"

ticking "the summary and the screen-blind baseline" \
    "${PY}" -m verl_cua.integrations.verl.summary "${OUT}/train/metrics.jsonl" \
    --seconds "$(cat "${OUT}/train/wall_seconds" 2>/dev/null || echo 0)" \
    --eval initial="${OUT}/eval/initial" \
    --eval trained="${OUT}/eval/trained" \
    --blind "click-test:${TRAIN_SEEDS}:${HELDOUT_SEEDS}" \
    --out "${OUT}/summary.json"
rm -f "${OUT}/curve.png"
"${PY}" -m bench.curve "${OUT}/summary.json" --metrics "${OUT}/train/metrics.jsonl" --out "${OUT}/curve.png"
stage_end
set +x
CURVE=
if [ -f "${OUT}/curve.png" ]; then
    CURVE="; learning curve ${OUT}/curve.png"
fi
echo "quickstart: report ${OUT}/report.html (open it in a browser); summary ${OUT}/summary.json${CURVE}"
