"""The suite's layers: `e2e` (starts verl) and `desktop` (a real desktop or Chromium) are registered markers, an
unknown marker fails the run (--strict-markers), and every test that starts verl or a desktop carries its marker, so
the fast loop `pytest -m "not e2e and not desktop" tests` starts neither: tests/conftest.py marks the users of the
fixtures in MARKER_FIXTURES, and the tests below were marked by hand (they start verl or a desktop themselves)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Tests that start verl or a desktop without a fixture of MARKER_FIXTURES, by function name (a file may move; a merge
# that drops one of their markers fails here). A new test of that kind carries the marker and joins this list.
MARKED_BY_HAND = {
    # a verl training run in a subprocess
    "test_local_osworld_desktop_training_survives_chaos": "e2e",
    "test_two_lora_steps_through_verl_serve_the_trained_adapter": "e2e",
    # verl's run_ppo, its Ray workers
    "test_full_determinism_reaches_the_ray_workers": "e2e",
    # Ray clusters (and a recipe that starts verl on one)
    "test_a_placement_group_asking_for_gpus_the_cluster_lacks_stops_naming_them": "e2e",
    "test_a_run_started_in_the_background_with_sigint_ignored_is_stopped_too": "e2e",
    "test_an_actor_waiting_for_a_cpu_slot_stops_naming_the_slots_and_the_fix": "e2e",
    "test_a_wait_that_ends_within_the_bound_is_not_stopped": "e2e",
    "test_verls_transfer_queue_on_too_few_slots_stops_naming_its_storage_unit": "e2e",
    "test_a_killed_ray_env_actor_is_an_infra_failure_and_leaves_no_browser": "e2e",
    # `python -m verl_cua.main` / `verl_cua.sft_main` (or a recipe) with verl, stopping before Ray
    "test_a_missing_data_file_is_one_line_naming_sft_data": "e2e",
    "test_main_stops_a_conflicting_resume_in_one_line_before_ray": "e2e",
    "test_main_rejects_a_bad_value_before_starting_ray": "e2e",
    "test_main_refuses_a_non_positive_size_in_one_line_before_ray": "e2e",
    "test_python_m_main_names_the_closest_keys_in_one_line": "e2e",
    "test_a_closed_pipe_ends_the_trainers_help_quietly": "e2e",
    "test_help_lists_every_key_then_hydras_help": "e2e",
    "test_a_cpu_recipe_with_an_unreachable_model_stops_in_one_line_before_ray": "e2e",
    # the local desktop, started by a module fixture of its own
    "test_task_scores_0_after_reset_and_1_after_its_solution": "desktop",
}

DUMP = """
import json, sys, pytest

class Dump:
    def pytest_collection_finish(self, session):
        rows = [[i.nodeid, getattr(i, "originalname", i.name), sorted(getattr(i, "fixturenames", ())),
                 sorted({m.name for m in i.iter_markers()})] for i in session.items]
        with open(sys.argv[1], "w") as f:
            json.dump(rows, f)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", "tests"], plugins=[Dump()]))
