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


def _lo_command(name: str) -> list[str]:
    """LibreOffice's Help > Search Commands (Shift+Esc): run the menu command `name` from the keyboard."""
    return [
        "pyautogui.hotkey('shift', 'escape'); time.sleep(1)",
        f"pyautogui.write({name!r}); time.sleep(1); pyautogui.press('enter'); time.sleep(2)",
    ]


def _vlc_simple_preference(tabs: int) -> list[str]:
    """Toggle the checkbox `tabs` Tab presses into VLC's Simple Preferences (Interface page), then Save (Alt+S)."""
    return [
        "pyautogui.hotkey('ctrl', 'p'); time.sleep(3)",  # Tools > Preferences
        f"pyautogui.press('tab', presses={tabs}, interval=0.1); pyautogui.press('space')",
        "pyautogui.hotkey('alt', 's'); time.sleep(2)",  # Save writes ~/.config/vlc/vlcrc at once
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
    # -- VLC (Simple Preferences, Interface page: Tab order from the dialog's initial focus) -----------------------
    "vlc-minimal-view": _vlc_simple_preference(8),  # "Start in minimal view mode"
    "vlc-single-instance": _vlc_simple_preference(15),  # "Use only one instance when started from file manager"
    # -- GIMP (menu mnemonics; the image window has the focus) -----------------------------------------------------
    "gimp-flip-horizontal": [
        "pyautogui.hotkey('alt', 'i'); time.sleep(1)",  # Image menu
        "pyautogui.press('t'); time.sleep(1)",  # Transform
        "pyautogui.press('h'); time.sleep(2)",  # Flip Horizontally
        "pyautogui.hotkey('alt', 'f'); time.sleep(1)",  # File menu
        "pyautogui.press('w'); time.sleep(3)",  # Overwrite signpost.png (PNG, no dialog)
    ],
    "gimp-scale-image": [
        "pyautogui.hotkey('alt', 'i'); time.sleep(1)",  # Image menu
        "pyautogui.press('s'); time.sleep(3)",  # Scale Image..., the focus in Width
        "pyautogui.hotkey('ctrl', 'a'); pyautogui.write('200'); pyautogui.press('tab'); time.sleep(1)",  # chained
        "pyautogui.hotkey('alt', 's'); time.sleep(3)",  # Scale
        "pyautogui.hotkey('ctrl', 'shift', 'e'); time.sleep(3)",  # Export As..., the name's stem selected
        "pyautogui.hotkey('ctrl', 'a'); pyautogui.write('sunset-small.png\\n'); time.sleep(3)",
        "pyautogui.hotkey('alt', 'e'); time.sleep(3)",  # Export image as PNG: Export
    ],
    # -- LibreOffice Impress ---------------------------------------------------------------------------------------
    "impress-export-pdf": [
        *_lo_command("Export as PDF"),  # File > Export As > Export as PDF...
        "pyautogui.press('enter'); time.sleep(2)",  # PDF Options: Export (all slides)
        "pyautogui.write('offsite.pdf\\n'); time.sleep(3)",  # the file dialog opens in the document's folder
    ],
    "impress-presenter-console": [
        "pyautogui.hotkey('alt', 'f12'); time.sleep(3)",  # Tools > Options, the focus on LibreOffice > User Data
        "pyautogui.press('down', presses=14, interval=0.1); pyautogui.press('right')",  # LibreOffice Impress
        "pyautogui.press('down'); time.sleep(2)",  # its General page
        "pyautogui.press('tab', presses=3, interval=0.1); pyautogui.press('space')",  # Enable Presenter Console
        "pyautogui.press('enter'); time.sleep(3)",  # OK: LibreOffice writes registrymodifications.xcu
    ],
}
