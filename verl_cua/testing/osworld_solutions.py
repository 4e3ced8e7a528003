"""Scripted keyboard-first solutions of our OSWorld task set (envs/osworld/tasks): model outputs, one per step."""

from __future__ import annotations

# Ctrl+S on a docx/xlsx opens LibreOffice's "Keep current format" dialog; Enter picks the default, the current format.
SAVE_KEEP_FORMAT: list[str] = [
    "pyautogui.hotkey('ctrl', 's')",
    "time.sleep(1); pyautogui.press('enter'); time.sleep(1)",
]


def _save_as(path: str) -> list[str]:
    """Save As (Ctrl+Shift+S) under `path`; the extension picks the format, Enter keeps it."""
    return [
        "pyautogui.hotkey('ctrl', 'shift', 's')",
        f"time.sleep(1); pyautogui.write({path + chr(10)!r})",
        "time.sleep(1); pyautogui.press('enter'); time.sleep(1)",
    ]


SOLUTIONS: dict[str, list[str]] = {
    # -- terminal / files (the task launches an xterm, which has the focus) ----------------------------------------
    "term-create-file": ["pyautogui.write('echo hello world > ~/hello.txt\\n'); time.sleep(1)"],
    "term-count-rows": ["pyautogui.write('tail -n +2 ~/cities.csv | wc -l > ~/count.txt\\n'); time.sleep(1)"],
    "files-rename-file": ["pyautogui.write('mv ~/Documents/draft.txt ~/Documents/plan-final.txt\\n'); time.sleep(1)"],
    "files-make-dirs": ["pyautogui.write('mkdir -p ~/projects/website/css ~/projects/website/js\\n'); time.sleep(1)"],
    "files-move-images": [
        "pyautogui.write('mkdir -p ~/Pictures && mv ~/Downloads/*.jpg ~/Downloads/*.png ~/Pictures/\\n'); time.sleep(1)"
    ],
    # -- LibreOffice Calc ------------------------------------------------------------------------------------------
    "calc-sum-column": [
        "pyautogui.hotkey('ctrl', 'home'); pyautogui.press('down', presses=6); pyautogui.press('right')",
        "pyautogui.write('=SUM(B2:B6)\\n')",
        *SAVE_KEEP_FORMAT,
    ],
    "calc-rename-sheet": [
        "pyautogui.hotkey('alt', 's')",  # Sheet menu
        "pyautogui.press('h')",  # Rename S_heet...
        "time.sleep(1); pyautogui.hotkey('ctrl', 'a'); pyautogui.write('Q1 Budget\\n')",
        *SAVE_KEEP_FORMAT,
    ],
    "calc-sort-rows": [
        "pyautogui.hotkey('ctrl', 'home'); pyautogui.press('right', presses=2)",  # C1, the Salary column
        "pyautogui.hotkey('alt', 'd')",  # Data menu
        "pyautogui.press('n')",  # Sort Desce_nding (detects the header row)
        *SAVE_KEEP_FORMAT,
    ],
    "calc-bold-header": [
        "pyautogui.hotkey('ctrl', 'home'); pyautogui.hotkey('ctrl', 'shift', 'right')",  # A1:D1
        "pyautogui.hotkey('ctrl', 'b')",
        *SAVE_KEEP_FORMAT,
    ],
    "calc-new-workbook": [
        "pyautogui.write('Fruit\\tQty\\nApple\\t10\\nPear\\t4\\n')",
        *_save_as("~/Documents/inventory.xlsx"),
    ],
    # -- LibreOffice Writer ----------------------------------------------------------------------------------------
    "writer-center-title": [
        "pyautogui.hotkey('ctrl', 'home')",
        "pyautogui.hotkey('ctrl', 'e')",
        *SAVE_KEEP_FORMAT,
    ],
    "writer-page-break": [
        "pyautogui.hotkey('ctrl', 'home'); pyautogui.hotkey('ctrl', 'down'); pyautogui.hotkey('ctrl', 'down')",
        "pyautogui.hotkey('ctrl', 'enter')",  # manual page break before "Action Items"
        *SAVE_KEEP_FORMAT,
    ],
    "writer-font-name": [
        "pyautogui.hotkey('ctrl', 'a')",
        "pyautogui.hotkey('alt', 'o')",  # Format menu
        "pyautogui.press('down', presses=5); pyautogui.press('enter')",  # Character...
        "time.sleep(1); pyautogui.press('tab'); pyautogui.hotkey('ctrl', 'a'); pyautogui.write('Liberation Mono')",
        "pyautogui.press('enter')",
        *SAVE_KEEP_FORMAT,
    ],
    "writer-type-paragraph": [
        "pyautogui.write('The quick brown fox jumps over the lazy dog.')",
        *_save_as("~/Documents/pangram.docx"),
    ],
    "writer-replace-word": [
        "pyautogui.hotkey('ctrl', 'h')",  # Find and Replace, focus in Find
        "time.sleep(1); pyautogui.write('colour'); pyautogui.press('tab', presses=4); pyautogui.write('color')",
        "pyautogui.press('tab', presses=6); pyautogui.press('space')",  # Replace All
        "pyautogui.press('escape')",
        *SAVE_KEEP_FORMAT,
    ],
    # -- Chromium --------------------------------------------------------------------------------------------------
    "chrome-open-new-tab": [
        "pyautogui.hotkey('ctrl', 't')",
        "pyautogui.hotkey('ctrl', 'l'); "
        "pyautogui.write('file:///tmp/verl-cua-pages/chrome-open-new-tab/handbook.html\\n'); time.sleep(1)",
    ],
    "chrome-follow-link": ["pyautogui.press('tab'); pyautogui.press('enter'); time.sleep(1)"],  # first link: Pricing
    "chrome-search-form": ["pyautogui.write('astronomy\\n'); time.sleep(1)"],  # the search box has autofocus
    "chrome-close-tab": ["pyautogui.hotkey('ctrl', '2')", "pyautogui.hotkey('ctrl', 'w'); time.sleep(1)"],
}