"""


def test_both_markers_are_registered_and_strict(request):
    registered = {line.split(":", 1)[0].strip() for line in request.config.getini("markers")}
    assert {"e2e", "desktop"} <= registered
    assert request.config.getoption("strict_markers"), "pyproject.toml's addopts lost --strict-markers"


def test_an_unknown_marker_fails_the_run(tmp_path):
    (tmp_path / "test_typo.py").write_text("import pytest\n\n@pytest.mark.e2ee\ndef test_c():\n    pass\n")
    settings = ["-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]  # this repository's, in a child
    cmd = [sys.executable, "-m", "pytest", *settings, "-q", str(tmp_path / "test_typo.py")]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "'e2ee' not found in `markers` configuration option" in run.stdout, run.stdout


def test_every_test_using_a_marked_fixture_carries_its_marker(collected_tests, marker_fixtures):
    """Over what this session collected (the whole suite in the fast loop, deselected tests included)."""
    missing = [
        (nodeid, name, marker)
        for nodeid, _function, fixtures, markers in collected_tests
        for name, marker in marker_fixtures.items()
        if name in fixtures and marker not in markers
    ]
    assert not missing, missing


@pytest.fixture(scope="module")
def suite(collected_tests, tmp_path_factory) -> list[tuple[str, str, frozenset, frozenset]]:
    """Every test of the suite with its fixtures and markers: this session's collection when it holds every test file,
    else a fresh `--collect-only` of tests/ in a child interpreter (about 20 s)."""
    pytest.importorskip("verl")  # without verl or Ray some modules skip whole, and with them their fixtures
    pytest.importorskip("ray")
    files = {path.relative_to(ROOT).as_posix() for path in TESTS.rglob("test_*.py")}
    if files <= {nodeid.split("::")[0] for nodeid, *_ in collected_tests}:
        return collected_tests
    out = tmp_path_factory.mktemp("markers") / "collected.json"
    proc = subprocess.run([sys.executable, "-c", DUMP, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [(n, f, frozenset(fx), frozenset(m)) for n, f, fx, m in json.loads(out.read_text())]


def test_every_fixture_of_the_map_is_still_used(suite, marker_fixtures):
    """A renamed or removed fixture would leave its tests unmarked: every name in MARKER_FIXTURES marks some test."""
    used = set().union(*(fixtures for _n, _f, fixtures, _m in suite))
    assert not set(marker_fixtures) - used, sorted(set(marker_fixtures) - used)


def test_the_tests_marked_by_hand_still_carry_their_markers(suite):
    by_function: dict[str, list[tuple[str, frozenset]]] = {}
    for nodeid, function, _fixtures, markers in suite:
        by_function.setdefault(function, []).append((nodeid, markers))
    gone = sorted(set(MARKED_BY_HAND) - set(by_function))
    assert not gone, f"renamed or removed (update MARKED_BY_HAND): {gone}"
    unmarked = [
        nodeid for name, marker in MARKED_BY_HAND.items() for nodeid, marks in by_function[name] if marker not in marks
    ]
    assert not unmarked, unmarked


WORKER_PROBE = """
import os, time
import pytest

{mark}

@pytest.mark.parametrize("i", range(3))
def test_probe(i):
    start = time.time()
    time.sleep(0.5)
    with open(os.environ["PROBE_OUT"], "a") as f:
        f.write(f"{{__name__}} {{os.environ['PYTEST_XDIST_WORKER']}} {{start}} {{time.time()}}\\n")
"""

SUITE_HOOK = """
import importlib.util

spec = importlib.util.spec_from_file_location("suite_conftest", "{conftest}")
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_collection_modifyitems = suite.pytest_collection_modifyitems  # the suite's markers and worker groups
"""


def test_every_module_beside_the_chain_exists_and_starts_verl(suite, beside_chain):
    """A renamed module of BESIDE_CHAIN would silently join the chain again."""
    stems = {Path(nodeid.split("::")[0]).stem for nodeid, _f, _x, markers in suite if "e2e" in markers}
    assert set(beside_chain) <= stems, sorted(set(beside_chain) - stems)


def test_two_workers_run_the_e2e_chain_in_order_and_a_beside_module_beside_it(tmp_path, beside_chain):
    """tests/run.sh's `-n 2 --dist loadgroup` with tests/conftest.py's groups: the e2e tests of two modules all run on
    one worker, one after another (the chain); a `BESIDE_CHAIN` module's e2e tests run one after another too, and
    never two verl runs of the chain side by side; a fast module's tests stay on one worker."""
    pytest.importorskip("xdist")
    beside = beside_chain[0]
    for name, mark in (("test_e2e_a", "pytestmark = pytest.mark.e2e"), ("test_e2e_b", "pytestmark = pytest.mark.e2e"),
                       (beside, "pytestmark = pytest.mark.e2e"), ("test_fast_c", ""), ("test_fast_d", "")):  # fmt: skip
        (tmp_path / f"{name}.py").write_text(WORKER_PROBE.format(mark=mark))
    (tmp_path / "conftest.py").write_text(SUITE_HOOK.format(conftest=TESTS / "conftest.py"))
    out = tmp_path / "probe.txt"
    settings = ["-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path)]
    cmd = [sys.executable, "-m", "pytest", *settings, "-q", "-n", "2", "--dist", "loadgroup", str(tmp_path)]
    env = {**os.environ, "PROBE_OUT": str(out), "PYTHONPATH": str(ROOT)}
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and "15 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line.split() for line in out.read_text().splitlines()]
    for modules, count in (({"test_e2e_a", "test_e2e_b"}, 6), ({beside}, 3)):
        tests = sorted((float(start), float(end), worker) for module, worker, start, end in rows if module in modules)
        assert len(tests) == count and len({worker for *_, worker in tests}) == 1, rows
        assert all(tests[i][1] <= tests[i + 1][0] for i in range(count - 1)), tests  # one after another
    for module in ("test_fast_c", "test_fast_d"):
        assert len({worker for m, worker, *_ in rows if m == module}) == 1, rows
