"""`verl-cua apis [--app APP]`: the api_gui format's app APIs grouped by tool, each with its signature and doc."""

from pathlib import Path

import pytest

from verl_cua.actions.apis import TOOLSET_REGISTRY, load_builtin_toolsets
from verl_cua.cli import main
from verl_cua.listing import api_apps, api_listing


def test_every_tool_is_a_heading_followed_by_its_apis_signatures():
    load_builtin_toolsets()
    text = api_listing()
    headings = [line.split(" ")[0] for line in text.splitlines() if not line.startswith("  ")]
    assert headings == [t.tool for t in TOOLSET_REGISTRY.values()]
    assert {"Agent", "CalcTools", "WriterTools", "ImpressTools"} <= set(headings)
    assert "CalcTools (app libreoffice_calc): " in text
    assert "  CalcTools.set_cell_value(cell: cell, value: value, sheet: str = '')  # write one cell" in text
    assert "  ImpressTools.export_pdf(path: path)  # " in text
    assert sum(line.startswith("  ") for line in text.splitlines()) == sum(
        len(t.apis) for t in TOOLSET_REGISTRY.values()
    )


def test_one_app_lists_the_desktop_tool_then_the_apps_and_an_unknown_app_is_one_line():
    headings = [line.split(" ")[0] for line in api_listing("libreoffice_writer").splitlines() if line[0] != " "]
    assert headings == ["Agent", "WriterTools"]
    assert api_apps() == ["desktop", "libreoffice_calc", "libreoffice_impress", "libreoffice_writer"]
    with pytest.raises(ValueError, match=r"^no APIs for app 'chrome'; valid apps: desktop, libreoffice_calc"):
        api_listing("chrome")


def test_the_command_prints_it(capsys):
    assert main(["apis", "--app", "libreoffice_calc"]) == 0
    out = capsys.readouterr().out
    assert out == api_listing("libreoffice_calc") and "CalcTools.sort_range(" in out and "WriterTools" not in out
    with pytest.raises(SystemExit) as stop:
        main(["apis", "--app", "chrome"])
    assert stop.value.code == 2


def test_the_api_gui_page_lists_exactly_what_verl_cua_apis_prints(capsys):
    """docs/api_gui.md's listing block is the command's output: a new or changed API shows up in the docs."""
    assert main(["apis"]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    page = (Path(__file__).resolve().parents[1] / "docs" / "api_gui.md").read_text()
    assert f"```text\n{printed}\n```" in page, "docs/api_gui.md: paste the output of `verl-cua apis` into its listing"
