#!/usr/bin/env bash
# Quickstart on a CPU box. Today it sets up verl-cua and runs the action layer on every model format;
# the full training job (tiny local Qwen-VL on MiniWoB++, real verl step on CPU) arrives with the verl
# integration (issue 4) and will replace the demo below.
set -xeuo pipefail

VENV=${VENV:-.venv}
SCREEN=${SCREEN:-1920x1080}

cd "$(dirname "$0")/.."
if [ ! -x "${VENV}/bin/python" ]; then
    python3 -m venv "${VENV}"
fi
"${VENV}/bin/python" -m pip --disable-pip-version-check -q install -c tests/constraints.txt -e .

"${VENV}/bin/python" examples/parse_outputs.py \
    --screen "${SCREEN}" \
    "$@"

set +x
echo "quickstart: the action layer works. The CPU training job arrives with the verl integration."
