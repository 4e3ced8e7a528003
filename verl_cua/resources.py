"""Where the files a desktop, a task set or a recipe needs live: inside the package (`verl_cua/_envs`,
`verl_cua/_recipes`), so an installed wheel has them; in a checkout those two are links to `envs/` and `recipes/`.
And the one rule for install hints: the wheel's command, plus the checkout's own where we run from one."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
DIST = "verl-cua"
DOCS_URL = "https://github.com/verl-cua/verl-cua/tree/main/docs"  # pyproject's Documentation (a placeholder home)
CONSTRAINTS = "tests/constraints.txt"  # a checkout's pins for the torch builds on its dev machines (verl extra only)


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


def pip_install(*extras: str) -> str:
    """`pip install 'verl-cua[a,b]'`: what installs these extras from PyPI or a wheel, anywhere."""
    return f"pip install '{DIST}[{','.join(extras)}]'" if extras else f"pip install {DIST}"


def _checkout_install(root: Path, extras: tuple[str, ...]) -> str:
    here = Path.cwd().resolve() == root
    where = "." if here else str(root)
    command = "pip install"
    constraints = root / CONSTRAINTS
    if "verl" in extras and constraints.is_file():  # the torch builds the checkout's machines keep on disk
        pins = [line.split("#")[0].strip() for line in constraints.read_text().splitlines()]
        command += f" -c {CONSTRAINTS if here else constraints} {' '.join(p for p in pins if p)}"
    return f"{command} -e '{where}[{','.join(extras)}]'"


def install_hint(*extras: str) -> str:
    """The command that installs verl-cua's `extras`, right for where this package runs: the wheel's form, followed
    in a source checkout by the checkout's editable form (`-e`, with its torch pins for the `verl` extra)."""
    hint = pip_install(*extras)
    root = checkout_root()
    if root is not None and extras:
        hint += f" (in this checkout: {_checkout_install(root, extras)})"
    return hint


def docs_link(page: str) -> str:
    """The address of a docs page (`gpu.md`, `preflight.md#anchor`) on the project's docs site."""
    return f"{DOCS_URL}/{page}"
