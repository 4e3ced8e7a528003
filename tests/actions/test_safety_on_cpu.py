"""Injection corpus: model-written code that tries to escape the pyautogui allow-list is rejected with a reason."""

import pytest

from verl_cua.actions import parse_action

SCREEN = (1920, 1080)

# Each entry is code a hostile or confused model might write inside a ```python block.
INJECTIONS = [
    "import os\nos.system('rm -rf ~')",
    "import subprocess\nsubprocess.run(['curl', 'http://x'])",
    "import pyautogui, os\nos.remove('/etc/passwd')",
    "from os import system\nsystem('id')",
    "from pyautogui import click\nclick(1, 2)",
    "__import__('os').system('id')",
    "eval('1+1')",
    "exec('import os')",
    "open('/etc/passwd').read()",
    "open('/tmp/x', 'w').write('pwned')",
    "compile('x', 'f', 'exec')",
    "globals()['__builtins__']",
    "getattr(pyautogui, 'click')(1, 2)",
    "pyautogui.os.system('id')",
    "pyautogui.__class__.__bases__",
    "pyautogui.platformModule._moveTo(1, 2)",
    "time.os.system('x')",
    "pyautogui.click(*[1, 2])",
    "pyautogui.click(**{'x': 1, 'y': 2})",
    "pyautogui.write(f'{__import__(\"os\").getcwd()}')",
    "pyautogui.write(f'{x}')",
    "pyautogui.write(open('/etc/passwd').read())",
    "pyautogui.write(os.environ['HOME'])",
    "pyautogui.click(x, y)",
    "pyautogui.click(pyautogui.size()[0], 1)",
    "pyautogui.screenshot('/tmp/s.png')",
    "pyautogui.locateOnScreen('ok.png')",
    "pyautogui.alert('hi')",
    "pyautogui.prompt('password?')",
    "for i in range(10):\n    pyautogui.click(1, 2)",
    "while True:\n    pyautogui.press('a')",
    "if True:\n    pyautogui.click(1, 2)",
    "def f():\n    pass\nf()",
    "class X:\n    pass",
    "with open('x') as f:\n    pass",
    "try:\n    pyautogui.click(1, 2)\nexcept Exception:\n    pass",
    "x = 5\npyautogui.click(x, x)",
    "pyautogui.click = print",
    "pyautogui.FAILSAFE = __import__('os')",
    "lambda: 0",
    "[pyautogui.click(i, i) for i in range(3)]",
    "pyautogui.click(1, 2) if True else None",
    "import ctypes",
    "import socket\nsocket.socket().connect(('10.0.0.1', 80))",
    "import shutil\nshutil.rmtree('/')",
    "import sys\nsys.exit(0)",
    "import importlib\nimportlib.import_module('os')",
    "import pyautogui as os\nimport os",
    "del pyautogui",
    "global pyautogui",
    "raise SystemExit",
    "assert False",
    "pyautogui.write(b'bytes')",
    "pyautogui.click(1e308 * 10, 1)",
    "pyautogui.click(10**100, 1)",
    "pyautogui.typewrite(chr(65))",
    "print(open('/etc/shadow').read())",
    "breakpoint()",
    "pyautogui.hotkey(*['ctrl', 'c'])",
    "async def f():\n    pass",
    "pyautogui.click(1, 2); import os",
    "pyautogui.click(1, 2)\n\x00import os",
    "time.sleep(10**9)",
]


@pytest.mark.parametrize("code", INJECTIONS)
def test_injection_attempt_is_rejected_with_a_reason(code):
    text = f"I will now do the next step.\n```python\n{code}\n```"
    result = parse_action(text, format="pyautogui", screen=SCREEN)
    assert not result.valid, f"accepted: {code!r} -> {result.actions}"
    assert result.actions == []
    assert result.error and "\n" not in result.error
    assert "internal parser error" not in result.error


def test_corpus_has_at_least_fifty_distinct_attempts():
    assert len(set(INJECTIONS)) >= 50


@pytest.mark.parametrize(
    "code,construct",
    [
        ("import os", "import of 'os'"),
        ("eval('1')", "call to eval()"),
        ("pyautogui.os.system('x')", "attribute chain pyautogui.os.system"),
        ("for i in range(2):\n    pass", "for loop"),
        ("pyautogui.write(f'{x}')", "f-string"),
        ("pyautogui.click(x, 1)", "name 'x'"),
        ("__import__('os')", "call to __import__()"),
        ("open('f')", "call to open()"),
        ("from os import path", "from-import"),
    ],
)
def test_error_names_the_construct(code, construct):
    result = parse_action(f"```python\n{code}\n```", format="pyautogui", screen=SCREEN)
    assert construct in result.error


def test_raw_code_passthrough_is_off_by_default_and_explicit_and_logged(caplog):
    text = "```python\nimport subprocess\nsubprocess.run(['xdg-open', 'report.pdf'])\n```"
    assert not parse_action(text, format="pyautogui", screen=SCREEN).valid
    with caplog.at_level("WARNING"):
        result = parse_action(text, format="pyautogui", screen=SCREEN, allow_raw_code=True)
    assert result.valid and result.actions == [] and "subprocess.run" in result.code
    assert result.to_pyautogui() == result.code
    assert any("allow_raw_code=True" in r.message for r in caplog.records)
    with pytest.raises(ValueError, match="computer_13"):
        result.to_computer13()


@pytest.mark.parametrize(
    "fmt,text",
    [
        ("uitars", 'Action: click(start_box=\'__import__("os").system("id")\')'),
        ("uitars", "Action: click(start_box='[eval(\"1\"), 2]')"),
        (
            "qwen3vl",
            '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", '
            '"coordinate": ["__import__(\'os\')", 1]}}</tool_call>',
        ),
        ("claude", '{"action": "key", "text": "ctrl+$(reboot)"}'),
    ],
)
def test_code_smuggled_into_other_formats_fields_is_rejected(fmt, text):
    result = parse_action(text, format=fmt, screen=SCREEN)
    assert not result.valid and result.error


@pytest.mark.parametrize(
    "payload",
    ["'); import os; os.system('id') #", '"""\nimport os\n"""', "\\'); eval('1') #", "\n__import__('os')\n"],
)
def test_hostile_typed_text_renders_to_one_inert_write_call(payload):
    import json

    text = '<tool_call>{"name": "computer_use", "arguments": ' + json.dumps({"action": "type", "text": payload}) + "}"
    result = parse_action(text + "</tool_call>", format="qwen3vl", screen=SCREEN)
    code = result.to_pyautogui()
    reparsed = parse_action(f"```python\n{code}\n```", format="pyautogui", screen=SCREEN)
    assert reparsed.valid and len(reparsed.actions) == 1
    assert reparsed.actions[0].text == payload
