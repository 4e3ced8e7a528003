"""The app APIs of the `api_gui` format on OSWorld desktops (verl_cua.envs.osworld.apis).

On the CPU alone: every spec has an in-desktop method with the same parameters (the in-desktop files are read with
`ast`: they import uno); the scripted API solutions are one-line calls that bind; the runner, on a fake controller,
sends the call as JSON data only, caps results and turns a failing API into one line. On one real local desktop
(shared by the module): every office task scores 0 after reset and 1 after its API solution, and the attack tests:
arguments land literally and run nothing, paths stay in HOME, unknown names are refused, and the desktop's
LibreOffice cannot reach a port on the host's loopback."""

import ast
import json
import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from verl_cua.actions import parse_action
from verl_cua.actions.apis import TOOLSET_REGISTRY, load_builtin_toolsets, lookup_api
from verl_cua.actions.types import ActionError, GUIAction, ParsedAction
from verl_cua.envs.osworld.apis import runner
from verl_cua.envs.osworld.apis.runner import ApiOutcome, build_script, classify_window, library_source, run_api
from verl_cua.envs.osworld.tasks import load_task, task_names
from verl_cua.testing.osworld_api_solutions import API_CALLS, API_SOLUTIONS, api_step

OFFICE_TASKS = [t for t in task_names() if t.startswith(("calc-", "writer-", "impress-"))]
EVAL_TESTED = "calc-sum-column"  # solved by its API solution through `verl-cua eval` (tests/eval), not again here
# solved first thing in the every-API test of their app (one reset for both: CI's minutes)
FOLDED = {"calc-sort-rows", "writer-page-break", "impress-export-pdf"}
HOSTILE = [
    "__import__('os').system('touch /tmp/pwned-{tag}')",
    "'); import os; os.system('touch /tmp/pwned-{tag}')#",
    '"""\nimport os\nos.system("touch /tmp/pwned-{tag}")\n"""',
    '\\\'); os.system("touch /tmp/pwned-{tag}") #\n\' " end',
]


