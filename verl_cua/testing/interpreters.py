"""Interpreters for tests of the recipes' interpreter check: this Python with one package made unimportable."""

from __future__ import annotations

import sys
from pathlib import Path


def python_without(module: str, folder: Path) -> Path:
    """An executable in `folder` that runs this Python, on which `import module` fails (a shadowing package raises
    ImportError), as on an interpreter where it was never installed."""
    shadow = folder / "shadow" / module
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text(f"raise ImportError('{module} is not installed in this interpreter')\n")
    exe = folder / "bin" / f"python-without-{module}"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f'#!/bin/sh\nPYTHONPATH={shadow.parent} exec "{sys.executable}" "$@"\n')
    exe.chmod(0o755)
    return exe
