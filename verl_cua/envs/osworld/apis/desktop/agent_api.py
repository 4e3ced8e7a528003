"""In-desktop part of the app APIs: the `Agent` desktop tool (open an app, bring a window to the front), then the
`TOOLS` table the dispatcher reads; joined last, after uno_common.py and the app files; runs inside the desktop only."""

# ruff: noqa: F821  (ApiError, CalcTools, ... come from the files joined before this one)
import shutil

APP_COMMANDS = {  # Agent.open_app's names -> candidate commands, the first installed one runs
    "libreoffice calc": [["libreoffice", "--calc"], ["soffice", "--calc"]],
    "libreoffice writer": [["libreoffice", "--writer"], ["soffice", "--writer"]],
    "libreoffice impress": [["libreoffice", "--impress"], ["soffice", "--impress"]],
    "chrome": [["google-chrome"], ["chromium"], ["chromium-browser"]],
    "terminal": [["gnome-terminal"], ["xfce4-terminal"], ["xterm"]],
    "vlc": [["vlc"]],
    "gimp": [["gimp"]],
    "files": [["nautilus"], ["thunar"], ["pcmanfm"], ["nemo"]],
}
WINDOW_WAIT = 15.0


def _windows():
    """[(window id, title)] of the desktop's managed windows (wmctrl)."""
    out = subprocess.run(["wmctrl", "-l"], capture_output=True, text=True, timeout=10).stdout
    windows = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3:
            windows.append((parts[0], parts[3] if len(parts) == 4 else ""))
    return windows


class Agent:
    @staticmethod
    def open_app(office, app_name):
        commands = APP_COMMANDS.get(app_name)
        if commands is None:
            raise ApiError(f"unknown app {app_name!r}; valid: {', '.join(APP_COMMANDS)}")
        command = next((c for c in commands if shutil.which(c[0])), None)
        if command is None:
            raise ApiError(f"{app_name} is not installed on this desktop")
        before = {w for w, _ in _windows()}
        subprocess.Popen(
            command, cwd=os.path.expanduser("~"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + WINDOW_WAIT
        while time.monotonic() < deadline:
            new = [title for w, title in _windows() if w not in before]
            if new:
                return f"opened {app_name}: window {new[-1]!r}"
            time.sleep(0.2)
        return f"started {app_name}; no new window yet"

    @staticmethod
    def switch_window(office, title):
        windows = _windows()
        wanted = title.strip().lower()
        hits = [(w, t) for w, t in windows if wanted and wanted in t.lower()]
        if not hits:
            names = "; ".join(t for _, t in windows) or "none"
            raise ApiError(f"no window title contains {title!r}; windows: {names}")
        subprocess.run(["wmctrl", "-i", "-a", hits[0][0]], timeout=10, check=False)
        return f"switched to {hits[0][1]!r}"


TOOLS = {"Agent": Agent, "CalcTools": CalcTools, "WriterTools": WriterTools, "ImpressTools": ImpressTools}