def _desktop_classes() -> dict[str, dict[str, list[tuple[str, object]]]]:
    """Tool class -> method -> [(parameter, default or REQUIRED)] of the in-desktop files, read with ast."""
    out = {}
    for name in runner.LIBRARY_FILES:
        tree = ast.parse((runner.LIBRARY_DIR / name).read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                methods = {}
                for fn in node.body:
                    if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_"):
                        args = [a.arg for a in fn.args.args]
                        defaults = [ast.literal_eval(d) for d in fn.args.defaults]
                        required = len(args) - len(defaults)
                        methods[fn.name] = [
                            (a, "REQUIRED" if i < required else defaults[i - required]) for i, a in enumerate(args)
                        ]
                out[node.name] = methods
    return out


# -- specs and their implementations ---------------------------------------------------------------------------------
def test_every_spec_has_an_in_desktop_method_with_the_same_parameters_and_defaults():
    load_builtin_toolsets()
    classes = _desktop_classes()
    for toolset in TOOLSET_REGISTRY.values():
        assert toolset.tool in classes, f"no in-desktop class {toolset.tool}"
        methods = classes[toolset.tool]
        assert sorted(methods) == sorted(toolset.apis), f"{toolset.tool}: methods differ from the specs"
        for name, spec in toolset.apis.items():
            (first, _), *params = methods[name]
            assert first == "office", f"{toolset.tool}.{name} must take the Office first"
            want = [(p.name, "REQUIRED" if p.required else p.default) for p in spec.params]
            assert params == want, f"{toolset.tool}.{name}"


def test_the_dispatcher_table_names_every_tool_and_the_joined_library_compiles():
    load_builtin_toolsets()
    tree = ast.parse(library_source())
    table = [n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TOOLS"]
    assert len(table) == 1 and sorted(k.value for k in table[0].value.keys) == sorted(TOOLSET_REGISTRY.valid())
    assert runner.RESULT_MARKER in library_source()  # the marker the script prints is the one the runner reads
    compile(build_script("CalcTools", "save", {}), "api-script", "exec")


def test_the_joined_library_defines_every_name_it_uses(tmp_path):
    """pyflakes' checks (ruff F) on the files as they run, joined: no undefined or redefined names."""
    ruff = shutil.which("ruff") or str(Path(os.sys.executable).parent / "ruff")
    if not os.access(ruff, os.X_OK):
        pytest.skip("ruff is not installed")
    source = "\n".join(line for line in library_source().splitlines() if not line.startswith("# ruff: noqa"))
    (tmp_path / "library.py").write_text(source)
    cmd = [ruff, "check", "--no-cache", "--isolated", "--select", "F", "--ignore", "E402", str(tmp_path / "library.py")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_optional_none_parameter_given_explicitly_binds():
    spec = lookup_api("CalcTools", "set_font")
    bound = spec.bind([], {"range": "A1:D1", "bold": True, "italic": None})
    assert bound["italic"] is None and spec.bind([], bound) == bound  # binding bound arguments changes nothing
    with pytest.raises(ActionError, match="bold must be bool"):
        spec.bind([], {"range": "A1", "bold": "yes"})


def test_paths_outside_home_are_refused_by_validation():
    spec = lookup_api("CalcTools", "save_as")
    for path in ("/tmp/x.xlsx", "~/../../tmp/x.xlsx", "Documents/../../x.xlsx", "~root/x.xlsx", "~/a\nb.xlsx"):
        with pytest.raises(ActionError):
            spec.bind([], {"path": path})
    assert spec.bind([], {"path": "~/Documents/x.xlsx"}) == {"path": "~/Documents/x.xlsx"}


def test_the_in_desktop_path_check_refuses_a_symlink_out_of_home(tmp_path, monkeypatch):
    """uno_common.home_path, run here on its own (it needs no UNO): `..` and a symlinked folder leaving HOME."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "out").symlink_to(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    namespace = {}
    exec(compile((runner.LIBRARY_DIR / "uno_common.py").read_text(), "uno_common.py", "exec"), namespace)  # noqa: S102
    home_path, api_error = namespace["home_path"], namespace["ApiError"]
    assert home_path("~/Documents/a.xlsx") == str(home / "Documents" / "a.xlsx")
    assert home_path("Documents/a.xlsx") == str(home / "Documents" / "a.xlsx")
    for path in ("~/Documents/out/a.xlsx", "~/../a.xlsx", "/tmp/a.xlsx", "~/missing/a.xlsx"):
        with pytest.raises(api_error):
            home_path(path)


# -- the scripted solutions ------------------------------------------------------------------------------------------
def test_every_office_task_has_an_api_solution_of_one_line_calls_that_bind():
    assert sorted(API_SOLUTIONS) == OFFICE_TASKS
    for task, steps in API_SOLUTIONS.items():
        assert len(steps) == len(API_CALLS[task])
        for step, (qualname, kwargs) in zip(steps, API_CALLS[task], strict=True):
            assert step.startswith("```python\n") and step.endswith("\n```") and step.count("\n") == 2, step
            (action,) = parse_action(step, format="api_gui", screen=(1920, 1080)).actions
            assert (action.api, action.args) == (qualname, lookup_api(*qualname.split(".")).bind([], kwargs))
    for hostile in ("CalcTools.save(**{'a': 1})", "CalcTools.set_cell_value(cell='A1', value=__import__('os'))"):
        assert not parse_action(f"```python\n{hostile}\n```", format="api_gui", screen=(1920, 1080)).valid


# -- the runner on a fake controller ----------------------------------------------------------------------------------
class FakeController:
    """Records the scripts posted to /run_python; answers with `reply` (a dict, or a function of the script)."""

    def __init__(self, reply):
        self.reply, self.scripts = reply, []

    def run_python_script(self, script):
        self.scripts.append(script)
        return self.reply(script) if callable(self.reply) else self.reply


def _marked(ok, result):
    return {"status": "success", "output": "noise\n" + runner.RESULT_MARKER + json.dumps({"ok": ok, "result": result})}


def _call_of(script: str) -> dict:
    """The call the script's last line carries: `_verl_cua_main(json.loads(<a string literal>))`, nothing else."""
    code, _, last = script.rstrip("\n").rpartition("\n")
    node = ast.parse(last, mode="eval").body
    assert isinstance(node, ast.Call) and node.func.id == "_verl_cua_main" and len(node.args) == 1
    inner = node.args[0]
    assert ast.unparse(inner.func) == "json.loads" and len(inner.args) == 1 and isinstance(inner.args[0], ast.Constant)
    assert code.rstrip("\n") == library_source().rstrip("\n")
    return json.loads(inner.args[0].value)


def test_fake_controller_gets_the_call_as_json_data_whatever_the_arguments():
    fake = FakeController(_marked(True, "ok"))
    for value in [*HOSTILE, "x')); print('pwned", "\\", "'''", '"""', "\r\n\t\x7f\u2028\ud7ff"]:
        action = GUIAction("api", api="CalcTools.set_cell_value", args={"cell": "A1", "value": value})
        assert run_api(fake, action) == ApiOutcome(True, "ok")
        call = _call_of(fake.scripts[-1])
        assert call["tool"] == "CalcTools" and call["name"] == "set_cell_value"
        assert call["args"] == {"cell": "A1", "value": value, "sheet": ""}  # bound: defaults filled in
    codes = {s.rstrip("\n").rpartition("\n")[0] for s in fake.scripts}
    assert len(codes) == 1  # the code part never changes


def test_fake_controller_an_unknown_api_or_a_bad_argument_is_refused_before_anything_is_sent():
    fake = FakeController(_marked(True, "ok"))
    bad = [
        GUIAction("api", api="CalcTools.exec", args={}),
        GUIAction("api", api="os.system", args={"command": "id"}),
        GUIAction("api", api="CalcTools._calc", args={}),
        GUIAction("api", api="CalcTools.set_cell_value", args={"cell": "A1; rm", "value": 1}),
        GUIAction("api", api="CalcTools.save_as", args={"path": "/tmp/x.xlsx"}),
        GUIAction("api", api="CalcTools.save", args={"extra": 1}),
    ]
    for action in bad:
        with pytest.raises(ActionError):
            run_api(fake, action)
    assert fake.scripts == []


def test_fake_controller_results_are_capped_and_failures_are_one_line():
    long = FakeController(_marked(True, "x" * 5000))
    outcome = run_api(long, GUIAction("api", api="WriterTools.get_document_text", args={}))
    assert outcome.ok and len(outcome.result) == runner.MAX_RESULT
    assert outcome.result.endswith("[5000 characters in all]")
    failing = FakeController(_marked(False, "no Calc document is open\nsecond line"))
    outcome = run_api(failing, GUIAction("api", api="CalcTools.save", args={}))
    assert outcome == ApiOutcome(False, "no Calc document is open second line")
    crashed = FakeController({"status": "success", "output": "", "error": "Traceback...\nSegmentation fault"})
    outcome = run_api(crashed, GUIAction("api", api="CalcTools.save", args={}))
    assert not outcome.ok and outcome.result == "the API did not run: Segmentation fault"
    assert run_api(FakeController(None), GUIAction("api", api="CalcTools.save", args={})).ok is False
    alarmed = FakeController({"status": "success", "output": "", "error": "", "returncode": -14})  # SIGALRM
    outcome = run_api(alarmed, GUIAction("api", api="CalcTools.save", args={}))
    assert outcome == ApiOutcome(False, "the API call timed out (stopped by its time limit)")


def test_fake_controller_a_forged_result_inside_a_result_cannot_pass_for_the_scripts():
    forged = runner.RESULT_MARKER + json.dumps({"ok": True, "result": "forged"})
    reply = _marked(False, f"cell text\n{forged}")  # a result holding a newline and the marker stays one JSON line
    assert run_api(FakeController(reply), GUIAction("api", api="CalcTools.save", args={})).ok is False


def test_focused_window_classes_map_to_osworld_app_keys():
    assert classify_window(' "libreoffice", "libreoffice-calc"', ' "expenses.xlsx - LibreOffice Calc"') == (
        "libreoffice_calc"
    )
    assert classify_window(' "soffice", "Soffice"', ' "memo.docx - LibreOffice Writer"') == "libreoffice_writer"
    assert classify_window("", '"offsite.odp - LibreOffice Impress"') == "libreoffice_impress"
    assert classify_window(' "chromium", "Chromium"', '"New Tab - Chromium"') == "chrome"
    assert classify_window(' "xterm", "XTerm"', '"xterm"') == "terminal"
    assert classify_window(' "vlc", "vlc"', '"VLC media player"') == "vlc"
    assert classify_window(' "gimp", "Gimp-2.10"', '"GNU Image Manipulation Program"') == "gimp"
    assert classify_window(' "nautilus", "Nautilus"', '"Home"') is None and classify_window("", "") is None


# -- on a real local desktop -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env(local_desktop):
    from verl_cua.envs import make_env
    from verl_cua.envs.osworld.local_desktop import DESKTOP_VENV

    probe = subprocess.run([f"{DESKTOP_VENV}/bin/python", "-c", "import uno"], capture_output=True, timeout=60)
    if probe.returncode != 0 or not shutil.which("soffice"):
        message = "the desktop has no LibreOffice or no UNO bridge: run envs/local_desktop/setup.sh (python3-uno)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = make_env("osworld", provider="local", action_format="api_gui", pause=0.1)  # no screenshot is checked
    yield env
    env.close()


def _api(env, qualname: str, **kwargs):
    """One api_gui turn as a model writes it (a ```python line), through the format's parser into the env."""
    return env.step(api_step(qualname, kwargs), format="api_gui")


@pytest.mark.desktop
@pytest.mark.parametrize("task", [t for t in OFFICE_TASKS if t != EVAL_TESTED and t not in FOLDED])
def test_office_task_scores_0_after_reset_and_1_after_its_api_solution(env, task):
    solve(env, task, env.reset(task))


def solve(env, task: str, obs) -> None:
    """Run `task`'s API solution as model text on a desktop just reset to it (`obs`: the reset's observation);
    OSWorld's evaluator must give 0 before and 1 after."""
    config, _ = load_task(task)
    assert obs.extra["focused_app"] == config["related_apps"][0] and obs.extra["api_result"] is None
    assert env.evaluate() == 0.0, f"{task} scores before any action ({env.last_eval_error})"
    for step in API_SOLUTIONS[task]:
        result = env.step(step, format="api_gui")  # the model's text, through the api_gui parser
        info = result.info
        assert info["action_valid"] and not info["infra_failure"] and not info.get("desktop_broken"), info
        assert info["api_result"] and not info["api_result"].startswith("error:"), f"{task}: {step}: {info}"
        assert result.observation.extra["api_result"] == info["api_result"]
        assert result.observation.extra["focused_app"] == config["related_apps"][0]
    assert env.evaluate() == 1.0, f"{task}: {env.last_eval_error}"


@pytest.mark.desktop
def test_attack_arguments_land_literally_and_reach_nothing(env, tmp_path):
    """Code in str arguments is text in the cell and the document; no file appears on the host or in the desktop; paths
    out of HOME, unknown names and private methods are refused; a formula cannot reach the host's loopback."""
    tag = uuid.uuid4().hex[:12]
    env.reset("calc-sum-column")
    controller = env.desktop_env.controller
    for i, text in enumerate(HOSTILE):
        value = text.format(tag=tag)
        result = _api(env, "CalcTools.set_cell_value", cell=f"D{10 + i}", value=value)
        assert result.info["action_valid"] and not result.info["api_result"].startswith("error:"), result.info
        read = _api(env, "CalcTools.get_range_values", range=f"D{10 + i}").info["api_result"]
        assert read == value, (read, value)
    # a path out of HOME: refused by validation (an invalid action), and by the desktop for a symlink out of HOME
    for path in ("/tmp/x.xlsx", "~/../../tmp/x.xlsx"):
        assert not _api(env, "CalcTools.save_as", path=path).info["action_valid"]
    controller.execute_python_command("import os; os.symlink('/tmp', os.path.expanduser('~/Documents/escape'))")
    out = _api(env, "CalcTools.save_as", path="~/Documents/escape/x.xlsx").info["api_result"]
    assert out.startswith("error:") and "leaves the home folder" in out, out
    # unknown tools and methods: invalid actions; a private in-desktop function: refused by the dispatcher too
    for name in ("CalcTools.exec", "os.system", "CalcTools._calc", "Office.ctx"):
        info = _api(env, name).info
        assert not info["action_valid"] and info["error"], (name, info)
    reply = controller.run_python_script(build_script("CalcTools", "_calc", {}))
    assert runner.parse_reply(reply) == ApiOutcome(False, "unknown API CalcTools._calc")
    # a formula fetching a URL on the host's loopback: the desktop's network namespace has its own loopback
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(3.0)
        port = listener.getsockname()[1]
        _api(env, "CalcTools.set_cell_value", cell="E1", value=f'=WEBSERVICE("http://127.0.0.1:{port}/")')
        with pytest.raises(socket.timeout):
            listener.accept()
    # Writer: the same texts in a document, read back whole
    env.reset("writer-replace-word")
    texts = [t.format(tag=tag).replace("\n", " ") for t in HOSTILE]
    for text in texts:
        assert not _api(env, "WriterTools.append_paragraph", text=text).info["api_result"].startswith("error:")
    document = _api(env, "WriterTools.get_document_text").info["api_result"]
    assert all(text in document for text in texts), document
    assert not list(Path("/tmp").glob(f"pwned-{tag}*")), "a file appeared on the host"
    code = f"import glob; print(glob.glob('/tmp/pwned-{tag}*'))"
    check = env.desktop_env.controller.execute_python_command(code)  # the reset's new desktop
    assert check["output"].strip() == "[]", check


@pytest.mark.desktop
def test_agent_tools_open_and_switch_apps_and_the_focused_app_follows(env, monkeypatch):
    """Agent.open_app starts an app whose window takes the focus, switch_window brings another back; a step mixing a
    GUI action and an API call runs both in order; a failing API is a valid action whose result says why."""
    monkeypatch.setattr(env, "pause", 0.5)  # the desktop's own pause: windows change focus and keys follow it
    env.reset("calc-sum-column")
    opened = _api(env, "Agent.open_app", app_name="libreoffice writer")
    assert opened.info["api_result"].startswith("opened libreoffice writer"), opened.info
    assert opened.observation.extra["focused_app"] == "libreoffice_writer"
    back = _api(env, "Agent.switch_window", title="expenses.xlsx")
    assert back.observation.extra["focused_app"] == "libreoffice_calc", back.info
    missing = _api(env, "Agent.switch_window", title="no such window")
    assert missing.info["action_valid"] and missing.info["api_result"].startswith("error: no window title contains")
    mixed = ParsedAction(
        valid=True,
        actions=[
            GUIAction("key", keys=["ctrl", "home"]),
            GUIAction("type", text="typed\n"),  # Enter commits the cell
            GUIAction("api", api="CalcTools.get_range_values", args={"range": "A1"}),
        ],
        format="api_gui",
    )
    result = env.step(mixed)
    assert result.info["api_result"] == "typed" and result.observation.extra["api_result"] == "typed", result.info
    gui_only = env.step(ParsedAction(valid=True, actions=[GUIAction("key", keys=["escape"])], format="api_gui"))
    assert gui_only.info["api_result"] is None and gui_only.observation.extra["api_result"] is None
    blank = _api(env, "WriterTools.get_paragraphs", start=1, count=1)  # the Writer opened above, in the background
    assert blank.info["api_result"] == "1 paragraphs\n1 [Standard, left] ", blank.info


def _ok(env, qualname: str, **kwargs) -> str:
    result = _api(env, qualname, **kwargs)
    assert result.info["action_valid"], (qualname, result.info)
    text = result.info["api_result"]
    assert text is not None and not text.startswith("error:"), (qualname, kwargs, text)
    return text


@pytest.mark.desktop
def test_every_calc_api_runs_and_reads_back(env):
    solve(env, "calc-sort-rows", env.reset("calc-sort-rows"))  # staff.xlsx: Name, Department, Salary; 5 rows
    assert "used range A1:C6" in _ok(env, "CalcTools.get_workbook_info")
    assert _ok(env, "CalcTools.set_range_values", cell="E1", values=[["1.5", "=E1*2", "text"], [3, "=SUM(E1,E2)", ""]])
    assert _ok(env, "CalcTools.get_range_values", range="E1:G2") == "1.5\t3\ttext\n3\t4.5\t"
    assert _ok(env, "CalcTools.set_cell_value", cell="H1", value='=IF(E1>1,"big","small")') == "H1 = big"
    _ok(env, "CalcTools.set_font", range="A1:C1", italic=True, font_name="Liberation Serif", font_size=14)
    _ok(env, "CalcTools.highlight_range", range="A1:C1", color="#FFCC00")
    _ok(env, "CalcTools.set_number_format", range="C2:C6", format="#,##0.00")
    assert _ok(env, "CalcTools.get_range_values", range="C2") == "61000"  # values, not their display (sorted above)
    _ok(env, "CalcTools.sort_range", range="A1:C6", key_column="Name")
    assert _ok(env, "CalcTools.get_range_values", range="A2:A3") == "Chloe\nEthan"
    _ok(env, "CalcTools.set_column_values", column="d", values=["Bonus", "1000", "x"], start_row=1)
    _ok(env, "CalcTools.insert_rows", before_row=2, count=2)
    assert _ok(env, "CalcTools.get_range_values", range="D1:D5") == "Bonus\n\n\n1000\nx"
    _ok(env, "CalcTools.delete_rows", start_row=2, count=2)
    assert _ok(env, "CalcTools.get_range_values", range="A2:D2") == "Chloe\tSales\t55000\t1000"
    _ok(env, "CalcTools.clear_range", range="D1:D3")
    _ok(env, "CalcTools.clear_range", range="E1:H2")
    assert _ok(env, "CalcTools.get_range_values", range="E1:F1") == "\t"
    _ok(env, "CalcTools.add_sheet", name="Notes")
    _ok(env, "CalcTools.set_cell_value", cell="A1", value="note", sheet="Notes")
    _ok(env, "CalcTools.rename_sheet", old_name="Notes", new_name="Memo")
    assert "sheet 1 'Memo': used range A1" in _ok(env, "CalcTools.get_workbook_info")
    _ok(env, "CalcTools.freeze_panes", cell="A2")
    _ok(env, "CalcTools.select_range", range="B2:C3", sheet="Sheet1")
    assert _ok(env, "CalcTools.save_as", path="~/Documents/staff-copy.ods") == "saved as ~/Documents/staff-copy.ods"
    assert _ok(env, "CalcTools.save") == "saved ~/Documents/staff-copy.ods"
    errors = {
        "CalcTools.rename_sheet": {"old_name": "Nope", "new_name": "x"},
        "CalcTools.sort_range": {"range": "A1:C6", "key_column": "Bonus"},
        "CalcTools.highlight_range": {"range": "A1", "color": "chartreuse-ish"},
        "CalcTools.save_as": {"path": "~/Documents/x.docx"},
    }
    for qualname, kwargs in errors.items():
        result = _api(env, qualname, **kwargs)
        assert result.info["action_valid"] and result.info["api_result"].startswith("error: "), result.info
        assert "\n" not in result.info["api_result"]


@pytest.mark.desktop
def test_every_writer_api_runs_and_reads_back(env):
    solve(env, "writer-page-break", env.reset("writer-page-break"))  # minutes.docx: 4 paragraphs
    assert _ok(env, "WriterTools.get_paragraphs", start=3, count=1) == "4 paragraphs\n3 [Standard, left] Action Items"
    _ok(env, "WriterTools.set_paragraph_text", paragraph=2, text="Attendees: Dana.")
    _ok(env, "WriterTools.set_paragraph_style", paragraph=1, style="Heading 1")
    _ok(env, "WriterTools.set_paragraph_alignment", paragraph=0, alignment="justify")
    _ok(env, "WriterTools.append_paragraph", text="Next meeting: Monday.\nBring numbers.")
    _ok(env, "WriterTools.insert_text", text="DRAFT ", position="start")
    assert _ok(env, "WriterTools.format_text", find="Monday", bold=True, underline=True, color="red").startswith("1 ")
    _ok(env, "WriterTools.set_font", font_size=13.0, paragraph=2)
    listing = _ok(env, "WriterTools.get_paragraphs")
    assert listing.splitlines()[:3] == [
        "6 paragraphs",
        "1 [Heading 1, justify] DRAFT Meeting Notes",
        "2 [Standard, justify] Attendees: Dana.",
    ], listing
    assert _ok(env, "WriterTools.get_document_text").endswith("Next meeting: Monday.\nBring numbers.")
    assert _ok(env, "WriterTools.find_and_replace", find="NOTHING-HERE", replace="x") == (
        "replaced 0 occurrences of 'NOTHING-HERE'"
    )
    assert _ok(env, "WriterTools.save_as", path="~/Documents/minutes.odt") == "saved as ~/Documents/minutes.odt"
    assert _ok(env, "WriterTools.save_as", path="~/Documents/minutes.pdf") == "exported ~/Documents/minutes.pdf"
    assert _api(env, "WriterTools.set_paragraph_alignment", paragraph=9, alignment="left").info["api_result"] == (
        "error: no paragraph 9; the document has 6 (numbered from 1)"
    )


@pytest.mark.desktop
def test_every_impress_api_runs_and_reads_back(env):
    solve(env, "impress-export-pdf", env.reset("impress-export-pdf"))  # offsite.odp: 3 slides
    assert _ok(env, "ImpressTools.get_slides_info").startswith("3 slides\nslide 1 ")
    _ok(env, "ImpressTools.add_slide", after=1, title="Agenda", body="Travel\nTalks")
    _ok(env, "ImpressTools.duplicate_slide", slide=2)
    _ok(env, "ImpressTools.set_slide_title", slide=3, title="Agenda (copy)")
    _ok(env, "ImpressTools.set_slide_body", slide=3, text="Only one point")
    _ok(env, "ImpressTools.set_slide_notes", slide=2, notes="Speak slowly.")
    _ok(env, "ImpressTools.go_to_slide", slide=2)
    _ok(env, "ImpressTools.delete_slide", slide=5)
    info = _ok(env, "ImpressTools.get_slides_info")
    assert info.startswith("4 slides\n") and "  TitleText: Agenda\n  Outliner: Travel\nTalks" in info, info
    assert "TitleText: Agenda (copy)\n  Outliner: Only one point" in info, info
    assert _ok(env, "ImpressTools.save_as", path="~/Documents/offsite.pptx") == "saved as ~/Documents/offsite.pptx"
    assert _ok(env, "ImpressTools.save") == "saved ~/Documents/offsite.pptx"
    assert _api(env, "ImpressTools.export_pdf", path="~/x.odp").info["api_result"] == "error: path must end in .pdf"


@pytest.mark.parametrize(
    ("body", "result"),
    [
        ("time.sleep(60)", "the API call timed out after 2 s"),  # the watchdog thread answers
        ("re.match(r'(a+)+$', 'a' * 40 + 'b')", "the API call timed out (stopped by its time limit)"),  # GIL held
    ],
    ids=["watchdog", "sigalrm"],
)
def test_fake_desktop_a_hanging_api_is_stopped_by_its_time_limit(body, result):
    """The library's time limits, run on this host's Python (Agent's methods need no UNO) with a hanging method
    added to the script: a hang that lets Python run is answered by the watchdog thread, one holding the GIL by
    SIGALRM; either way the API fails with one line, well before the desktop server's own limit."""
    hang = f"class Agent:\n    @staticmethod\n    def hang(office):\n        import re\n        {body}\n"
    script = library_source().replace("class Agent:\n", hang, 1)
    script += "\n_verl_cua_main({'tool': 'Agent', 'name': 'hang', 'args': {}, 'timeout': 2})\n"
    run = subprocess.run([os.sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    reply = {"output": run.stdout, "error": run.stderr, "returncode": run.returncode}
    assert runner.parse_reply(reply) == ApiOutcome(False, result)
