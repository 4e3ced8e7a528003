"""Scripted `api_gui` solutions of our OSWorld office tasks (envs/osworld/tasks): model outputs, one per step, each a
```python block holding ONE line that calls an app API with keyword arguments (ComputerRL's API-GUI action space).

`API_CALLS` is the same as data, `(tool.method, kwargs)` per step; `API_SOLUTIONS` renders it as model text;
`api_action(text)` reads one such step back into a GUIAction (a literal-only reader for tests and the bench: the
`api_gui` parser is the real one)."""

from __future__ import annotations

import ast
from typing import Any

from verl_cua.actions.types import ActionError, GUIAction

API_CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    # -- LibreOffice Calc ------------------------------------------------------------------------------------------
    "calc-sum-column": [("CalcTools.set_cell_value", {"cell": "B7", "value": "=SUM(B2:B6)"}), ("CalcTools.save", {})],
    "calc-rename-sheet": [
        ("CalcTools.rename_sheet", {"old_name": "Sheet1", "new_name": "Q1 Budget"}),
        ("CalcTools.save", {}),
    ],
    "calc-sort-rows": [
        ("CalcTools.sort_range", {"range": "A1:C6", "key_column": "Salary", "descending": True}),
        ("CalcTools.save", {}),
    ],
    "calc-bold-header": [("CalcTools.set_font", {"range": "A1:D1", "bold": True}), ("CalcTools.save", {})],
    "calc-new-workbook": [
        ("CalcTools.set_range_values", {"cell": "A1", "values": [["Fruit", "Qty"], ["Apple", 10], ["Pear", 4]]}),
        ("CalcTools.save_as", {"path": "~/Documents/inventory.xlsx"}),
    ],
    # -- LibreOffice Writer ----------------------------------------------------------------------------------------
    "writer-center-title": [
        ("WriterTools.set_paragraph_alignment", {"paragraph": 1, "alignment": "center"}),
        ("WriterTools.save", {}),
    ],
    "writer-page-break": [
        ("WriterTools.insert_page_break", {"before_text": "Action Items"}),
        ("WriterTools.save", {}),
    ],
    "writer-font-name": [("WriterTools.set_font", {"font_name": "Liberation Mono"}), ("WriterTools.save", {})],
    "writer-type-paragraph": [
        ("WriterTools.insert_text", {"text": "The quick brown fox jumps over the lazy dog."}),
        ("WriterTools.save_as", {"path": "~/Documents/pangram.docx"}),
    ],
    "writer-replace-word": [
        ("WriterTools.find_and_replace", {"find": "colour", "replace": "color"}),
        ("WriterTools.save", {}),
    ],
    # -- LibreOffice Impress ---------------------------------------------------------------------------------------
    "impress-export-pdf": [("ImpressTools.export_pdf", {"path": "~/Documents/offsite.pdf"})],
    "impress-presenter-console": [("ImpressTools.set_presenter_console", {"enabled": False})],
}


def api_step(qualname: str, kwargs: dict[str, Any]) -> str:
    """One api_gui model output: a ```python block with the one-line call, keyword arguments as literals."""
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"```python\n{qualname}({args})\n```"


API_SOLUTIONS: dict[str, list[str]] = {task: [api_step(q, kw) for q, kw in calls] for task, calls in API_CALLS.items()}


def api_action(text: str) -> GUIAction:
    """One step of API_SOLUTIONS back to `GUIAction("api", api=..., args=...)`: the fenced line parsed with `ast`,
    keyword literals only (ActionError otherwise). Arguments are checked against the spec where the env runs it."""
    body = text.strip().removeprefix("```python").removesuffix("```").strip()
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as exc:
        raise ActionError(f"not one Python call: {exc.msg}") from None
    call = tree.body
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and not call.args
    ):
        raise ActionError("expected Tool.method(keyword=literal, ...)")
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None}
    except ValueError:
        raise ActionError("arguments must be literals") from None
    if len(kwargs) != len(call.keywords):
        raise ActionError("no **kwargs")
    return GUIAction("api", api=f"{call.func.value.id}.{call.func.attr}", args=kwargs)
