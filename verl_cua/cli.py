"""The `verl-cua` command line: `parse` one output, `eval` a model on tasks, `view` and `compare` runs, `serve` a
checkpoint on CPU, `doctor` a machine and a recipe before training, `sft-data`: trajectories -> SFT rows,
`osworld-check`: how much of OSWorld's own benchmark runs on the local desktop, `probe-boots`: how a host boots
many docker desktops, `list`: the registered names."""

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


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _eval_cmd(args: argparse.Namespace) -> int:
    from verl_cua.envs import EnvUsageError
    from verl_cua.eval import EvalConfig, RunAborted, print_summary, run_eval

    config = EvalConfig(**{k: v for k, v in vars(args).items() if k not in ("command", "func", "progress")})
    try:
        summary = run_eval(config, progress=args.progress)
    except (ValueError, EnvUsageError, ImportError, FileNotFoundError) as exc:
        print(f"verl-cua eval: {exc}", file=sys.stderr)
        return 2
    except RunAborted as exc:
        print(f"verl-cua eval: stopped: {exc}", file=sys.stderr)
        return 3
    print_summary(summary, title=f"verl-cua eval: {config.model} ({config.format}) on {config.env}")
    print(f"results: {config.out} (summary.json, <domain>/<task>/trajectory.jsonl); view: verl-cua view {config.out}")
    if summary["infra_failures"]:
        print(f"verl-cua eval: {summary['infra_failures']} tasks ended in infra failures; rerun to retry them",
              file=sys.stderr)  # fmt: skip
        return 4
    return 0


