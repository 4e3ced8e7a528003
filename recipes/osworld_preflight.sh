# Sourced by the OSWorld recipes after their variable block (needs PYTHON, PROVIDER, VM_PATH, N_GPUS_PER_NODE,
# MODEL_PATH; reads NNODES, TP, ENGINE, LOGGER, TASKS, PREFLIGHT_HOST): checks the interpreter (recipes/preflight.sh:
# verl-cua and OSWorld's client), the GPUs, model, stack (verl), the loggers' credentials, the task set (TASKS must
# name tasks before anything is downloaded; missing evaluator packages are listed) and, for the docker provider,
# Docker, KVM and the VM image's disk (`python -m verl_cua.doctor.preflight`, with the overrides in the recipe's
# PREFLIGHT_OVERRIDES array, if any, then its appended ones: a planner recipe's executor endpoint is checked so),
# every blocker on a line of its own, then exit 1; without verl-cua in PYTHON only the interpreter is named. Then
# fetches the osworld-docker image and the Ubuntu VM image (downloaded once, here, so that no Ray worker
# downloads it by itself); sets VM_ARGS, the overrides that pass the image on (under KWARGS_PREFIX: +cua.env.kwargs by
# default, +env.osworld.kwargs for verl-agent). SKIP_PREFLIGHT=1 skips the checks, not the downloads.

# shellcheck source=recipes/preflight.sh
source recipes/preflight.sh

VM_ARGS=()
if [ -n "${VERL_CUA_COMPOSE_ONLY:-}" ]; then  # `verl-cua doctor RECIPE` reads the overrides; it checks the rest itself
    if [ "${PROVIDER}" = docker ]; then VM_ARGS=("${KWARGS_PREFIX:-+cua.env.kwargs}.path_to_vm=${VM_PATH}"); fi
    return 0
fi
if ! skip_preflight; then  # every blocker at once, before the downloads below (main checks the composed config again)
    python_lacks "${VERL_MODULE}" "$(osworld_client)"
    if grep -q -e ' lacks verl-cua (' -e ' lacks verl 0.9.1 (' <<< "${LACKING}"; then  # the checks below run in
        require_python "$(osworld_client)"  # PYTHON, so without verl-cua's stack the interpreter is named alone
    fi
    INTERPRETER=()  # what PYTHON lacks (OSWorld's client): listed first among the blockers, and counted with them
    if [ "${#LACKING}" -gt 0 ]; then  # its length: a trace of the lines would read as more output
        while IFS= read -r line; do INTERPRETER+=(--blocker "${line}"); done <<< "${LACKING}"
    fi
    "${PYTHON}" -m verl_cua.doctor.preflight --prog "$(basename "$0")" --host "${PREFLIGHT_HOST:-verl}" \
        --gpus "${N_GPUS_PER_NODE}" --nnodes "${NNODES:-1}" --tp "${TP:-1}" --rollout "${ENGINE:-vllm}" \
        --model "${MODEL_PATH}" --logger "${LOGGER:-}" --tasks "${TASKS:-}" --provider "${PROVIDER}" \
        --vm-path "${VM_PATH}" ${INTERPRETER[@]+"${INTERPRETER[@]}"} \
        -- ${PREFLIGHT_OVERRIDES[@]+"${PREFLIGHT_OVERRIDES[@]}"} "$@" || exit 1
fi
if [ "${PROVIDER}" = docker ]; then
    docker image inspect happysixd/osworld-docker >/dev/null 2>&1 || docker pull happysixd/osworld-docker
    # downloaded into VM_PATH's folder (desktop-env's own download goes to ./docker_vm_data), the zip deleted
    [ -f "${VM_PATH}" ] || "${PYTHON}" -m verl_cua.envs.osworld.vm_image --vm-path "${VM_PATH}" || exit 1
    VM_ARGS=("${KWARGS_PREFIX:-+cua.env.kwargs}.path_to_vm=${VM_PATH}")
fi
