"""What OSWorld's own tasks assume of their desktop, on the real local desktop: a failed setup step fails the reset
(never a silent empty screen), reset waits for the launched apps' windows, the accessibility tree is valid XML that
OSWorld's own getters and metrics read (also after a revert), Chromium stands in for Google Chrome (profile path,
`pkill chrome`, AT-SPI name), `sudo` grants nothing, ctrl+alt+t opens a terminal OSWorld's getter reads, the
session bus is where tasks look for it, and the defaults of OSWorld's image (screen lock off, volume below max)."""

import json
import time

import pytest
from lxml import etree

from verl_cua.envs import InfraFailure, make_env

XTERM_LATE = ["sh", "-c", "sleep 1.5; exec xterm -geometry 80x20+40+40"]  # its window comes 1.5 s after the launch


def _task(tid: str, config: list, evaluator: dict | None = None) -> dict:
    return {
        "id": tid,
        "instruction": "Do nothing.",
        "config": config,
        "evaluator": evaluator
        or {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"}, "expected": {}},
    }


@pytest.fixture(scope="module")
def env(local_desktop):
    env = make_env("osworld", provider="local", action_format="pyautogui", pause=0.3, settle_timeout=20)
    yield env
    env.close()


def _sh(env, script: str) -> str:
    return env.desktop_env.controller.run_bash_script(script, timeout=60)["output"]


@pytest.mark.parametrize(
    "step, named",
    [
        ({"type": "launch", "parameters": {"command": ["no-such-app-verl-cua"]}}, "no-such-app-verl-cua"),
        ({"type": "launch", "parameters": {"command": "no-such-app-verl-cua --x", "shell": True}}, "exited with"),
        ({"type": "open", "parameters": {"path": "/home/user/missing.ods"}}, "missing.ods"),
        ({"type": "execute", "parameters": {"command": "no-such-tool-verl-cua -a", "shell": True}}, "not found"),
    ],
)
def test_a_failed_setup_step_fails_the_reset_in_one_line(env, step, named):
    with pytest.raises(InfraFailure, match="(setup|reset) of broken failed") as info:
        env.reset(_task("broken", [step]))
    assert named in str(info.value) and "\n" not in str(info.value)


def test_a_failed_setup_is_not_blamed_on_the_next_task(env):
    missing = {"type": "open", "parameters": {"path": "/home/user/missing.ods"}}  # OSWorld's setup raises here
    with pytest.raises(InfraFailure, match="missing.ods"):
        env.reset(_task("broken", [missing]))
    env.reset(_task("fine", []))  # no revert happens (the failed setup never marked the desktop used)


def test_reset_returns_once_the_launched_app_shows_its_window(env):
    started = time.monotonic()
    late = {"type": "launch", "parameters": {"command": XTERM_LATE}}
    activate = {"type": "activate_window", "parameters": {"window_name": "xterm"}}  # waits for the window too
    env.reset(_task("late-window", [late, activate]))
    assert time.monotonic() - started >= 1.5
    assert "xterm" in _sh(env, "wmctrl -lx").lower()  # up when reset returned, not some time later


def test_a_windowless_launch_does_not_hold_the_reset(env):
    started = time.monotonic()
    env.reset(_task("daemon", [{"type": "launch", "parameters": {"command": ["sleep", "60"]}}]))
    assert time.monotonic() - started < 10  # a few seconds' grace, not the 20 s settle timeout


def test_accessibility_tree_is_valid_xml_that_osworlds_metric_reads_after_every_revert(env):
    from desktop_env.evaluators.getters import get_accessibility_tree
    from desktop_env.evaluators.metrics import check_accessibility_tree

    terminal = _task("a11y", [{"type": "launch", "parameters": {"command": ["gnome-terminal"]}}])
    rules = [{"selectors": ["application[name*=erminal] terminal[st|focusable=true]"]}]
    assert "elements" not in env.reset(terminal).extra  # the default `screenshot` shows no element table
    for _ in range(2):  # the second episode runs on a new session bus: the tree must not come back empty
        env.step("pyautogui.press('shift')")  # the desktop is used: the next reset reverts it
        env.reset(terminal)
        tree = get_accessibility_tree(env.desktop_env, {})
        root = etree.fromstring(tree.encode())  # raises on invalid XML (state names used to be enum reprs)
        assert len(root) >= 1
        assert check_accessibility_tree(tree, rules) == 1.0


def test_chromium_answers_as_google_chrome(env, tmp_path):
    from desktop_env.evaluators.getters.chrome import get_active_url_from_accessTree

    page = "/tmp/verl-cua-compat/page.html"
    env.reset(
        _task(
            "chrome-compat",
            [
                {
                    "type": "execute",
                    "parameters": {
                        "command": f"mkdir -p /tmp/verl-cua-compat && echo '<title>Compat</title>hi' > {page}",
                        "shell": True,
                    },
                },  # fmt: skip
                {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
                {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
            ],
        )
    )
    env.desktop_env.setup_controller._chrome_open_tabs_setup([f"file://{page}"])
    url = None
    for _ in range(40):  # the address bar shows the page once it has loaded
        url = get_active_url_from_accessTree(env.desktop_env, {"goto_prefix": ""})
        if url and "page.html" in url:
            break
        time.sleep(0.5)
    assert url and url.endswith("verl-cua-compat/page.html")
    profiles = "ls -d ~/.config/*/Default 2>/dev/null"  # the profile where OSWorld's getters read it, none elsewhere
    assert _sh(env, profiles) == "/home/user/.config/google-chrome/Default\n"
    assert _sh(env, "pgrep -c chromium").strip() != "0"
    _sh(env, "pkill chrome")  # OSWorld's way to restart the browser
    deadline = time.monotonic() + 20
    while _sh(env, "/usr/bin/pgrep -c chromium").strip() != "0" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sh(env, "/usr/bin/pgrep -c chromium").strip() == "0"


def test_our_data_delete_getter_reads_the_clear_on_exit_setting_not_the_dict(env):
    from desktop_env.evaluators.getters import get_data_delete_automacally

    env.reset(_task("prefs", []))
    prefs = "~/.config/google-chrome/Default/Preferences"
    fresh = {"profile": {"default_content_setting_values": {"has_migrated_local_network_access": True}}}
    _sh(env, f"mkdir -p ~/.config/google-chrome/Default && echo '{json.dumps(fresh)}' > {prefs}")
    assert get_data_delete_automacally(env.desktop_env, {}) == "false"  # upstream said "true" here
    fresh["profile"]["default_content_setting_values"]["cookies"] = 4
    _sh(env, f"echo '{json.dumps(fresh)}' > {prefs}")
    assert get_data_delete_automacally(env.desktop_env, {}) == "true"


def test_sudo_runs_the_command_as_the_desktop_user_and_grants_nothing(env):
    env.reset(_task("sudo", []))
    me = _sh(env, "id -u").strip()
    assert _sh(env, "echo password | sudo -S id -u").strip() == me
    assert _sh(env, "sudo -u root id -u").strip() == me
    assert "denied" in _sh(env, "sudo cat /etc/shadow 2>&1; sudo touch /usr/verl-cua-probe 2>&1")
    assert _sh(env, "test -e /usr/verl-cua-probe && echo exists || echo absent") == "absent\n"


def test_ctrl_alt_t_opens_a_terminal_osworlds_getter_reads(env):
    from desktop_env.evaluators.getters import get_vm_terminal_output

    env.reset(_task("terminal", []))
    env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
    output = None
    for _ in range(40):
        env.step("pyautogui.typewrite('echo compat-$((6*7))\\n')") if output == "" else None
        output = get_vm_terminal_output(env.desktop_env, {})
        if output and "compat-42" in output:
            break
        output = output if output is None else ""
        time.sleep(0.5)
    assert output and "compat-42" in output


def test_gsettings_work_on_the_bus_tasks_name_and_the_image_defaults_hold(env):
    env.reset(_task("settings", []))
    get = "gsettings get org.gnome.desktop.screensaver lock-enabled"
    assert _sh(env, get) == "false\n"  # OSWorld's image: no screen lock
    bus = "export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'\n"
    _sh(env, bus + "gsettings set org.gnome.shell favorite-apps \"['thunderbird.desktop', 'vim.desktop']\"")
    assert _sh(env, bus + "gsettings get org.gnome.shell favorite-apps") == "['thunderbird.desktop', 'vim.desktop']\n"
    _sh(env, "gsettings set org.gnome.desktop.screensaver lock-enabled true")
    env.step("pyautogui.press('shift')")
    env.reset(_task("settings", []))
    assert _sh(env, get) == "false\n"  # the revert restored HOME's settings
    volume = "pulseaudio --start\npactl list sinks | grep '^[[:space:]]Volume:' | head -n 1 | awk '{print $5}'"
    assert _sh(env, volume).strip() == "50%"  # below the maximum, as "turn the volume up" tasks assume


def test_a_missing_app_is_named_with_its_package(monkeypatch):
    from verl_cua.envs.osworld import local_desktop

    real = local_desktop.shutil.which
    monkeypatch.setattr(local_desktop.shutil, "which", lambda name: None if name == "vlc" else real(name))
    assert "vlc" in local_desktop.missing_apps()
    failure = "launch: FileNotFoundError: [Errno 2] No such file or directory: 'vlc'"  # as the server says it
    assert local_desktop.install_hint(failure) == (
        f" (not installed: apt-get install -y vlc, or {local_desktop.SETUP_HINT} as root)"
    )
    assert local_desktop.install_hint("launch gimp: exited with status 1") == ""  # installed: no hint
    assert local_desktop.install_hint("launch vlc-helper: exited with status 1") == ""  # another program


def test_a_module_planted_in_home_cannot_forge_the_accessibility_tree(env):
    from desktop_env.evaluators.getters import get_accessibility_tree

    env.reset(_task("forge", [{"type": "launch", "parameters": {"command": ["gnome-terminal"]}}]))
    planted = _sh(
        env,
        'd=$(python3 -c "import site; print(site.getusersitepackages())") && mkdir -p "$d" && cd "$d" && '
        "echo 'raise SystemExit(0)' > pyatspi.py && echo 'import os; open(\"/tmp/forged\", \"w\")' > forge.pth && "
        "ls",
    )
    assert "pyatspi.py" in planted and "forge.pth" in planted  # the agent's own files, in its own HOME
    tree = get_accessibility_tree(env.desktop_env, {})
    assert "terminal" in tree and etree.fromstring(tree.encode()) is not None  # the real AT-SPI, not the plant
    assert _sh(env, "ls /tmp/forged 2>&1").startswith("ls: ")  # and the .pth never ran
