#!/usr/bin/env bash
# CODA on the CPU (docs/coda.md): a tiny planner trained by GRPO on its thought tokens only, with a frozen executor
# that turns each thought into a click. The default executor is the grounding stand-in (`standin_grounding`, a
# stand-in, not a model: it clicks the element the thought names, read from the page's element table); EXECUTOR=openai
# with EXECUTOR_URL and EXECUTOR_MODEL names a served model instead (e.g. `verl-cua serve` of a tiny model).
# MODE=online (CODA Stage 1 as episodes, mode B): the planner plays MiniWoB++ in Chromium, the env's score is the
# reward, one row per planner turn. MODE=recorded (CODA's own Stage 1, mode A): rows are recorded states with a
# labelled action (by default the MiniWoB++ oracle's runs on RECORD_SEEDS, `verl_cua.sft.recorded_states`), scored
# by CODA's action-match reward in [0, 2]; no browser at training time.
# The planner sees CODA's context (system prompt, the last 2 screenshots, history as text, the Task line) and, with
# OBSERVATION=screenshot_a11y_tree, the page's element table (our addition: a tiny model cannot read a screenshot).
# The model: the planner reading model (`python -m verl_cua.testing.learning model --observation
# screenshot_a11y_tree --planner`: copying, then synthetic tables answered by a thought naming a random row; ~18
# min to build, cached), the same model `bench.coda` trains acting alone. GRPO with CODA's knobs: the group
# (rollout.n), k3 KL to the reference (low_var_kl) and seq-mean-token-mean.
# Needs the venv and system packages of `bash recipes/quickstart.sh`. Any Hydra override appended wins.
set -xeuo pipefail

cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
MODE=${MODE:-online}                              # online: episodes on MiniWoB++ (B) | recorded: labelled states (A)
MODEL_PATH=${MODEL_PATH:-}                        # empty: build the planner reading model (~18 min, cached)
TASKS=${TASKS:-click-button}
OBSERVATION=${OBSERVATION:-screenshot_a11y_tree}  # what the planner reads beside the screenshot (cua.env.observation)
OBSERVATION_TOKENS=${OBSERVATION_TOKENS:-300}     # the element table's budget per turn (MiniWoB++ pages: < 200)
MAX_STEPS=${MAX_STEPS:-1}                         # planner turns per episode (online)
TRAIN_SEEDS=${TRAIN_SEEDS:-0-999}                 # layouts trained on (online)
HELDOUT_SEEDS=${HELDOUT_SEEDS:-100000-100063}     # layouts never trained on
RUNS=${RUNS:-}                                    # recorded: runs to take states from (comma-separated eval or trace
                                                  # dirs); empty: the oracle's runs on RECORD_SEEDS, recorded here
RECORD_SEEDS=${RECORD_SEEDS:-0-63}
LABELS=${LABELS:-success}                         # recorded: success (the runs' successful steps) | judge
JUDGE=${JUDGE:-}                                  # recorded, LABELS=judge: the judge file
EXECUTOR=${EXECUTOR:-standin_grounding}           # standin_grounding | openai
EXECUTOR_URL=${EXECUTOR_URL:-http://127.0.0.1:8000/v1}  # openai: the executor's OpenAI-compatible base URL
EXECUTOR_MODEL=${EXECUTOR_MODEL:-}                # openai: the model it serves
EXECUTOR_FORMAT=${EXECUTOR_FORMAT:-uitars}        # the executor's action format
PROMPTS_PER_STEP=${PROMPTS_PER_STEP:-4}           # layouts (or recorded states) per step
N_RESP=${N_RESP:-8}                               # planner samples per prompt (the GRPO group)
PPO_MINI_BATCH=${PPO_MINI_BATCH:-2}
LR=${LR:-2e-3}                                    # a tiny random model needs its warm start's scale, not 1e-6
KL_COEF=${KL_COEF:-0.05}                          # k3 KL to the warm start
STEPS=${STEPS:-60}
SEED=${SEED:-0}                                   # the order of the prompts
HELDOUT_SAMPLES=${HELDOUT_SAMPLES:-2}
SAVE_FREQ=${SAVE_FREQ:--1}
OUT=${OUT:-outputs/tiny_coda_miniwob}
TRACE_DIR=${TRACE_DIR:-null}                      # a folder: every online rollout, for `verl-cua view`

PY="${VENV}/bin/python"
if [ ! -x "${PY}" ]; then
    set +x
    echo "$(basename "$0"): no Python at ${PY}; set up the CPU stack first: bash recipes/quickstart.sh (or VENV=...)" >&2
    exit 1
fi
case "${MODE}" in
    online | recorded) ;;
    *)
        set +x
        echo "$(basename "$0"): MODE=${MODE} is not valid; valid: online, recorded" >&2
        exit 2
        ;;
