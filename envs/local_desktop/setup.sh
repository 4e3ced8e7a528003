#!/usr/bin/env bash
# System packages and the desktop-side Python for the `local` OSWorld provider (Xvfb desktop, no VM).
# Idempotent. As root it installs; otherwise it prints the commands to run. Knobs:
#   VERL_CUA_DESKTOP_VENV  where the desktop's own Python lives (default /opt/verl-cua/desktop-venv);
#                          it is outside the project tree on purpose: the desktop user must not see the project.
#   VERL_CUA_DESKTOP_APP_HOME  the apps' first-run files (VLC's vlcrc, GIMP's config), made here once and copied
#                          into every desktop's HOME, as on OSWorld's image where each app has run once
#                          (default /opt/verl-cua/desktop-home)
set -euo pipefail

DESKTOP_VENV=${VERL_CUA_DESKTOP_VENV:-/opt/verl-cua/desktop-venv}
APP_HOME=${VERL_CUA_DESKTOP_APP_HOME:-/opt/verl-cua/desktop-home}
APT_PACKAGES=(
    xvfb xauth openbox dbus dbus-x11 at-spi2-core x11-utils x11-xserver-utils xdotool wmctrl xterm
    python3-venv python3-xlib python3-tk python3-pyatspi python3-uno gnome-screenshot util-linux bubblewrap
    libreoffice-calc libreoffice-writer libreoffice-impress libreoffice-gtk3 chromium fonts-liberation
    vlc gimp totem socat sysstat pulseaudio gnome-terminal gsettings-desktop-schemas gnome-shell-common
    dconf-cli dconf-service
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
# The apps' first-run files, made by the apps themselves as an unprivileged user with a scratch HOME: VLC's vlcrc
# (every option at its default but the first start's privacy question), GIMP's config dir (one GUI start and quit
# on a scratch X display, which writes its sessionrc; gimprc as GIMP leaves it when nothing was changed)
if ! grep -qx "qt-privacy-ask=0" "$APP_HOME/.config/vlc/vlcrc" 2>/dev/null \
        || [ ! -f "$APP_HOME/.config/GIMP/2.10/sessionrc" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "envs/local_desktop/setup.sh: cannot create $APP_HOME as $(id -un); run as root" >&2
        exit 1
    fi
    scratch=$(mktemp -d)
    chown nobody "$scratch"
    as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups env -i HOME="$scratch" PATH=/usr/bin:/bin)
    (cd "$scratch" && timeout 120 "${as_nobody[@]}" vlc -I dummy --reset-config --save-config vlc://quit) >/dev/null 2>&1
    (cd "$scratch" && timeout 300 "${as_nobody[@]}" xvfb-run -a gimp -b '(gimp-quit 0)') >/dev/null 2>&1
    # the first start's question (network access for metadata and updates) answered no, as once on OSWorld's image
    sed -i 's/^#qt-privacy-ask=1$/qt-privacy-ask=0/' "$scratch/.config/vlc/vlcrc"
    printf '# GIMP gimprc\n#\n# Your personal preferences; GIMP writes here what you change.\n' \
        > "$scratch/.config/GIMP/2.10/gimprc"
    for f in .config/vlc/vlcrc .config/GIMP/2.10/gimprc .config/GIMP/2.10/sessionrc; do
        [ -f "$scratch/$f" ] || { echo "envs/local_desktop/setup.sh: the first run made no $f" >&2; exit 1; }
    done
    rm -rf "$APP_HOME.new" && mkdir -p "$APP_HOME.new/.config"
    cp -r "$scratch/.config/vlc" "$scratch/.config/GIMP" "$APP_HOME.new/.config/"
    chmod -R a+rX,go-w "$APP_HOME.new"
    chown -R root:root "$APP_HOME.new"
    rm -rf "$APP_HOME" && mv "$APP_HOME.new" "$APP_HOME"
    rm -rf "$scratch"
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
