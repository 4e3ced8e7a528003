"""Key names: normalise every format's spelling (xdotool, UI-TARS, pyautogui) to pyautogui key names."""

from __future__ import annotations

import string

from verl_cua.actions.types import ActionError

_NAMED_KEYS = (
    "accept add alt altleft altright apps backspace browserback browserfavorites browserforward browserhome "
    "browserrefresh browsersearch browserstop capslock clear convert ctrl ctrlleft ctrlright decimal del delete "
    "divide down end enter esc escape execute final fn hangul hanguel hanja help home insert junja kana kanji "
    "launchapp1 launchapp2 launchmail launchmediaselect left modechange multiply nexttrack nonconvert numlock "
    "pagedown pageup pause pgdn pgup playpause prevtrack print printscreen prntscrn prtsc prtscr return right "
    "scrolllock select separator shift shiftleft shiftright space stop subtract tab up volumedown volumemute "
    "volumeup win winleft winright yen command option optionleft optionright"
).split()

#: Every key name pyautogui understands (single printable characters, named keys, f1-f24, num0-num9).
VALID_KEYS: frozenset[str] = frozenset(
    list(string.ascii_lowercase + string.digits + string.punctuation + " \t\n")
    + _NAMED_KEYS
    + [f"f{i}" for i in range(1, 25)]
    + [f"num{i}" for i in range(10)]
)

# Spellings used by xdotool (Claude), UI-TARS, browsers and people, mapped to pyautogui names.
_ALIASES = {
    "return": "enter",
    "kp_enter": "enter",
    "escape": "esc",
    "cmd": "win",
    "command": "win",
    "super": "win",
    "super_l": "win",
    "super_r": "win",
    "meta": "win",
    "meta_l": "win",
    "windows": "win",
    "control": "ctrl",
    "control_l": "ctrl",
    "control_r": "ctrl",
    "ctl": "ctrl",
    "shift_l": "shift",
    "shift_r": "shift",
    "alt_l": "alt",
    "alt_r": "alt",
    "option": "alt",
    "opt": "alt",
    "arrowleft": "left",
    "arrowright": "right",
    "arrowup": "up",
    "arrowdown": "down",
    "arrow_left": "left",
    "arrow_right": "right",
    "arrow_up": "up",
    "arrow_down": "down",
    "page_up": "pageup",
    "page_down": "pagedown",
    "prior": "pageup",
    "next": "pagedown",
    "pgup": "pageup",
    "pgdn": "pagedown",
    "del": "delete",
    "caps_lock": "capslock",
    "num_lock": "numlock",
    "scroll_lock": "scrolllock",
    "print": "printscreen",
    "menu": "apps",
    "iso_left_tab": "tab",
    "spacebar": "space",
    " ": "space",
    "minus": "-",
    "plus": "+",
    "equal": "=",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "apostrophe": "'",
    "grave": "`",
    "bracketleft": "[",
    "bracketright": "]",
    "\n": "enter",
    "\r": "enter",
    "\t": "tab",
}

MAX_CHORD = 6
# pyautogui knows these, but an agent pressing them takes the desktop away from the episode
DENIED_KEYS = {"sleep": "it suspends the machine"}


def normalize_key(name: object) -> str:
    """One key name in any common spelling -> its pyautogui name; unknown keys raise ActionError."""
    if not isinstance(name, str) or not name:
        raise ActionError(f"key must be a non-empty string, got {name!r:.40}")
    if len(name) == 1:
        key = name.lower()
        key = _ALIASES.get(key, key)
    else:
        low = name.strip().lower()
        key = _ALIASES.get(low, low)
        if key.startswith("kp_") and key[3:].isdigit():
            key = "num" + key[3:]
    if key in DENIED_KEYS:
        raise ActionError(f"key {key!r} is not allowed: {DENIED_KEYS[key]}")
    if key not in VALID_KEYS:
        raise ActionError(f"unknown key {name!r:.40}")
    return key


def split_chord(text: str) -> list[str]:
    """Split `"ctrl+shift+t"`, `"ctrl c"`, `"ctrl + c"`, `"Ctrl-C"` or `"ctrl++"` into key names (not normalised)."""
    text = text.strip()
    if len(text) <= 1:
        return [text] if text else []
    tokens = text.split()
    parts: list[str] = []
    for i, chunk in enumerate(tokens):
        if len(chunk) == 1:
            if chunk == "+" and 0 < i < len(tokens) - 1:
                continue  # "ctrl + c": a spaced-out separator
            parts.append(chunk)
            continue
        pieces = chunk.split("+")
        if chunk.endswith("++"):  # "ctrl++" -> the "+" key itself
            pieces = pieces[:-2] + ["+"]
        elif chunk.endswith("+"):
            raise ActionError(f"incomplete key combination {text!r:.40}")
        for piece in pieces:
            if len(piece) > 2 and "-" in piece.strip("-"):  # "Ctrl-C", "ctrl-shift-t"
                parts.extend(p for p in piece.split("-") if p)
            elif piece:
                parts.append(piece)
    return parts


def normalize_chord(keys: object) -> list[str]:
    """A chord given as a string (`"ctrl+c"`) or a list (`["Control", "c"]`) -> normalised key list."""
    if isinstance(keys, str):
        names: list = split_chord(keys)
    elif isinstance(keys, (list, tuple)):
        names = []
        for item in keys:
            names.extend(split_chord(item) if isinstance(item, str) and len(item) > 1 else [item])
    else:
        raise ActionError(f"keys must be a string or a list, got {type(keys).__name__}")
    if not names:
        raise ActionError("empty key combination")
    if len(names) > MAX_CHORD:
        raise ActionError(f"key combination of {len(names)} keys; at most {MAX_CHORD}")
    return [normalize_key(n) for n in names]
