"""Key names from every format normalise to pyautogui names; unknown keys are rejected."""

import pytest

from verl_cua.actions.keys import VALID_KEYS, normalize_chord, normalize_key
from verl_cua.actions.types import ActionError


@pytest.mark.parametrize(
    "name,expected",
    [
        ("Return", "enter"),
        ("Escape", "esc"),
        ("cmd", "win"),
        ("super", "win"),
        ("meta", "win"),
        ("control", "ctrl"),
        ("Control_L", "ctrl"),
        ("BackSpace", "backspace"),
        ("Page_Up", "pageup"),
        ("KP_Enter", "enter"),
        ("KP_5", "num5"),
        ("ArrowLeft", "left"),
        ("A", "a"),
        (" ", "space"),
        ("F5", "f5"),
        ("Tab", "tab"),
        ("Delete", "delete"),
        ("+", "+"),
        ("minus", "-"),
    ],
)
def test_aliases(name, expected):
    assert normalize_key(name) == expected
    assert expected in VALID_KEYS


@pytest.mark.parametrize(
    "chord,expected",
    [
        ("ctrl+s", ["ctrl", "s"]),
        ("ctrl c", ["ctrl", "c"]),
        ("ctrl + shift + t", ["ctrl", "shift", "t"]),
        ("Ctrl-C", ["ctrl", "c"]),
        ("ctrl++", ["ctrl", "+"]),
        (["Control", "Shift", "Tab"], ["ctrl", "shift", "tab"]),
        (["ctrl+alt", "Delete"], ["ctrl", "alt", "delete"]),
        ("-", ["-"]),
    ],
)
def test_chords(chord, expected):
    assert normalize_chord(chord) == expected


@pytest.mark.parametrize("bad", ["hyperdrive", "", "ctrl+", None, 5, ["ctrl", 7], "a+b+c+d+e+f+g"])
def test_bad_keys_raise_action_error(bad):
    with pytest.raises(ActionError):
        normalize_chord(bad)
