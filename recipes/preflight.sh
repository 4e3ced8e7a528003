# Sourced by the GPU recipes after their variable block (needs PYTHON): the interpreter PYTHON names must exist and
# import verl-cua, verl and the modules given to `require_python` (OSWorld's client for the OSWorld recipes); one
# line per missing piece, naming the interpreter's path and PYTHON=. The rest of the preflight (GPUs against the
# run's ask, the model path, the stack's versions, the desktops' needs) runs in Python on the composed config
# before Ray starts (`verl_cua.main`), or before torchrun (`python -m verl_cua.doctor.preflight`). SKIP_PREFLIGHT=1
# skips both.

die() {
    set +x
    echo "$(basename "$0"): $*" >&2
    exit 1
}

# skip_preflight: whether SKIP_PREFLIGHT says so (1, true, yes or on, as the Python side reads it).
skip_preflight() {
    case "${SKIP_PREFLIGHT:-}" in 1 | [Tt][Rr][Uu][Ee] | [Yy][Ee][Ss] | [Oo][Nn]) return 0 ;; *) return 1 ;; esac
}

VERL_MODULE="~verl=verl 0.9.1=install it there ({exe} -m pip install -e '.[verl]')"  # python_lacks' verl

# python_lacks [MODULE=WHAT=FIX ...]: LACKING holds one line per module the interpreter PYTHON names lacks: verl_cua
# always (installed), each MODULE given (imported; ~MODULE: installed is enough; {exe} in FIX: the interpreter's
# path); empty when it has them all. Dies in one line when PYTHON is no interpreter or does not run as Python.
python_lacks() {
    local exe lines errors xtrace
    xtrace=$(set +o | grep xtrace)  # the lines below, not their trace (a multi-line trace would read as output)
    set +x
    exe=$(command -v "${PYTHON}") || die "PYTHON=${PYTHON} is not an interpreter on PATH; set PYTHON= to the" \
        "python of the environment that has verl-cua (e.g. PYTHON=.venv/bin/python)"
    errors=$(mktemp)
    lines=$("${exe}" - "${exe}" "${PYTHON}" \
        "~verl_cua=verl-cua=install it there ({exe} -m pip install -e '.[verl]')" \
        "$@" 2>"${errors}" <<'EOF'
import importlib, importlib.util, sys
exe, named = sys.argv[1], sys.argv[2]
for spec in sys.argv[3:]:
    module, what, fix = spec.split("=", 2)
    try:  # ~module: installed is enough (verl takes seconds to import; main imports it next)
        if module.startswith("~") and importlib.util.find_spec(module[1:]) is None:
            raise ImportError(f"No module named {module[1:]!r}")
        if not module.startswith("~"):
            importlib.import_module(module)
    except Exception as exc:
        print(f"lacks: {exe} (PYTHON={named}) lacks {what} ({type(exc).__name__}: {exc}): "
              f"{fix.replace('{exe}', exe)}, or set PYTHON= to an interpreter that has it")
EOF
    ) || {
        local rc=$? why
        why=$(tail -n 1 "${errors}")
        rm -f "${errors}"
        die "PYTHON=${PYTHON} (${exe}) does not run as Python (exit ${rc})${why:+: ${why}}"
    }
    rm -f "${errors}"
    LACKING=$(grep '^lacks: ' <<< "${lines}" | sed 's/^lacks: //' || true)  # an import's own output is no blocker
    eval "${xtrace}"
}

# require_python [MODULE=WHAT=FIX ...]: verl_cua and verl always (installed), each extra MODULE (imported) with what
# it is and the fix; one line per missing piece, then exit 1.
require_python() {
    if skip_preflight || [ -n "${VERL_CUA_COMPOSE_ONLY:-}" ]; then return 0; fi
    python_lacks "${VERL_MODULE}" "$@"
    if [ "${#LACKING}" -gt 0 ]; then  # its length: a trace of the lines would read as more output
        set +x
        while IFS= read -r line; do echo "$(basename "$0"): ${line}" >&2; done <<< "${LACKING}"
        exit 1
    fi
}

# osworld_client: the require_python argument for OSWorld's client (desktop-env, installed with --no-deps).
osworld_client() {
    echo "desktop_env=OSWorld's client (desktop-env)=install it there" \
        "(PYTHON=$(command -v "${PYTHON}" || echo "${PYTHON}") bash envs/osworld/install.sh)"
}

# require_docker: OSWorld's docker provider needs a daemon this user can reach; KVM, or the VMs crawl.
require_docker() {
    docker info >/dev/null 2>&1 || die "the docker provider needs a Docker daemon this user can reach (docker info failed)"
    [ -e /dev/kvm ] || echo "$(basename "$0"): no /dev/kvm: OSWorld's VMs will run without KVM, too slowly to train" >&2
}
