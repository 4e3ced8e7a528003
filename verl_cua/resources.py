"""Where the files a desktop, a task set or a recipe needs live: inside the package (`verl_cua/_envs`,
`verl_cua/_recipes`), so an installed wheel has them; in a checkout those two are links to `envs/` and `recipes/`."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def envs_dir() -> Path:
    """The env files: OSWorld's own task set (`osworld/tasks`), the local desktop's image (`local_desktop/`)."""
    return (PACKAGE / "_envs").resolve()


def recipes_dir() -> Path:
    """The recipe scripts (`run_*.sh`, `quickstart.sh`, `verl_agent/`)."""
    return (PACKAGE / "_recipes").resolve()


def checkout_root() -> Path | None:
    """The source checkout this package runs from (it has pyproject.toml and tests/), or None for an installed wheel."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "tests").is_dir() else None
