#!/usr/bin/env bash
# OSWorld's client (PyPI desktop-env) for the `osworld` env, installed into the active Python. Idempotent.
#
# desktop-env 1.0.2 pins numpy<2, transformers~=4.35, torch~=2.5, Pillow~=11.0, gymnasium~=0.28 and ~60 more
# packages that clash with verl and would pull a CUDA torch. We install it with --no-deps, plus the light
# packages its controllers, providers and the evaluators our task set uses need (the `osworld` extra).
# Heavy evaluator dependencies (easyocr/torch, librosa, OpenCV, scikit-image, PyMuPDF, borb) are left out unless
# EVALUATORS=1 (the osworld-evaluators extra, with verl's torch, numpy and transformers held): verl_cua loads
# evaluators lazily, and the dataset step drops and lists the tasks whose metrics need a missing one.
# The steps are `verl-cua install-osworld`'s (verl_cua/setup_commands.py); this script first installs this checkout
# when the Python lacks verl-cua. Knobs: PYTHON (default: python3 of the active venv), DESKTOP_ENV_VERSION (1.0.2),
# EVALUATORS (1: also the osworld-evaluators extra).
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
DESKTOP_ENV_VERSION=${DESKTOP_ENV_VERSION:-1.0.2}
PIP=("$PYTHON" -m pip --disable-pip-version-check -q)

# verl-cua itself (this checkout, editable) when the Python lacks it; then the same steps as `verl-cua install-osworld`
if ! "$PYTHON" -c "import importlib.metadata as m; m.version('verl-cua')" 2>/dev/null; then
    CONSTRAINTS=()
    [ -f tests/constraints.txt ] && CONSTRAINTS=(-c tests/constraints.txt)
    "${PIP[@]}" install "${CONSTRAINTS[@]}" -e .
fi
EVALUATORS_ARGS=()
case "${EVALUATORS:-}" in 1 | true | yes | on) EVALUATORS_ARGS=(--evaluators) ;; esac
"$PYTHON" -m verl_cua.cli install-osworld --version "$DESKTOP_ENV_VERSION" "${EVALUATORS_ARGS[@]}"