esac
if [ -z "${MODEL_PATH}" ]; then
    MODEL_PATH=$("${PY}" -m verl_cua.testing.learning model --observation "${OBSERVATION}" --planner)
fi
mkdir -p "${OUT}"
OUT=$(cd "${OUT}" && pwd)
if [ "${MODE}" = online ]; then
    "${PY}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds "${TRAIN_SEEDS}" \
        --out "${OUT}/train.parquet"
    "${PY}" -m verl_cua.integrations.verl.dataset --env miniwob --tasks "${TASKS}" --seeds "${HELDOUT_SEEDS}" \
        --out "${OUT}/heldout.parquet"
else
    HELDOUT_RUNS="${OUT}/oracle_heldout"
    if [ -z "${RUNS}" ]; then
        RUNS="${OUT}/oracle_train"
        "${PY}" -m verl_cua.testing.expert_runs "${RUNS}" --tasks "${TASKS}" --seeds "${RECORD_SEEDS}" \
            --observation "${OBSERVATION}" --observation-tokens "${OBSERVATION_TOKENS}"
    fi
    "${PY}" -m verl_cua.testing.expert_runs "${HELDOUT_RUNS}" --tasks "${TASKS}" --seeds "${HELDOUT_SEEDS}" \
        --observation "${OBSERVATION}" --observation-tokens "${OBSERVATION_TOKENS}"
    JUDGE_ARGS=()
    [ -n "${JUDGE}" ] && JUDGE_ARGS=(--judge "${JUDGE}")
    IFS=, read -r -a RUN_DIRS <<< "${RUNS}"
    "${PY}" -m verl_cua.sft.recorded_states "${RUN_DIRS[@]}" --labels "${LABELS}" ${JUDGE_ARGS[@]+"${JUDGE_ARGS[@]}"} \
        --out "${OUT}/train.parquet"
    "${PY}" -m verl_cua.sft.recorded_states "${HELDOUT_RUNS}" --out "${OUT}/heldout.parquet"
fi
EXECUTOR_ARGS=()
if [ "${EXECUTOR}" != standin_grounding ]; then
    EXECUTOR_ARGS=(cua.executor.base_url="${EXECUTOR_URL}" cua.executor.model="${EXECUTOR_MODEL}")
fi

VERL_FILE_LOGGER_PATH="${OUT}/metrics.jsonl" "${PY}" -m verl_cua.main \
    preset=cpu \
    algorithm.adv_estimator=grpo \
    data.train_files="${OUT}/train.parquet" \
    data.val_files="${OUT}/heldout.parquet" \
    data.train_batch_size="${PROMPTS_PER_STEP}" \
    data.seed="${SEED}" \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    actor_rollout_ref.actor.optim.lr="${LR}" \
    actor_rollout_ref.actor.ppo_mini_batch_size="${PPO_MINI_BATCH}" \
    actor_rollout_ref.actor.use_kl_loss=true \
    actor_rollout_ref.actor.kl_loss_coef="${KL_COEF}" \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean \
    actor_rollout_ref.rollout.n="${N_RESP}" \
    actor_rollout_ref.rollout.val_kwargs.do_sample=true \
    actor_rollout_ref.rollout.val_kwargs.temperature=1.0 \
    actor_rollout_ref.rollout.val_kwargs.n="${HELDOUT_SAMPLES}" \
    cua.planner.mode="${MODE}" \
    cua.planner.spec=coda \
    cua.executor.kind="${EXECUTOR}" \
    ${EXECUTOR_ARGS[@]+"${EXECUTOR_ARGS[@]}"} \
    cua.executor.format="${EXECUTOR_FORMAT}" \
    cua.env.name=miniwob \
    cua.env.rows=step \
    cua.env.max_steps="${MAX_STEPS}" \
    cua.env.observation="${OBSERVATION}" \
    cua.env.observation_tokens="${OBSERVATION_TOKENS}" \
    cua.action.format=pyautogui \
    cua.action.max_tokens_per_step=24 \
    cua.trace.dir="${TRACE_DIR}" \
    trainer.total_training_steps="${STEPS}" \
    trainer.val_before_train=true \
    trainer.test_freq="${STEPS}" \
    trainer.save_freq="${SAVE_FREQ}" \
    trainer.experiment_name="tiny_coda_${MODE}_miniwob" \
    trainer.default_local_dir="${OUT}/checkpoints" \
    hydra.run.dir="${OUT}/hydra" \
    "$@"
