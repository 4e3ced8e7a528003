"""OSWorld task JSON validation: a task OSWorld cannot run fails at load with one line naming the field.

Real throughout: our validator, OSWorld's sources it reads (metric/getter/setup-step names), and OSWorld's own
`DesktopEnv._set_evaluator_info` and `SetupController` as the judge of what "can run" means in the fuzz test.
"""

import copy
import inspect
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from verl_cua.envs import make_env
from verl_cua.envs.osworld import evaluators
from verl_cua.envs.osworld.tasks import TaskError, load_task, setup_steps, task_names, validate_task

pytest.importorskip("desktop_env")

VALID = {
    "id": "valid-task",
    "instruction": "Write hello world to ~/hello.txt.",
    "config": [
        {"type": "launch", "parameters": {"command": ["xterm"]}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
    ],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "cat ~/hello.txt", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "hello world\n"}},
    },
}
LIST_VALID = {
    "id": "valid-list",
    "instruction": "Two checks.",
    "evaluator": {
        "func": ["exact_match", "check_include_exclude"],
        "conj": "or",
        "result": [{"type": "vm_command_line", "command": "cat a"}, {"type": "vm_command_line", "command": "cat b"}],
        "expected": [{"type": "rule", "rules": {"expected": "a\n"}}, None],
        "options": [{}, None],
    },
}


def _set(path: str, value):
    """A mutation of VALID (or LIST_VALID for `list:` paths): set (or delete, value=...) a dotted field."""

    def mutate():
        base, _, rest = path.rpartition(":")
        task = copy.deepcopy(LIST_VALID if base == "list" else VALID)
        *parents, leaf = rest.split(".")
        node = task
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is ...:
            del node[leaf]
        elif isinstance(node, list):
            node[int(leaf)] = value
        else:
            node[leaf] = value
        return task

    return mutate


BAD = [
    # (mutation, field named in the message, a phrase of the problem)
    (_set("id", ...), "id", "missing"),
    (_set("id", "   "), "id", "missing"),
    (_set("id", "../../etc"), "id", "not a file name"),
    (_set("id", "two\nlines"), "id", "not a file name"),
    (_set("instruction", ...), "instruction", "missing"),
    (_set("instruction", 42), "instruction", "not a non-empty string"),
    (_set("evaluator", ...), "evaluator", "missing"),
    (_set("evaluator", "exact_match"), "evaluator", "not an object"),
    (_set("evaluator.func", ...), "evaluator.func", "missing"),
    (_set("evaluator.func", []), "evaluator.func", "missing"),
    (_set("evaluator.result", ...), "evaluator.result", "missing"),
    (_set("evaluator.result", {}), "evaluator.result", "missing getter"),
    (_set("evaluator.func", "exact_matchh"), "evaluator.func", "'exact_matchh' is not an OSWorld metric"),
    # a public helper in a metrics submodule that OSWorld's `metrics` package does not export
    (_set("evaluator.func", "calculate_brightness"), "evaluator.func", "is not an OSWorld metric"),
    (_set("list:evaluator.func.1", "nope"), "evaluator.func[1]", "'nope' is not an OSWorld metric"),
    (_set("evaluator.result.type", "vm_cmd"), "evaluator.result.type", "'vm_cmd' is not an OSWorld getter"),
    (_set("evaluator.result.type", ...), "evaluator.result.type", "missing"),
    (_set("evaluator.expected.type", "rules"), "evaluator.expected.type", "'rules' is not an OSWorld getter"),
    (_set("evaluator.expected", None), "evaluator.expected", "null"),
    (_set("list:evaluator.expected.0.type", "x"), "evaluator.expected[0].type", "'x' is not an OSWorld getter"),
    (_set("evaluator.result", {"type": "cache_file"}), "evaluator.result.path", "relative path"),
    (_set("evaluator.result", {"type": "cache_file", "path": "../x"}), "evaluator.result.path", "relative path"),
    (_set("config.1.type", "nap"), "config[1].type", "'nap' is not an OSWorld setup step; valid: act, "),
    (_set("config.0.type", ...), "config[0].type", "missing"),
    (_set("config.0.parameters", ...), "config[0].parameters", "missing or not an object"),
    (_set("config.0.parameters", ["xterm"]), "config[0].parameters", "not an object"),
    (_set("config.0.parameters.comand", "x"), "config[0].parameters.comand", "not a parameter of 'launch'"),
    (_set("config.1.parameters.seconds", ...), "config[1].parameters.seconds", "missing (required by 'sleep')"),
    (_set("config", {"type": "launch"}), "config", "must be a list"),
    (_set("evaluator.postconfig", [{"type": "reboot", "parameters": {}}]), "evaluator.postconfig[0].type", "reboot"),
    (_set("list:evaluator.result", [{"type": "vm_command_line"}]), "evaluator.result", "list of 2 getters"),
    (_set("list:evaluator.result.1", None), "evaluator.result[1]", "missing getter"),
    (_set("list:evaluator.expected", {"type": "rule"}), "evaluator.expected", "list of 2 getters"),
    (_set("list:evaluator.options", [{}]), "evaluator.options", "list of 2 option objects"),
    (_set("list:evaluator.options", {}), "evaluator.options", "list of 2 option objects"),
    (_set("list:evaluator.options.1", "strict"), "evaluator.options[1]", "must be an object"),
    (_set("evaluator.options", [{}]), "evaluator.options", "must be an object"),
    (_set("list:evaluator.conj", "xor"), "evaluator.conj", "must be 'and' or 'or', got 'xor'"),
]


