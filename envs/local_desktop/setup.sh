#!/usr/bin/env bash
# System packages and the desktop-side Python for the `local` OSWorld provider (Xvfb desktop, no VM).
# Idempotent. As root it installs; otherwise it prints the commands to run. Knobs:
#   VERL_CUA_DESKTOP_VENV  where the desktop's own Python lives (default /opt/verl-cua/desktop-venv);
#                          it is outside the project tree on purpose: the desktop user must not see the project.
set -euo pipefail

DESKTOP_VENV=${VERL_CUA_DESKTOP_VENV:-/opt/verl-cua/desktop-venv}
APT_PACKAGES=(
    xvfb xauth openbox dbus dbus-x11 at-spi2-core x11-utils x11-xserver-utils xdotool wmctrl xterm
    python3-venv python3-xlib python3-tk python3-pyatspi gnome-screenshot util-linux bubblewrap
    libreoffice-calc libreoffice-writer libreoffice-gtk3 chromium fonts-liberation
)
DESKTOP_PIP=("pyautogui==0.9.54" "pillow>=10")

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "envs/local_desktop/setup.sh: missing system packages; run: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The desktop's Python: Debian's python3 (so the system pyatspi/gi and python-xlib are importable) plus pyautogui,
# which OSWorld's client sends as `python -c "import pyautogui; ..."`.
if ! "$DESKTOP_VENV/bin/python" -c "import pyautogui, PIL.ImageGrab" 2>/dev/null; then
    if [ ! -w "$(dirname "$(dirname "$DESKTOP_VENV")")" ] && [ "$(id -u)" -ne 0 ]; then
        echo "envs/local_desktop/setup.sh: cannot create $DESKTOP_VENV; run as root or set VERL_CUA_DESKTOP_VENV" >&2
        exit 1
    fi
    mkdir -p "$(dirname "$DESKTOP_VENV")"
    /usr/bin/python3 -m venv --system-site-packages "$DESKTOP_VENV"
    "$DESKTOP_VENV/bin/python" -m pip --disable-pip-version-check -q install "${DESKTOP_PIP[@]}"
    chmod -R a+rX "$(dirname "$DESKTOP_VENV")"
fi
# earlier verl-cua versions filtered the desktops' traffic with an iptables chain; each desktop now has its own
# network namespace, so a chain left by an older version is removed
if [ "$(id -u)" -eq 0 ] && command -v iptables >/dev/null; then
    for tool in iptables ip6tables; do
        command -v "$tool" >/dev/null || continue
        while "$tool" -S OUTPUT 2>/dev/null | grep -q -- "-j VERL_CUA_DESKTOP"; do
            rule=$("$tool" -S OUTPUT | grep -m1 -- "-j VERL_CUA_DESKTOP" | sed 's/^-A OUTPUT //')
            eval "$tool -D OUTPUT $rule" || break
        done
        "$tool" -F VERL_CUA_DESKTOP 2>/dev/null && "$tool" -X VERL_CUA_DESKTOP 2>/dev/null || true
    done
fi
echo "local desktop ready: $DESKTOP_VENV/bin/python"
