"""Where the files a desktop, a task set or a recipe needs live: inside the package (`verl_cua/_envs`,
`verl_cua/_recipes`), so an installed wheel has them; in a checkout those two are links to `envs/` and `recipes/`.
And the one rule for install hints: the wheel's command, plus the checkout's own where we run from one."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
DIST = "verl-cua"
DOCS_URL = "https://github.com/verl-cua/verl-cua/tree/main/docs"  # pyproject's Documentation (a placeholder home)
OSWORLD_CLIENT_HINT = "verl-cua install-osworld"  # OSWorld's client (desktop-env, --no-deps) and the osworld extra
# the packages desktop-env's metrics import beyond the osworld extra (python-pptx, scikit-image, PyMuPDF, ...)
OSWORLD_EVALUATORS_HINT = "verl-cua install-osworld --evaluators (the osworld-evaluators extra, pinned beside verl)"
DESKTOP_HINT = "verl-cua setup-desktop"  # the local desktop's system side (as root)
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
    pins = [line.split("#")[0].strip() for line in (root / CONSTRAINTS).read_text().splitlines()]
    constraints, where = (CONSTRAINTS, ".") if here else (root / CONSTRAINTS, root)
    return f"pip install -c {constraints} {' '.join(p for p in pins if p)} -e '{where}[{','.join(extras)}]'"


def install_hint(*extras: str) -> str:
    """The command that installs verl-cua's `extras`: the wheel's form, which is right in a checkout too (pip keeps
    the editable install and adds the extras' packages); in a checkout with pinned torch builds
    (tests/constraints.txt), the `verl` extra's pinned editable form follows."""
    hint = pip_install(*extras)
    root = checkout_root()
    if root is not None and "verl" in extras and (root / CONSTRAINTS).is_file():
        hint += f" (in this checkout: {_checkout_install(root, extras)})"
    return hint


def docs_link(page: str) -> str:
    """The address of a docs page (`gpu.md`, `preflight.md#anchor`) on the project's docs site."""
    return f"{DOCS_URL}/{page}"
