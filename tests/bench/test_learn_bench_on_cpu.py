"""bench.learn's bookkeeping on recorded runs (its training is the learning test's, tests/recipes): the recipe's
settings are read from the recipe itself, curves are summarised per estimator against the start, learn.json and
learn.png are written, and a rerun keeps finished runs."""

import json
import shlex
import subprocess

import pytest

from bench import learn

RATES = {"grpo": [0.1, 0.1, 0.2, 0.1, 0.15, 0.3, 0.35, 0.4, 0.45, 0.5], "sdpo": [0.1, 0.1, 0.1, 0.2, 0.1, 0.1, 0.15]}


def test_recipe_defaults_are_what_bash_sees():
    defaults = learn.recipe_defaults()
    assert {"TASKS", "TRAIN_SEEDS", "HELDOUT_SEEDS", "STEPS", "LR", "PROMPTS_PER_STEP", "N_RESP"} <= set(defaults)
    block = f"grep -E '^[A-Z_]+=\\$\\{{' {shlex.quote(str(learn.RECIPE))}"
    script = f"source <({block}); for n in {' '.join(defaults)}; do echo $n=${{!n}}; done"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    seen = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert seen == defaults  # the regex reads each default exactly as bash expands it (comments and all)


def test_steps_to_threshold_uses_a_trailing_window():
    assert learn.steps_to([0.1] * 4 + [0.5] * 5, 0.3, window=5) == 7  # (0.1 + 4 x 0.5) / 5 = 0.42 at step 7
    assert learn.steps_to([0.1] * 10, 0.3) is None


def _log(path, rates, heldout=(0.12, 0.4)):
    lines = [{"step": 0, "data": {"val-core/verl_cua/miniwob/acc/mean@2": heldout[0]}}]
    lines += [{"step": i + 1, "data": {"cua/success_rate": r, "actor/entropy": 0.6}} for i, r in enumerate(rates)]
    lines.append({"step": len(rates), "data": {"val-core/verl_cua/miniwob/acc/mean@2": heldout[1]}})
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def test_read_run_and_summary(tmp_path):
    runs = []
    for seed in (0, 1):
        for name, rates in RATES.items():
            run = learn.read_run(_log(tmp_path / f"{name}{seed}.jsonl", rates), seconds=60.0 * (seed + 1))
            assert run.success_rate == rates and run.heldout_success_rate == [0.12, 0.4]
            runs.append(learn.run_record(name, seed, run, episodes_per_step=32))
    summary = learn.summarise(runs)
    assert list(summary) == ["grpo", "sdpo"]
    grpo = summary["grpo"]
    assert (
        grpo["runs"] == 2 and grpo["first"] == pytest.approx([0.13, 0.0]) and grpo["last"] == pytest.approx([0.4, 0.0])
    )
    assert grpo["rise"][0] == pytest.approx(0.27) and grpo["steps_to_threshold"] == 9 and grpo["reached"] == "2/2"
    assert summary["sdpo"]["steps_to_threshold"] is None and summary["sdpo"]["reached"] == "0/2"
    assert grpo["minutes"] == pytest.approx([1.5, 0.7071], abs=1e-3)


def test_report_writes_the_plot_and_the_table(tmp_path, capsys):
    runs = [learn.run_record(n, 0, learn.read_run(_log(tmp_path / f"{n}.jsonl", r)), 32) for n, r in RATES.items()]
    blind = {"point": [79, 135], "train_rate": 0.57, "heldout_rate": 0.58, "uniform_rate": 0.14}
    setting = {"PROMPTS_PER_STEP": "2", "N_RESP": "16"}
    gap = {"own": 0.5, "cross": 0.45, "gap": 0.05, "gap_low": -0.01, "gap_high": 0.11, "layouts": 64}
    runs[0]["grounding"] = gap
    record = {"setting": setting, "blind": blind, "runs": runs, "initial_grounding": {**gap, "gap_low": 0.02}}
    (tmp_path / "learn.json").write_text(json.dumps(record))
    assert learn.main(["--report", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "learn.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "grpo" in printed and "sdpo" in printed and "blind baseline" in printed and "0.58" in printed
    assert "-0.26" in printed  # sdpo's rise (0.01) against grpo's (0.27), the anchor
    assert "+0.05 [-0.01,+0.11]" in printed  # grpo's gap and its interval, beside its held-out figures
    assert "initial model: grounding gap +0.050 [+0.020, +0.110]" in printed and "looks" in printed


def test_a_runs_grounding_is_measured_once(tmp_path):
    setting = {"STEPS": "3", "HELDOUT_SEEDS": "1-2", "TASKS": "click-test"}
    assert learn.trained_grounding(tmp_path, setting) is None  # no checkpoint: nothing to measure
    (tmp_path / "grounding.json").write_text(json.dumps({"gap": 0.1}))
    assert learn.trained_grounding(tmp_path, setting) == {"gap": 0.1}  # kept: a resumed bench does not sample again


def test_unknown_estimator_and_setting_are_one_line(capsys):
    assert learn.main(["--estimators", "grpo,ppo"]) == 2
    assert "unknown estimator(s) ppo; valid: grpo, gigpo, sdpo" in capsys.readouterr().err
    assert learn.main(["--set", "NOPE=1"]) == 2
    assert "--set wants NAME=VALUE with NAME in" in capsys.readouterr().err
