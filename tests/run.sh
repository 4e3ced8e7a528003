#!/usr/bin/env bash
# The test command (README contract): creates/uses a venv, installs verl-cua[dev], lints, runs the CPU suite.
# Fails when pytest collects no test (exit 5). Knobs: VERL_CUA_VENV (default .venv), PYTEST_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VERL_CUA_VENV:-.venv}
PYTHON=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# tests/constraints.txt pins torch/torchvision to the builds on this machine's disk, so no dependency can
# pull a multi-GB CUDA torch from the index.
"${PIP[@]}" install -c tests/constraints.txt -e '.[dev]'

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check --quiet .

set +e
# shellcheck disable=SC2086
"$VENV/bin/python" -m pytest ${PYTEST_ARGS:--q} tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "tests/run.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$rc"
