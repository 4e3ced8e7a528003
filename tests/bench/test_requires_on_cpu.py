"""Every bench checks what it needs before any work: in a real interpreter where a module cannot be imported (a
meta-path blocker in sitecustomize.py), each bench either stops at once with one line naming the module and its
install command, or goes on without an optional part and says so."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib

from bench import requires
from verl_cua import resources
from verl_cua.resources import install_hint

ROOT = Path(__file__).resolve().parents[2]
FAST = 30  # seconds: an interpreter, numpy and verl_cua's light layers on a loaded 2-core machine; the work is minutes
BLOCKER = '''
import os, sys
from importlib.abc import MetaPathFinder


class BlockedForTheTest(MetaPathFinder):
    """Imports of these top-level modules fail as an absent package's would."""

    names = set(os.environ["BENCH_TEST_BLOCK"].split(","))

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, BlockedForTheTest())
'''


def run_blocked(tmp_path: Path, blocked: tuple[str, ...], module: str, *argv: str, cwd: Path | None = None):
    """`python -m module argv` in a fresh interpreter of this venv where `blocked` cannot be imported; returns the
    process and its wall seconds. Runs in an empty folder (cwd) so anything it writes shows."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    work = cwd or tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "BENCH_TEST_BLOCK": ",".join(blocked)}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", module, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    return proc, time.monotonic() - start


def test_the_blocker_really_blocks(tmp_path):
    proc, _ = run_blocked(tmp_path, ("matplotlib",), "bench.requires")  # sitecustomize.py is written by this
    check = "import bench.requires as r; print(r.missing(['matplotlib', 'json']))"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{ROOT}", "BENCH_TEST_BLOCK": "matplotlib"}
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "['matplotlib']", out.stderr
    plain = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert plain.stdout.strip() == "[]", plain.stderr  # this venv has it: the blocker made the difference
    blocked = subprocess.run([sys.executable, "-c", "import matplotlib"], env=env, capture_output=True, text=True)
    assert "ModuleNotFoundError: No module named 'matplotlib' (blocked by the test)" in blocked.stderr


# (bench, its arguments, the module blocked, the extra that brings it)
REFUSALS = [
    ("bench.learn", (), "matplotlib", "bench"),  # the curve at the end of the hours of training
    ("bench.learn", ("--quick",), "miniwob", "miniwob"),
    ("bench.api_gui", (), "desktop_env", "osworld"),
    ("bench.ckpt_state", (), "torch", "verl"),
    ("bench.coso", (), "miniwob", "miniwob"),
    ("bench.envs", ("--envs", "miniwob"), "miniwob", "miniwob"),
    ("bench.envs", (), "desktop_env", "osworld"),
    ("bench.gigpo_anchors", (), "desktop_env", "osworld"),
    ("bench.gpu_idle", (), "torch", "verl"),
    ("bench.gpu_smoke", ("--device", "cpu"), "peft", "verl"),
    ("bench.grounding", (), "miniwob", "miniwob"),
    ("bench.memory", (), "verl", "verl"),
    ("bench.recombination", ("--model", "no-such-model"), "torch", "verl"),
    ("bench.sdpo", (), "miniwob", "miniwob"),
    ("bench.sdpo_context", (), "torch", "verl"),
    ("bench.sft_data", (), "pandas", "verl"),
    ("bench.step", (), "verl", "verl"),
    ("bench.step", ("--setting", "osworld"), "desktop_env", "osworld"),
    ("bench.verl_agent", (), "omegaconf", "verl"),
]


@pytest.mark.parametrize(("module", "argv", "blocked", "extra"), REFUSALS, ids=lambda v: str(v) if v else "-")
def test_a_bench_refuses_at_once_naming_the_module_and_the_install_command(
    tmp_path, monkeypatch, module, argv, blocked, extra
):
    proc, seconds = run_blocked(tmp_path, (blocked,), module, *argv)
    monkeypatch.chdir(tmp_path)  # where the bench ran: outside the checkout, its pinned form names the full path
    then = " && verl-cua install-osworld" if blocked == "desktop_env" else ""
    want = f"{module}: needs {blocked} (not installed); install with: {install_hint(extra)}{then}"
    assert (proc.returncode, proc.stderr.strip().splitlines()) == (2, [want]), proc.stderr[-3000:]
    assert proc.stdout == ""
    assert seconds < FAST
    assert not any((tmp_path / "work").iterdir())  # no output folder, no model, no log


def test_the_install_command_is_the_wheels_form_from_anywhere(tmp_path):
    proc, _ = run_blocked(tmp_path, ("matplotlib",), "bench.learn", "--report", "--out", str(tmp_path / "o"), cwd=ROOT)
    assert proc.returncode == 2
    hint = "needs matplotlib (not installed); install with: pip install 'verl-cua[bench]'"
    assert proc.stderr.strip() == f"bench.learn: {hint}"
    assert not (tmp_path / "o").exists()


def test_bench_learn_no_plot_reports_without_matplotlib(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run = {"estimator": "grpo", "seed": 0, "success_rate": [0.1, 0.2, 0.3], "heldout_success_rate": [0.1, 0.3],
           "first_window": 0.2, "last_window": 0.2, "steps_to_threshold": None, "seconds": 60.0}  # fmt: skip
    blind = {"point": [79, 135], "train_rate": 0.57, "heldout_rate": 0.58, "uniform_rate": 0.14}
    record = {"setting": {"PROMPTS_PER_STEP": "2", "N_RESP": "16"}, "blind": blind, "runs": [run]}
    (out / "learn.json").write_text(json.dumps(record))
    proc, _ = run_blocked(tmp_path, ("matplotlib",), "bench.learn", "--report", "--no-plot", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "grpo" in proc.stdout and "blind baseline" in proc.stdout and "no learn.png: --no-plot" in proc.stdout
    assert not (out / "learn.png").exists()


def test_bench_eval_skips_each_env_it_cannot_run_naming_the_install_command(tmp_path):
    proc, seconds = run_blocked(tmp_path, ("miniwob", "desktop_env"), "bench.eval")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["env"] for line in lines] == ["miniwob", "local_desktop"]
    assert lines[0]["skipped"] == "needs miniwob (not installed); install with: pip install 'verl-cua[miniwob]'"
    assert lines[1]["skipped"].startswith("needs desktop_env (not installed)")
    assert lines[1]["skipped"].endswith("[osworld]' && verl-cua install-osworld")
    assert seconds < FAST


def test_bench_parse_measures_without_ui_tars_and_says_so(tmp_path):
    proc, _ = run_blocked(tmp_path, ("ui_tars",), "bench.parse", "--n", "20", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    hint = "needs ui_tars (not installed); install with: pip install 'verl-cua[bench]'"
    assert proc.stderr.strip() == f"bench.parse: no comparison with ui-tars: {hint}"
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["ui_tars"] is None and figures["formats"]["uitars"]["parses_per_s"] > 0  # the table is kept
    assert f"ui-tars: no comparison ({hint})" in proc.stdout


def test_install_command_collects_the_extras_of_the_missing_modules(monkeypatch):
    assert requires.install_command(["matplotlib", "psutil"]) == "pip install 'verl-cua[miniwob,bench]'"
    both = requires.install_command(["desktop_env", "psutil", "desktop_env"])
    assert both == "pip install 'verl-cua[osworld,miniwob]' && verl-cua install-osworld"
    with_verl = requires.install_command(["matplotlib", "torch"])  # a checkout adds its pinned-torch form for verl
    assert with_verl.startswith("pip install 'verl-cua[verl,bench]' (in this checkout: pip install -c ")
    monkeypatch.setattr(resources, "checkout_root", lambda: None)  # what verl_cua.resources says for a wheel
    assert requires.install_command(["matplotlib", "torch"]) == "pip install 'verl-cua[verl,bench]'"
    with pytest.raises(KeyError, match="no extra known for nope"):
        requires.install_command(["nope"])


def test_every_extra_named_exists_and_dev_brings_the_bench_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(requires.EXTRAS.values()) <= set(extras) and set(requires.EXTRA_ORDER) <= set(extras)
    assert {r.split("=")[0].split(">")[0] for r in extras["bench"]} == {"matplotlib", "ui-tars"}
    assert "verl-cua[bench]" in extras["dev"]


def test_the_quickstart_curve_without_matplotlib_says_so_and_keeps_the_summary(tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"steps": 2, "per_step": {"success_rate": [0.1, 0.2]}, "eval": {}}))
    proc, seconds = run_blocked(tmp_path, ("matplotlib",), "bench.curve", str(summary))
    hint = "needs matplotlib (not installed); install with: pip install 'verl-cua[bench]'"
    assert (proc.returncode, proc.stderr.strip()) == (
        0,
        f"bench.curve: no curve drawn (the figures stay in {summary}): {hint}",
    )
    assert summary.is_file() and not (tmp_path / "curve.png").exists() and seconds < FAST


@pytest.mark.parametrize("content", [None, "{not json", '{"runs": []}'])
def test_bench_learn_report_without_a_run_is_one_line(tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    if content is not None:
        (out / "learn.json").write_text(content)
    proc = subprocess.run([sys.executable, "-m", "bench.learn", "--report", "--no-plot", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "learn.json" in proc.stderr and "Traceback" not in proc.stderr
