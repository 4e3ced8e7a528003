"""Scripted `api_gui` solutions of our OSWorld office tasks (envs/osworld/tasks): model outputs, one per step, each a
```python block holding ONE line that calls an app API with keyword arguments (ComputerRL's API-GUI action space).

`API_CALLS` is the same as data, `(tool.method, kwargs)` per step; `API_SOLUTIONS` renders it as model text;
`parse_action(text, format="api_gui", screen=...)` reads a step back into its `api` action."""

from __future__ import annotations

from typing import Any

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
