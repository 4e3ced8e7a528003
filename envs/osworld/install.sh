#!/usr/bin/env bash
# OSWorld's client (PyPI desktop-env) for the `osworld` env, installed into the active Python. Idempotent.
#
# desktop-env 1.0.2 pins numpy<2, transformers~=4.35, torch~=2.5, Pillow~=11.0, gymnasium~=0.28 and ~60 more
# packages that clash with verl and would pull a CUDA torch. We install it with --no-deps, plus the light
# packages its controllers, providers and the evaluators our task set uses need (the `osworld` extra).
# Heavy evaluator dependencies (easyocr/torch, librosa, OpenCV, scikit-image, PyMuPDF, borb) are left out:
# verl_cua loads evaluators lazily, and a metric that needs one of them says which package to install.
# Knobs: PYTHON (default: python3 of the active venv), DESKTOP_ENV_VERSION (default 1.0.2).
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
DESKTOP_ENV_VERSION=${DESKTOP_ENV_VERSION:-1.0.2}
PIP=("$PYTHON" -m pip --disable-pip-version-check -q)

if ! "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(m.version('desktop-env') != '$DESKTOP_ENV_VERSION')" 2>/dev/null; then
    "${PIP[@]}" install --no-deps "desktop-env==$DESKTOP_ENV_VERSION"
fi
# The light packages: pyproject's `osworld` extra (installed from this checkout, without touching torch).
CONSTRAINTS=()
[ -f tests/constraints.txt ] && CONSTRAINTS=(-c tests/constraints.txt)
"${PIP[@]}" install "${CONSTRAINTS[@]}" -e ".[osworld]"
"$PYTHON" -c "from verl_cua.envs.osworld.check import check_client; check_client()"
echo "osworld client ready: desktop-env $DESKTOP_ENV_VERSION (--no-deps) in $("$PYTHON" -c 'import sys; print(sys.prefix)')"
