"""The `verl-cua` command line: `verl-cua parse ...` (eval and view arrive with their issues)."""

from __future__ import annotations

import argparse
import json
import sys


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 1920x1080, got {text!r}") from None
    return width, height


def _parse_cmd(args: argparse.Namespace) -> int:
    from verl_cua.actions import parse_action

    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        result = parse_action(text, format=args.format, screen=args.screen, image=args.image)
    except ValueError as exc:
        print(f"verl-cua parse: {exc}", file=sys.stderr)
        return 2
    out = result.to_dict()
    if args.render and result.valid:
        out["pyautogui"] = result.to_pyautogui()
        out["computer_13"] = result.to_computer13()
    print(json.dumps(out, ensure_ascii=False, indent=2 if args.pretty else None))
    return 0 if result.valid else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for all subcommands."""
    from verl_cua.actions import available_formats

    parser = argparse.ArgumentParser(prog="verl-cua", description="Computer-use agents for verl and verl-agent.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("parse", help="parse one model output into screen actions and print them as JSON")
    p.add_argument("--format", required=True, choices=available_formats(), help="the model's output format")
    p.add_argument("--screen", required=True, type=_size, help="screen size WxH, e.g. 1920x1080")
    p.add_argument("--image", type=_size, default=None, help="size WxH of the image the model saw (resized formats)")
    p.add_argument("--render", action="store_true", help="also print the pyautogui code and computer_13 dicts")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    p.add_argument("text", help="the model output, or - to read it from stdin")
    p.set_defaults(func=_parse_cmd)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `verl-cua` console script; exit 0 valid, 1 invalid output, 2 bad arguments."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
