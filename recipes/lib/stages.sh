# Stage lines for a recipe a person waits on (sourced; bash). The recipe sets STAGES_OF (its name) and STAGES_TOTAL,
# may define `stages_kept` (prints what a stop leaves for a rerun) and `stages_cleanup`, may set STAGES_RERUN (words
# after "run the same command again", e.g. "without FRESH=1"), and calls `stages_traps`.
# `stage TEXT` ends the stage before (a line with its time) and announces the next, `[k/N] TEXT`; `stage_note TEXT`
# adds a line to it; `ticking LABEL CMD...` runs CMD in the foreground with a line every TICK_S seconds while it runs;
# `stage_end` ends the last stage. A stop (Ctrl-C, SIGTERM) prints one line: where, what was kept, how to go on.

STAGES_OF=${STAGES_OF:-recipe}
STAGES_TOTAL=${STAGES_TOTAL:-?}
TICK_S=${TICK_S:-30}
STAGE_N=0
STAGE_NAME=
STAGE_SINCE=
STAGE_TICKER=
STAGE_STOPPED=

STAGES_TRACE=${STAGES_TRACE:-1}  # 1: the recipe runs under `set -x`, which each function turns back on when it ends

_stages_loud() { if [ "${STAGES_TRACE}" = 1 ]; then set -x; fi; }

_stage_close() {
    if [ -n "${STAGE_NAME}" ]; then
        echo "${STAGES_OF}: [${STAGE_N}/${STAGES_TOTAL}] done in $(($(date +%s) - STAGE_SINCE)) s" >&2
        STAGE_NAME=
    fi
}

stage() {
    { set +x; } 2>/dev/null
    _stage_close
    STAGE_N=$((STAGE_N + 1))
    STAGE_NAME="$*"
    STAGE_SINCE=$(date +%s)
    echo "${STAGES_OF}: [${STAGE_N}/${STAGES_TOTAL}] ${STAGE_NAME}" >&2
    _stages_loud
}

stage_note() {
    { set +x; } 2>/dev/null
    echo "${STAGES_OF}: [${STAGE_N}/${STAGES_TOTAL}] $*" >&2
    _stages_loud
}

stage_end() {
    { set +x; } 2>/dev/null
    _stage_close
    _stages_loud
}

_stop_ticker() {
    if [ -n "${STAGE_TICKER}" ]; then
        kill "${STAGE_TICKER}" 2>/dev/null || true
        wait "${STAGE_TICKER}" 2>/dev/null || true
        STAGE_TICKER=
    fi
}

ticking() {
    local label=$1 since
    shift
    since=$(date +%s)
    { set +x; } 2>/dev/null
    (
        while sleep "${TICK_S}"; do
            echo "${STAGES_OF}: [${STAGE_N}/${STAGES_TOTAL}] ${label}: $(($(date +%s) - since)) s so far" >&2
        done
    ) &
    STAGE_TICKER=$!
    _stages_loud
    "$@"
    { set +x; } 2>/dev/null
    _stop_ticker
    _stages_loud
}

stage_stopped() {
    { set +x; } 2>/dev/null
    STAGE_STOPPED=$1
    exit "$1"
}

stage_exit() {
    local rc=${1:-$?}
    { set +x; } 2>/dev/null
    _stop_ticker
    if declare -F stages_cleanup >/dev/null; then
        stages_cleanup
    fi
    if [ -n "${STAGE_STOPPED}" ]; then
        local how="Ctrl-C" kept=
        if [ "${STAGE_STOPPED}" != 130 ]; then how="SIGTERM"; fi
        if declare -F stages_kept >/dev/null; then kept=$(stages_kept); fi
        echo "${STAGES_OF}: stopped (${how}) at [${STAGE_N}/${STAGES_TOTAL}] ${STAGE_NAME:-its start}${kept:+; kept: ${kept}};" \
            "run the same command again${STAGES_RERUN:+ ${STAGES_RERUN}} to go on from there" >&2
        exit "${STAGE_STOPPED}"
    fi
    exit "${rc}"
}

stages_traps() {
    trap '{ set +x; } 2>/dev/null; stage_stopped 130' INT
    trap '{ set +x; } 2>/dev/null; stage_stopped 143' TERM
    trap '{ STAGE_RC=$?; set +x; } 2>/dev/null; stage_exit "${STAGE_RC}"' EXIT  # the status before set +x
}