@pytest.mark.parametrize("mutate,field,problem", BAD, ids=[f"{f}:{p[:20]}" for _, f, p in BAD])
def test_bad_task_is_one_line_naming_the_field(mutate, field, problem):
    task = mutate()
    with pytest.raises(TaskError) as info:
        validate_task(task)
    message = str(info.value)
    assert len(message.splitlines()) == 1
    tid = task["id"] if task.get("id") in ("valid-task", "valid-list") else "?"  # a bad id is not echoed raw
    assert message.startswith(f"task {tid}: ")
    assert f": {field}: " in message and problem in message, message


def test_valid_tasks_pass_and_the_setup_step_error_lists_every_valid_step():
    for task in (VALID, LIST_VALID, {"id": "inf", "instruction": "Impossible.", "evaluator": {"func": "infeasible"}}):
        validate_task(copy.deepcopy(task))
    with pytest.raises(TaskError) as info:
        validate_task(_set("config.1.type", "nap")())
    listed = str(info.value).split("valid: ")[1].split(", ")
    assert listed == list(setup_steps()) and {"launch", "execute", "upload_file", "open", "sleep"} <= set(listed)


def test_task_files_invalid_json_not_utf8_not_an_object_missing(tmp_path):
    cases = {
        "broken.json": (b'{"id": "x",\n  "instruction": }', "not valid JSON (Expecting value at line 2)"),
        "latin1.json": ('{"id": "caf\xe9"}'.encode("latin-1"), "not valid JSON (not UTF-8 text"),
        "list.json": (b"[1, 2]", "a task is a JSON object"),
    }
    for name, (data, problem) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(TaskError) as info:
            load_task(tmp_path / name)
        assert problem in str(info.value) and name in str(info.value) and len(str(info.value).splitlines()) == 1
    with pytest.raises(TaskError, match="does not exist"):
        load_task(str(tmp_path / "absent.json"))
    (tmp_path / "ok.json").write_text(json.dumps(VALID))
    config, base = load_task(str(tmp_path / "ok.json"))
    assert config == VALID and base == tmp_path


def test_unknown_task_name_lists_our_task_names():
    names = task_names()
    assert names, "our task set is empty"
    for bad in ("no-such-task", "*", names[0][:3] + "*", "**"):  # a name is not a glob pattern
        with pytest.raises(TaskError) as info:
            load_task(bad)
        message = str(info.value)
        assert (
            message.startswith(f"unknown OSWorld task {bad!r}; our task set has: ") and len(message.splitlines()) == 1
        )
        assert message.split("our task set has: ")[1].split(", ") == names


def test_every_task_in_our_set_loads_with_its_upload_files_present():
    for name in task_names():
        config, base = load_task(name)
        assert base is not None and (base / f"{name}.json").is_file()
        for step in config.get("config", []) + config["evaluator"].get("postconfig", []):
            for f in step["parameters"].get("files", []) if step["type"] == "upload_file" else []:
                assert "local_path" not in f or (base / f["local_path"]).is_file(), (name, f)


