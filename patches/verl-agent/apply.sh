#!/usr/bin/env bash
# Apply verl-cua's upstreamable hooks to a verl-agent checkout; safe to run again (applied patches are skipped).
#   bash patches/verl-agent/apply.sh [--check] /path/to/verl-agent
# --check: change nothing, say what would happen; exit 1 if a patch neither applies nor is already applied.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PINNED=$(cut -d' ' -f1 "$HERE/UPSTREAM")
CHECK=0
if [[ "${1:-}" == "--check" ]]; then
    CHECK=1
    shift
fi
TARGET=${1:?usage: apply.sh [--check] VERL_AGENT_DIR}
cd "$TARGET"
if [[ ! -f agent_system/environments/env_manager.py || ! -f verl/trainer/ppo/ray_trainer.py ]]; then
    echo "apply.sh: $TARGET is not a verl-agent checkout (no agent_system/environments/env_manager.py)" >&2
    exit 2
fi
if HEAD=$(git rev-parse HEAD 2>/dev/null) && [[ "$HEAD" != "$PINNED" ]]; then
    echo "apply.sh: note: the patches are written for $PINNED; this checkout is at $HEAD" >&2
fi

status=0
for patch in "$HERE"/0*.patch; do
    name=$(basename "$patch")
    if git apply --reverse --check "$patch" 2>/dev/null; then
        echo "already applied: $name"
    elif git apply --check "$patch" 2>/dev/null; then
        if ((CHECK)); then
            echo "would apply: $name"
        else
            git apply "$patch"
            echo "applied: $name"
        fi
    else
        echo "does not apply: $name (this verl-agent differs from $PINNED; see patches/verl-agent/README.md)" >&2
        status=1
    fi
done
exit "$status"
