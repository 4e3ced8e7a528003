"""A recipe script made a verl-recipe `run_<name>.sh`: the same variable block, dataset step and overrides, run from
the folder that holds `recipe/` with the exported Hydra main, on an installed verl-cua; and its settings table.

The exported config has the recipe's config group (`preset=...`) and every override folded in, so the script's
trainer call leaves out the group's line (the exported config has no groups) and adds its `+key=` overrides as
`++key=` (add or override: the key is in the exported config already)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from verl_cua.recipe_export.standalone import standalone
from verl_cua.resources import pip_install

CD_ROOT = 'cd "$(dirname "$0")/.."'
PREFLIGHT = "recipes/osworld_preflight.sh"
INTERPRETER_CHECK = "recipes/preflight.sh"  # sourced by osworld_preflight.sh
QUICKSTART = "bash recipes/quickstart.sh"
OSWORLD_CLIENT = "bash envs/osworld/install.sh"
VARIABLE = re.compile(r"^\s*([A-Z][A-Z0-9_]*)=\$\{\1:-(.*)\}$")
OVERRIDE = re.compile(r"^\s*([+~]?[a-z_][\w.@/-]*)=")  # a Hydra key: not an UPPERCASE shell variable
GROUP_LINE = re.compile(r"^\s*preset=[\w-]+ \\$")  # a trainer-call line selecting one of our config groups
ADD_LINE = re.compile(r"^(\s*)\+(?=[a-z_])")  # a trainer-call line adding a key: `+key=` (not `++key=`)
ADD_PREFIX = ":-+cua.env.kwargs}"  # osworld_preflight.sh's VM_ARGS: `${KWARGS_PREFIX:-+cua.env.kwargs}.path_to_vm=...`


@dataclass
class Setting:
    """One UPPERCASE variable of a recipe: its default(s) as written, what it means, the keys it sets."""

    name: str
    default: str
    meaning: str
    keys: list[str]


def run_script(text: str, name: str, folder: str, install: str) -> str:
    """`text` (a recipes/run_<name>.sh) adapted to `recipe/<folder>/`: it changes to the folder that holds `recipe/`
    and runs `python3 -m recipe.<folder>.main_<name>`; checkout-only hints name `install` instead."""
    if CD_ROOT not in text or "-m verl_cua.main \\" not in text:
        raise ValueError(f"run_{name}.sh lacks `{CD_ROOT}` or a `-m verl_cua.main \\` line")
    out = text.replace(CD_ROOT, 'cd "$(dirname "$0")/../.."  # the folder that holds recipe/ (verl\'s checkout)')
    out = out.replace("-m verl_cua.main \\", f"-m recipe.{folder}.main_{name} \\")
    out = out.replace(PREFLIGHT, f"recipe/{folder}/osworld_preflight.sh")
    out = out.replace(f"recipes/run_{name}.sh", f"recipe/{folder}/run_{name}.sh")
    lines = [
        line if line.lstrip().startswith("#") else line.replace(QUICKSTART, install)
        for line in _folded(out.splitlines(), f"-m recipe.{folder}.main_{name} \\")
    ]
    header = [
        f"# Exported from verl-cua's recipe {name} by `verl-cua recipe export {name}` (README.md here).",
        f"# Needs: {install}. Run from anywhere: it changes to the folder that holds recipe/{folder}/.",
    ]
    return standalone("\n".join([lines[0], *header, *lines[1:]]) + "\n", name, folder)


def preflight_script(text: str, folder: str, name: str) -> str:
    """recipes/osworld_preflight.sh or preflight.sh in `recipe/<folder>/`: it sources its sibling there, and its
    install hints name the installed package's commands rather than our checkout's."""
    into = 'PYTHON=$(command -v "${PYTHON}" || echo "${PYTHON}") ' + OSWORLD_CLIENT  # into the recipe's interpreter
    out = text.replace(into, '$(command -v "${PYTHON}" || echo "${PYTHON}") -m verl_cua.cli install-osworld')
    out = out.replace(OSWORLD_CLIENT, "verl-cua install-osworld")
    out = out.replace(f"source {INTERPRETER_CHECK}", f"source recipe/{folder}/preflight.sh")
    out = out.replace(ADD_PREFIX, ADD_PREFIX.replace(":-+", ":-++"))  # the exported config holds path_to_vm already
    out = out.replace("-m pip install -e '.[verl]'", f"-m {pip_install('verl')}")
    return standalone(out, name, folder)


def _folded(lines: list[str], head: str) -> list[str]:
    """The trainer call (from the line ending in `head` to its last continued line) without its config-group lines
    and with `+key=` made `++key=`; the other lines as they are."""
    out, inside = [], False
    for line in lines:
        if inside:
            if GROUP_LINE.match(line):
                continue
            out.append(ADD_LINE.sub(r"\1++", line))
            inside = line.endswith("\\")
        else:
            out.append(line)
            inside = line.endswith(head)
    return out


def exported_overrides(overrides: list[str]) -> list[str]:
    """What the exported script hands its main for the recipe's `overrides`: no `preset=...`, `+key=` as `++key=`."""
    return [f"+{o}" if o.startswith("+") and not o.startswith("++") else o
            for o in overrides if not o.startswith("preset=")]  # fmt: skip


def settings(text: str) -> list[Setting]:
    """The recipe's UPPERCASE variables in order: default (both branches' when an `if` sets it twice), the comment
    beside it and under it, and the Hydra keys of the trainer-call lines that use it."""
    found: dict[str, Setting] = {}
    last: Setting | None = None
    lines = text.splitlines()
    for line in lines:
        code, _, comment = line.partition(" #")
        match = VARIABLE.match(code.rstrip())
        if match:
            name, default = match.groups()
            last = found.get(name)
            if last is None:
                last = found[name] = Setting(name, default, comment.strip(), [])
            else:
                last.default += f" or {default}"
                last.meaning = "; ".join(m for m in (last.meaning, comment.strip()) if m)
        elif last is not None and line.startswith(" ") and line.strip().startswith("#"):
            last.meaning = f"{last.meaning} {line.strip().lstrip('#').strip()}".strip()
        else:
            last = None
    for line in lines:
        match = OVERRIDE.match(line)
        if match:
            for name in re.findall(r"\$\{([A-Z][A-Z0-9_]*)\}", line):
                if name in found and match.group(1) not in found[name].keys:
                    found[name].keys.append(match.group(1).lstrip("+~"))
    return list(found.values())