@pytest.mark.parametrize("kwargs,valid", [({"provider": "nope"}, "docker"), ({"action_space": "nope"}, "computer_13")])
def test_make_env_rejects_unknown_provider_or_action_space_before_any_desktop_starts(kwargs, valid):
    # a fresh interpreter, so "no desktop module was imported" is not spoiled by other tests
    code = (
        "import sys\n"
        "from verl_cua.envs import make_env\n"
        "try:\n"
        f"    make_env('osworld', **{kwargs!r})\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        "started = [m for m in ('desktop_env.desktop_env', 'desktop_env.providers.docker.provider',\n"
        "                        'verl_cua.envs.osworld.local_desktop') if m in sys.modules]\n"
        "print(started)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    message, started = out.stdout.strip().splitlines()
    assert "nope" in message and valid in message and started == "[]", out.stdout + out.stderr
    with pytest.raises(ValueError) as info:
        make_env("osworld", **kwargs)
    listed = info.value.args[0].split(": ", 1)[1].split(", ")
    expected = ["local", "docker", "vmware", "virtualbox", "aws", "azure", "gcp", "aliyun", "volcengine"]
    assert listed == (expected if "provider" in kwargs else ["pyautogui", "computer_13"])


# -- fuzz -------------------------------------------------------------------------------------------------------
# Tasks built mostly from valid parts with junk mixed in at every level, so that many pass validation and the
# property "what we accept, OSWorld can load" is exercised, not only the error path.

JSON_LEAF = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=8)
KEYS = st.sampled_from(["command", "seconds", "path", "shell", "files", "x", "type", "rules", "\n"])


def _json():
    return st.recursive(
        JSON_LEAF, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(KEYS, kids, max_size=3), max_leaves=8
    )


def _mostly(good, junk=None):
    """`good` 7 times in 8, else junk (any JSON value unless given)."""
    junk = junk if junk is not None else _json()
    return st.sampled_from(range(8)).flatmap(lambda i: good if i else junk)


METRIC = _mostly(st.sampled_from(["exact_match", "check_include_exclude", "compare_table", "infeasible"]))
GOOD_GETTERS = [
    {"type": "vm_command_line", "command": "ls"},
    {"type": "rule", "rules": {"expected": "x"}},
    {"type": "cache_file", "path": "out.txt"},
    {"type": "vm_file", "path": "~/a.xlsx", "dest": "a.xlsx"},
]
GETTER = _mostly(
    st.sampled_from(GOOD_GETTERS),
    st.fixed_dictionaries({"type": st.sampled_from(["cache_file", "nope", ""]) | _json()}, optional={"path": _json()})
    | _json(),
)
GOOD_STEPS = [
    {"type": "launch", "parameters": {"command": ["xterm"]}},
    {"type": "sleep", "parameters": {"seconds": 1}},
    {"type": "execute", "parameters": {"command": "ls", "shell": True}},
    {"type": "tidy_desktop", "parameters": {"anything": 1}},
]
STEP = _mostly(
    st.sampled_from(GOOD_STEPS),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["launch", "sleep", "nap"]) | _json()},
        optional={"parameters": st.dictionaries(KEYS, _json(), max_size=3) | _json()},
    )
    | _json(),
)
SINGLE = st.fixed_dictionaries(
    {"func": METRIC, "result": GETTER},
    optional={
        "expected": _mostly(GETTER | st.just({})),
        "options": _mostly(st.just({}) | st.dictionaries(KEYS, _json(), max_size=2)),
        "postconfig": _mostly(st.lists(STEP, max_size=2)),
    },
)


def _lists(n):
    def n_of(item):
        return _mostly(st.lists(item, min_size=n, max_size=n))

    return st.fixed_dictionaries(
        {"func": n_of(METRIC), "result": n_of(GETTER)},
        optional={
            "expected": n_of(GETTER | st.none()),
            "options": n_of(st.just({}) | st.none() | _json()),
            "conj": _mostly(st.sampled_from(["and", "or"])),
        },
    )


TASK = st.fixed_dictionaries(
    {
        "id": _mostly(st.sampled_from(["t1", "task-2", "Ω x"]), st.sampled_from([".", "a/b", "x\ny", ""]) | _json()),
        "instruction": _mostly(st.just("Do it."), _json()),
        "evaluator": _mostly(SINGLE | st.integers(1, 3).flatmap(_lists)),
    },
    optional={"config": _mostly(st.lists(STEP, max_size=3)), "proxy": JSON_LEAF},
)


class _Bare:
    """What DesktopEnv._set_evaluator_info writes its resolved metric/getters/options onto."""


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(TASK)
def test_fuzz_validate_passes_or_one_line_task_error_and_passing_tasks_load_in_desktop_env(task):
    try:
        validate_task(task)
    except TaskError as exc:
        assert len(str(exc).splitlines()) == 1 and str(exc).startswith("task ")
        return
    event("passed validation")
    # what the validator accepts, OSWorld's DesktopEnv (as at reset) and SetupController accept too
    evaluators.install()  # before DesktopEnv's module imports `metrics, getters`
    from desktop_env.controllers.setup import SetupController
    from desktop_env.desktop_env import DesktopEnv

    bare = _Bare()
    DesktopEnv._set_evaluator_info(bare, task)
    metrics = bare.metric if isinstance(bare.metric, list) else [bare.metric]
    assert all(callable(m) for m in metrics)
    options = bare.metric_options
    assert all(isinstance(o, dict) for o in options) if isinstance(options, list) else isinstance(options, dict)
    for step in task.get("config", []) + task["evaluator"].get("postconfig", []):
        method = getattr(SetupController, f"_{step['type']}_setup")
        inspect.signature(method).bind(None, **step["parameters"])  # SetupController calls it with **parameters


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _json(), max_size=6))
def test_fuzz_arbitrary_json_objects_pass_or_raise_task_error(task):
    try:
        validate_task(task)
    except TaskError as exc:
        assert len(str(exc).splitlines()) == 1
