"""An exported recipe stands alone in a verl-recipe checkout: the paths of verl-cua's checkout that a recipe's comments
and messages name (`envs/`, `docs/`, `tests/`, `recipes/`) become what an installed verl-cua offers instead, the
`verl-cua install-osworld` and `verl-cua setup-desktop` commands, the docs site's pages, or the recipe's own files."""

from __future__ import annotations

import re
from typing import Any

from verl_cua.resources import docs_link

# what a checkout path in a recipe's text becomes outside the checkout; {folder}, {name} filled in per export
REWRITES: list[tuple[str, Any]] = [
    (r"`?(?:PYTHON=\S+ )?bash envs/osworld/install\.sh`?", "`verl-cua install-osworld`"),
    (r"`?(?:sudo )?bash envs/local_desktop/setup\.sh`?", "`verl-cua setup-desktop`"),
    (r"`?bash recipes/quickstart\.sh`?", f"verl-cua's CPU quickstart ({docs_link('quickstart.md')})"),
    (r"\brecipes/(osworld_preflight|preflight)\.sh", r"recipe/{folder}/\1.sh"),
    (r"\brecipes/run_{name}\.sh", "recipe/{folder}/run_{name}.sh"),
    (r"\brecipes/run_(\w+)\.sh", r"verl-cua's recipe \1"),
    (r"\brecipes/README\.md", docs_link("recipes.md")),
    (r"`?\benvs/osworld/tasks`?", "verl-cua's own task set (packaged: `verl_cua.envs.osworld.tasks`)"),
    (r"(?<![\w/.])docs/([\w/-]+\.md(?:#[\w-]+)?)", lambda m: docs_link(m.group(1))),
    (r"\bCI \(tests/[^)]*\)", "verl-cua's CI"),
    (r"\s*\((?:in )?tests/[^)]*\)", ""),
    (r"(?<![\w/.])tests/[\w/.-]+", "verl-cua's tests"),
]
CHECKOUT_PATH = re.compile(r"(?<![\w/.:-])(?:envs|docs|tests|recipes)/")  # what must not be left


def standalone(text: str, name: str, folder: str) -> str:
    """`text` (a script, a README cell) with verl-cua's checkout paths rewritten for `recipe/<folder>/`."""
    for pattern, replacement in REWRITES:
        pattern = pattern.replace("{name}", re.escape(name))
        if isinstance(replacement, str):
            replacement = replacement.replace("{folder}", folder).replace("{name}", name)
        text = re.sub(pattern, replacement, text)
    return text


def checkout_paths(text: str) -> list[str]:
    """The lines of `text` that still name a path of verl-cua's checkout."""
    return [line for line in text.splitlines() if CHECKOUT_PATH.search(line)]