def _view_cmd(args: argparse.Namespace) -> int:
    from verl_cua.viewer import build_report

    try:
        path = build_report(args.runs, args.out, embed=args.embed, title=args.title)
    except (ValueError, FileNotFoundError) as exc:
        print(f"verl-cua view: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


def _compare_cmd(args: argparse.Namespace) -> int:
    from verl_cua.viewer.compare import compare_dirs, compare_runs

    try:
        if args.json:
            print(json.dumps(compare_runs(args.a, args.b), indent=1))
        else:
            compare_dirs(args.a, args.b)
    except (ValueError, FileNotFoundError) as exc:
        print(f"verl-cua compare: {exc}", file=sys.stderr)
        return 2
    return 0


def _serve_cmd(args: argparse.Namespace) -> int:
    from pathlib import Path

    from verl_cua.main import missing_modules
    from verl_cua.resources import install_hint

    missing = missing_modules(("torch", "torchvision", "verl"))
    if missing:
        print(f"verl-cua serve: needs {', '.join(missing)}; install with: {install_hint('verl')}", file=sys.stderr)
        return 2
    if not (Path(args.model_dir) / "config.json").is_file():
        print(f"verl-cua serve: {args.model_dir} is not a Hugging Face model folder (no config.json)", file=sys.stderr)
        return 2
    import torch

    from verl_cua.serve import ChatModel, ChatServer

    if args.threads:
        torch.set_num_threads(args.threads)
    model = ChatModel(args.model_dir, name=args.served_model_name, max_model_len=args.max_model_len)
    try:
        server = ChatServer(model, args.host, args.port)
    except OSError as exc:
        print(f"verl-cua serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    try:  # the ready line inside: a Ctrl-C right after it is a stop of the server it names
        print(f"verl-cua serve: {model.name} at {server.url}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        from verl_cua.exits import INTERRUPTED, interrupted

        interrupted()
        print(f"verl-cua serve: stopped serving {model.name} at {server.url} (Ctrl-C); it kept nothing; rerun the "
              "same command to serve again", file=sys.stderr)  # fmt: skip
        return INTERRUPTED
    finally:
        server.shutdown()
    return 0


def _add_serve(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="a checkpoint behind an OpenAI-compatible endpoint on this CPU, for verl-cua eval (GPU: vllm serve)",
        description="POST /v1/chat/completions (text and data:image parts), GET /v1/models. Generation is the hf "
        "rollout's (transformers on CPU), one request at a time. Prints the base URL once it listens.",
    )
    p.add_argument("model_dir", help="a Hugging Face model folder (e.g. verl's model merger output)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    p.add_argument("--port", type=int, default=8000, help="0: any free port (the printed URL names it)")
    p.add_argument("--served-model-name", default=None, help="the name requests use (default: MODEL_DIR as given)")
    p.add_argument("--max-model-len", type=int, default=None, help="context length cap (default: the model's)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.set_defaults(func=_serve_cmd)


def _add_eval(sub) -> None:
    from verl_cua.actions import FORMAT_REGISTRY
    from verl_cua.envs import ENV_REGISTRY
    from verl_cua.envs.observation import DEFAULT_BUDGET
    from verl_cua.envs.spec import OBSERVATIONS
    from verl_cua.eval.apis import API_REGISTRY

    p = sub.add_parser(
        "eval",
        help="run a model behind a chat API (vLLM, SGLang, OpenAI-compatible, Anthropic) on tasks; resumable",
        description="Each task's trajectory and screenshots go to OUT/<domain>/<task>/; summary.json and a table at "
        "the end. A rerun skips finished tasks; infra failures (desktop or endpoint down) are retried and counted "
        "apart from model failures.",
    )
    p.add_argument("--env", required=True, choices=ENV_REGISTRY.valid())
    p.add_argument("--provider", default=None, help="OSWorld desktop provider: local (default), docker, aws, ...")
    p.add_argument(
        "--tasks",
        required=True,
        help="comma-separated: OSWorld task JSONs, folders, test_all.json-style meta files or task names; "
        "MiniWoB names (name@seed for one seed)",
    )
    p.add_argument("--seeds", default="0", help="MiniWoB seeds for each task: 0-9 or 1,2,3")
    p.add_argument("--model", required=True, help="the model name the endpoint serves")
    p.add_argument("--base-url", default=None, help="default: http://localhost:8000/v1 (openai), Anthropic's API")
    p.add_argument("--format", required=True, choices=sorted(FORMAT_REGISTRY), help="the model's action format")
    p.add_argument("--provider-api", default="openai", choices=sorted(API_REGISTRY), help="the endpoint's chat API")
    p.add_argument("--api-key-env", default=None,
                   help="environment variable holding the API key (default: the API's usual one)")  # fmt: skip
    p.add_argument("--workers", type=int, default=1, help="envs (and episodes) in parallel")
    p.add_argument("--max-steps", type=int, default=15, help="model turns an episode may take")
    p.add_argument("--history-images", type=int, default=3, help="screenshots kept in the conversation")
    p.add_argument("--max-pixels", type=int, default=None,
                   help="cap on the screenshot sent (qwen formats, claude; default: the format's own)")  # fmt: skip
    p.add_argument(
        "--observation",
        default="screenshot",
        choices=OBSERVATIONS,
        help="what the model reads each turn (OSWorld's types; cua.env.observation in training)",
    )
    p.add_argument("--observation-tokens", type=int, default=DEFAULT_BUDGET,
                   help="tokens of element table or marks a turn may show")  # fmt: skip
    p.add_argument("--retries", type=int, default=2, help="extra attempts for an episode that hit an infra failure")
    p.add_argument("--max-tokens", type=int, default=1024, help="generation budget per step")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per model request")
    p.add_argument(
        "--endpoint-wait",
        type=float,
        default=30.0,
        help="seconds the endpoint may take to answer at all (a server still starting) before the run stops, before "
        "any desktop starts; 0: no check",
    )
    p.add_argument("--success-threshold", type=float, default=1.0, help="score counted as a success")
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON passed to make_env (provider options)")
    p.add_argument("--extra-body", type=_json_object, default={}, help="JSON merged into every request body")
    p.add_argument("--name", default=None, help="the run's name in reports (default: OUT's name)")
    p.add_argument("--out", required=True, help="the run directory")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    _add_planner_options(p)
    p.set_defaults(func=_eval_cmd)


def _add_planner_options(p) -> None:
    from verl_cua.actions import FORMAT_REGISTRY
    from verl_cua.actions.planner import PLANNER_SPECS
    from verl_cua.eval.executor import EXECUTORS

    g = p.add_argument_group(
        "planner mode (CODA)",
        "--model is the planner: it writes a Thought, the executor turns it into the action; --format sizes the "
        "screenshots both see; CODA's context shows two of them (not --history-images); docs/coda.md",
    )
    g.add_argument("--planner", default=None, choices=PLANNER_SPECS.valid(),
                   help="the planner spec; the model's own action is discarded unless it is an ANS answer")  # fmt: skip
    g.add_argument("--executor-kind", default="openai", choices=EXECUTORS.valid(),
                   help="openai: an OpenAI-compatible endpoint; standin_grounding: a CPU test stand-in")  # fmt: skip
    g.add_argument("--executor-base-url", default=None, help="the executor's endpoint (default: localhost:8000/v1)")
    g.add_argument("--executor-model", default=None, help="the model the executor endpoint serves (default: UI-TARS)")
    g.add_argument("--executor-format", default="uitars", choices=sorted(FORMAT_REGISTRY),
                   help="the executor's action format, its replies are parsed with")  # fmt: skip
    g.add_argument("--executor-timeout", type=float, default=None, help="seconds per executor attempt (default: 60)")
    g.add_argument("--executor-retries", type=int, default=None, help="executor retries per call (default: 3)")
    g.add_argument("--executor-api-key-env", default=None,
                   help="environment variable holding the executor's API key (default: none)")  # fmt: skip
    g.add_argument("--executor-extra-body", type=_json_object, default={},
                   help="JSON merged into every executor request, e.g. vLLM's continue_final_message")  # fmt: skip


def _doctor_cmd(args: argparse.Namespace) -> int:
    from verl_cua.doctor import run_doctor

    return run_doctor(args.recipe, args.overrides)


def _add_doctor(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this machine and a recipe before training: driver, versions, Docker/KVM, disk, RAM, budgets",
        description="One line per finding (ok, info, warn, FAIL); exit 1 on a blocker. With RECIPE, the recipe's "
        "config is composed (nothing runs) and its token budget and host memory per step are printed.",
    )
    recipe = "a recipe: its name as `verl-cua recipe list` prints it, a script, or an exported folder"
    p.add_argument("recipe", nargs="?", default=None, help=recipe)
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as you would append them to the recipe")
    p.set_defaults(func=_doctor_cmd)


def _sft_data_cmd(args: argparse.Namespace) -> int:
    from verl_cua.sft.card import card_path, card_text

    try:
        from verl_cua.sft.data import SFTDataConfig, build

        config = SFTDataConfig(**{k: v for k, v in vars(args).items() if k not in ("command", "func")})
        card = build(config)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"verl-cua sft-data: {exc}", file=sys.stderr)
        return 2
    print(card_text(card))
    print(f"rows: {config.out}; card: {card_path(config.out)}")
    print(f"train: python -m verl_cua.sft_main data.train_files={config.out} model.path={config.model}")
    return 0


def _add_sft_data(sub, formats: list[str]) -> None:
    p = sub.add_parser(
        "sft-data",
        help="eval runs and training traces -> multi-turn, multi-image SFT rows for a target model (verl's format)",
        description="Each kept step's parsed actions are re-rendered in --format; prompts and screenshots are laid out "
        "as the RL agent loop lays them out (--rows, --history-images, --max-pixels), so SFT and RL prompts match.",
    )
    p.add_argument("runs", nargs="+", help="run directories (verl-cua eval --out, or cua.trace.dir)")
    p.add_argument("--format", required=True, choices=formats, help="the target model's action format")
    p.add_argument("--model", required=True, help="the target model folder (its processor sizes screenshots)")
    p.add_argument("--out", default="data/sft.parquet", help="the parquet file (a .card.json is written beside it)")
    p.add_argument("--rows", default=None, choices=["episode", "step"],
                   help="as cua.env.rows (default: episode; step with --planner)")  # fmt: skip
    p.add_argument("--history-images", type=int, default=None,
                   help="screenshots per step prompt (rows=step; default 3; --planner: the spec's)")  # fmt: skip
    p.add_argument("--max-pixels", type=int, default=50176, help="screenshot pixel cap, as cua.env.max_pixels")
    p.add_argument("--select", default="success", help="success | all | reward>=X | judge (with --judge)")
    p.add_argument("--judge", default=None, metavar="FILE",
                   help="--select judge: a judge file in CODA's schema; its clean episodes are kept")  # fmt: skip
    p.add_argument("--planner", default=None, metavar="SPEC",
                   help="planner-mode runs -> step rows of that planner (coda: CODA's Stage 2); --format names "
                   "the executor's format of the runs' action lines")  # fmt: skip
    p.add_argument("--invalid", default="drop", choices=["drop", "negatives"],
                   help="invalid steps: dropped, or kept apart in <out>.negatives.parquet")  # fmt: skip
    p.add_argument("--max-per-task", type=int, default=None,
                   help="at most N episodes per task, the shortest (default: no cap)")  # fmt: skip
    p.add_argument("--no-dedup", dest="dedup", action="store_false", help="keep repeated episodes")
    p.add_argument("--no-thoughts", dest="thoughts", action="store_false", help="drop the models' thought text")
    p.add_argument("--seed", type=int, default=0, help="the row order's shuffle")
    p.set_defaults(func=_sft_data_cmd)


def _osworld_check_cmd(args: argparse.Namespace) -> int:
    import importlib.util

    from verl_cua.resources import OSWORLD_CLIENT_HINT

    if importlib.util.find_spec("desktop_env") is None:  # before any task is read or run
        print(f"verl-cua osworld-check: needs OSWorld's client (desktop-env): {OSWORLD_CLIENT_HINT}", file=sys.stderr)
        return 2
    from verl_cua.envs.osworld.coverage import format_table, run_check

    domains = [d for d in (args.domains or "").split(",") if d] or None
    tasks = [t for t in (args.tasks or "").split(",") if t] or None
    try:
        meta = None if args.all_files else args.meta
        report = run_check(args.examples, args.out, domains=domains, tasks=tasks, meta=meta, progress=args.progress)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"verl-cua osworld-check: {exc}", file=sys.stderr)
        return 2
    print(format_table(report["table"]))
    print(f"report: {args.out}")
    return 0


def _add_osworld_check(sub) -> None:
    p = sub.add_parser(
        "osworld-check",
        help="classify OSWorld's tasks (internet / vm-only / offline) and run the offline ones on the local desktop",
        description="For each offline task: reset (timed), evaluate before acting (must be 0.0 from a real read of the "
        "desktop's state), and for infeasible tasks FAIL then evaluate (must be 1.0). Task files are read from your "
        "OSWorld clone, never copied. Prints a coverage table by domain; the report JSON has one entry per task.",
    )
    p.add_argument("examples", help="PATH_TO_OSWORLD/evaluation_examples (or its examples/ folder)")
    p.add_argument("--domains", default=None, help="comma-separated domains (default: all)")
    p.add_argument("--tasks", default=None, help="comma-separated task ids (default: all)")
    p.add_argument("--meta", default="test_all.json", help="the file listing the benchmark's tasks ({domain: [id]})")
    p.add_argument("--all-files", action="store_true", help="every task file, listed in --meta or not")
    p.add_argument("--out", default="osworld_check.json", help="the report (rewritten after each task)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no line per task")
    p.set_defaults(func=_osworld_check_cmd)


def _probe_boots_cmd(args: argparse.Namespace) -> int:
    try:
        from verl_cua.envs.osworld.boot_probe import run
    except ImportError as exc:
        from verl_cua.resources import OSWORLD_CLIENT_HINT

        print(f"verl-cua probe-boots: needs OSWorld's client ({exc}): {OSWORLD_CLIENT_HINT}", file=sys.stderr)
        return 2
    return run(args)


def _add_probe_boots(sub) -> None:
    from verl_cua.envs.osworld.boot_probe import __doc__ as about
    from verl_cua.envs.osworld.boot_probe import add_arguments

    p = sub.add_parser(
        "probe-boots",
        help="boot N docker desktops at once on this host: boot-time percentiles, lock waits, settings to use",
        description=" ".join(about.split("\n\n")[1].split()),
    )
    add_arguments(p)
    p.set_defaults(func=_probe_boots_cmd)


def _add_view_compare(sub) -> None:
    p = sub.add_parser("view", help="a static HTML page comparing runs (eval or training traces) step by step")
    p.add_argument("runs", nargs="+", help="run directories (verl-cua eval --out, or cua.trace.dir)")
    p.add_argument("--out", default="report.html", help="the HTML file to write")
    p.add_argument("--embed", action="store_true", help="inline the screenshots (JPEG) so the file stands alone")
    p.add_argument("--title", default=None, help="the page's title (default: 'verl-cua: ' and the run names)")
    p.set_defaults(func=_view_cmd)
    p = sub.add_parser("compare", help="a table of the tasks where two runs differ")
    p.add_argument("a", help="run directory")
    p.add_argument("b", help="run directory")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_compare_cmd)


def _config_cmd(args: argparse.Namespace) -> int:
    from verl_cua.integrations.verl.config.docs import listing
    from verl_cua.integrations.verl.config.fields import CuaConfigError
    from verl_cua.integrations.verl.config.lookup import find_keys

    try:
        print(listing(keys=find_keys(args.query)), end="")
    except CuaConfigError as exc:
        print(f"verl-cua config: {exc}", file=sys.stderr)
        return 2
    return 0


def _add_config(sub) -> None:
    p = sub.add_parser(
        "config",
        help="list the trainer's cua.* keys with their defaults, valid values and meaning",
        description="QUERY: a section (cua.env or env), a key (cua.env.max_steps or env.max_steps) or a key's last "
        "part (max_steps: every section that has it). A query that names nothing is one line with the closest keys.",
    )
    p.add_argument("query", nargs="?", default=None, help="a section or a key (default: every key)")
    p.set_defaults(func=_config_cmd)


def _list_cmd(args: argparse.Namespace) -> int:
    from verl_cua.listing import listing

    print(listing(args.group), end="")
    return 0


def _add_list(sub) -> None:
    from verl_cua.listing import GROUPS

    p = sub.add_parser("list", help="list the registered formats, chat APIs, envs and verl names, with their modules")
    p.add_argument("group", nargs="?", default="all", choices=[*GROUPS, "all"], help="one group (default: all)")
    p.set_defaults(func=_list_cmd)


def _apis_cmd(args: argparse.Namespace) -> int:
    from verl_cua.listing import api_listing

    print(api_listing(args.app), end="")
    return 0


def _add_apis(sub) -> None:
    from verl_cua.listing import api_apps

    p = sub.add_parser(
        "apis",
        help="list the app APIs of the api_gui format (CalcTools.set_cell_value, ...) with signatures and docs",
        description="Each tool's APIs, grouped by tool, as the api_gui prompt lists them. With --app: what the agent "
        "is offered while that app has the focus (the desktop tool Agent's APIs, then the app's).",
    )
    p.add_argument("--app", default=None, choices=api_apps(), help="one app's offer (default: every tool)")
    p.set_defaults(func=_apis_cmd)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for all subcommands."""
    from verl_cua.actions import available_formats
    from verl_cua.cli_help import QUICKSTART, add_help, top_formatter, version_text
    from verl_cua.recipe_export.command import add_recipe_command
    from verl_cua.setup_commands import add_setup_commands

    parser = argparse.ArgumentParser(
        prog="verl-cua", description="Computer-use agents for verl and verl-agent.", epilog=QUICKSTART
    )
    parser.add_argument("--version", action="version", version=version_text(), help="print the version (and verl's)")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    p = sub.add_parser("parse", help="parse one model output into screen actions and print them as JSON")
    p.add_argument("--format", required=True, choices=available_formats(), help="the model's output format")
    p.add_argument("--screen", required=True, type=_size, help="screen size WxH, e.g. 1920x1080")
    p.add_argument("--image", type=_size, default=None,
                   help="size WxH of the image the model saw (resized formats; default: the screen's)")  # fmt: skip
    p.add_argument("--render", action="store_true", help="also print the pyautogui code and computer_13 dicts")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    p.add_argument("text", help="the model output, or - to read it from stdin")
    p.set_defaults(func=_parse_cmd)
    _add_eval(sub)
    _add_view_compare(sub)
    _add_config(sub)
    _add_list(sub)
    _add_apis(sub)
    _add_serve(sub)
    _add_doctor(sub)
    _add_sft_data(sub, [f for f in available_formats() if f != "auto"])
    _add_osworld_check(sub)
    _add_probe_boots(sub)
    add_recipe_command(sub)
    add_setup_commands(sub)
    add_help(parser)
    parser.formatter_class = top_formatter({a.dest: a.help or "" for a in sub._choices_actions})
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `verl-cua` console script; exit 0 ok, 1 invalid output (parse), 2 bad arguments,
    3 eval stopped by the endpoint (bad key, URL or model; failing every request), 4 infra failures left;
    doctor: 1 when a finding blocks training; 130 stopped by Ctrl-C (one line: what was kept, how to go on);
    141 quietly when the reader of stdout closed it early (`| head -1`)."""
    from verl_cua.cli_interrupt import stopped_line
    from verl_cua.exits import guarded

    parsed: list[argparse.Namespace] = []

    def run() -> int:
        parsed.append(build_parser().parse_args(argv))
        return parsed[0].func(parsed[0])

    return guarded(run, lambda: stopped_line(parsed[0] if parsed else None))


if __name__ == "__main__":
    sys.exit(main())
