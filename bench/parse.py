"""Parser throughput, measured side by side in one run: `python -m bench.parse [--n N] [--repeat R]`.

Prints parses/s per format on one core (this process, one thread) and the ratio of our UI-TARS parser to
`ui_tars.action_parser.parse_action_to_structure_output` on the same corpus (half benign, half truncated or
mutated), with how often each raised. ui-tars comes with the `bench` extra and is optional here: without it the
table and the JSON come without the comparison, and a line says so.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
import warnings
from contextlib import redirect_stdout

from bench.corpus import corpus
from bench.requires import missing_line
from verl_cua.actions import parse_action

FORMATS = ("qwen3vl", "qwen25vl", "uitars", "pyautogui", "claude")


def _best_rate(fn, items, repeat: int) -> tuple[float, int]:
    """Best-of-`repeat` parses/s over `items` (CPU time of this process: one core), and how many calls raised."""
    best, raised = 0.0, 0
    for _ in range(repeat):
        raised = 0
        start = time.process_time()
        for item in items:
            try:
                fn(*item)
            except Exception:
                raised += 1
        elapsed = max(time.process_time() - start, 1e-9)
        best = max(best, len(items) / elapsed)
    return best, raised


def run(n: int, repeat: int) -> dict:
    """Measure every figure in one process; returns them as a dict."""
    results: dict = {"n_per_format": n, "repeat": repeat, "formats": {}}
    mixed = []
    for fmt in FORMATS:
        items = [(text, fmt, screen) for text, screen in corpus(fmt, n)]
        mixed.extend(items)
        for text, f, screen in items[:50]:  # warm caches (smart_resize per screen) outside the timing
            parse_action(text, format=f, screen=screen)
        rate, raised = _best_rate(lambda t, f, s: parse_action(t, format=f, screen=s), items, repeat)
        valid = sum(parse_action(t, format=f, screen=s).valid for t, f, s in items)
        results["formats"][fmt] = {"parses_per_s": round(rate), "raised": raised, "valid": valid}
    mixed_rate, mixed_raised = _best_rate(lambda t, f, s: parse_action(t, format=f, screen=s), mixed, repeat)
    results["mixed"] = {"parses_per_s": round(mixed_rate), "raised": mixed_raised, "n": len(mixed)}
    results["ui_tars"] = _versus_ui_tars(corpus("uitars", n, seed=7), repeat)
    results["ui_tars_benign_only"] = _versus_ui_tars(corpus("uitars", n, mutated=0.0, seed=8), repeat)
    return results


def _versus_ui_tars(items: list, repeat: int) -> dict | None:
    try:
        from ui_tars.action_parser import parse_action_to_structure_output
    except ImportError:
        return None

    def theirs(text, screen):
        parse_action_to_structure_output(text, 1000, screen[1], screen[0], model_type="qwen25vl")

    def ours(text, screen):
        parse_action(text, format="uitars", screen=screen)

    # paired passes, alternating which goes first, so both see the same machine state; the median ratio is reported
    ours_rates, theirs_rates, ratios = [], [], []
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):  # ui-tars prints on every failure
        warnings.simplefilter("ignore")
        for i in range(max(repeat, 3)):
            if i % 2:
                t, theirs_raised = _best_rate(theirs, items, 1)
                o, ours_raised = _best_rate(ours, items, 1)
            else:
                o, ours_raised = _best_rate(ours, items, 1)
                t, theirs_raised = _best_rate(theirs, items, 1)
            ours_rates.append(o)
            theirs_rates.append(t)
            ratios.append(o / t)
    return {
        "n": len(items),
        "ours_parses_per_s": round(max(ours_rates)),
        "ui_tars_parses_per_s": round(max(theirs_rates)),
        "ratio_ours_over_ui_tars": round(statistics.median(ratios), 2),
        "ratio_range": [round(min(ratios), 2), round(max(ratios), 2)],
        "ours_raised": ours_raised,
        "ui_tars_raised": theirs_raised,
    }


def main() -> None:
    """Print the table and the JSON figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="outputs per format (half truncated or mutated)")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes; the best is reported")
    parser.add_argument("--json", action="store_true", help="print only the JSON figures")
    args = parser.parse_args()
    no_ui_tars = missing_line(("ui_tars",))  # the comparison is optional: the table and JSON come without it
    if no_ui_tars is not None:
        print(f"bench.parse: no comparison with ui-tars: {no_ui_tars}", file=sys.stderr, flush=True)
    res = run(args.n, args.repeat)
    if args.json:
        print(json.dumps(res))
        return
    print(
        f"{'format':<10} {'parses/s':>10} {'valid':>7} {'raised':>7}"
        f"   (one core, {args.n} outputs, best of {args.repeat})"
    )
    for fmt, r in res["formats"].items():
        print(f"{fmt:<10} {r['parses_per_s']:>10,} {r['valid']:>7} {r['raised']:>7}")
    m = res["mixed"]
    print(f"{'mixed':<10} {m['parses_per_s']:>10,} {'':>7} {m['raised']:>7}")
    for key, what in (("ui_tars", "half truncated/mutated"), ("ui_tars_benign_only", "benign only")):
        u = res[key]
        if u is None:
            print(f"ui-tars: no comparison ({no_ui_tars or 'ui_tars did not import'})")
            break
        print(
            f"uitars vs ui-tars 0.5.1 on the same {u['n']} outputs ({what}): ours {u['ours_parses_per_s']:,}/s "
            f"(raised {u['ours_raised']}), ui-tars {u['ui_tars_parses_per_s']:,}/s (raised {u['ui_tars_raised']}); "
            f"ratio ours/ui-tars = {u['ratio_ours_over_ui_tars']} (median of paired passes, range "
            f"{u['ratio_range'][0]}-{u['ratio_range'][1]})"
        )
    print(json.dumps(res))


if __name__ == "__main__":
    main()
