"""`CalcTools`: LibreOffice Calc's APIs (the workbook that has the focus; `sheet` '' means the active sheet)."""

from verl_cua.actions.apis.base import Param
from verl_cua.actions.apis.toolset import api, register_toolset

SHEET = Param("sheet", "str", "the sheet's name; '' is the active sheet", default="")


@register_toolset("CalcTools", app="libreoffice_calc")
class CalcTools:
    """Read and edit the open spreadsheet."""

    apis = (
        api("get_workbook_info", "the file, its sheets, the active one and each sheet's used range",
            returns="one line per sheet"),
        api("get_range_values", "the values of a range, one tab-separated line per row",
            Param("range", "range", "cells like A1:D10"), SHEET, returns="the values"),
        api("set_cell_value", "write one cell: a number (numeric text too), text, or a formula starting with '='",
            Param("cell", "cell", "like B7"), Param("value", "value", "number, text or '=FORMULA'"), SHEET),
        api("set_range_values", "write a table of values (rows of cells) with its top-left corner at a cell",
            Param("cell", "cell", "the top-left cell"), Param("values", "table", "rows of values"), SHEET),
        api("set_column_values", "write values down a column from a row (numeric text becomes a number)",
            Param("column", "str", "a column letter like 'C'"), Param("values", "str_list", "the values, top first"),
            Param("start_row", "int", "the first row's number", default=1), SHEET),
        api("insert_rows", "insert empty rows", Param("before_row", "int", "the row number they go above"),
            Param("count", "int", "how many", default=1), SHEET),
        api("delete_rows", "delete whole rows", Param("start_row", "int", "the first row's number"),
            Param("count", "int", "how many", default=1), SHEET),
        api("clear_range", "empty the cells of a range (contents and formats)",
            Param("range", "range", "cells like A1:D10"), SHEET),
        api("set_font", "set the font of a range's cells; '' or 0 keeps that attribute",
            Param("range", "range", "cells like A1:D1"), Param("bold", "bool", "bold or not", default=None),
            Param("italic", "bool", "italic or not", default=None),
            Param("font_name", "str", "a font like 'Liberation Sans'", default=""),
            Param("font_size", "float", "points", default=0.0), SHEET),
        api("highlight_range", "fill a range's background with a color",
            Param("range", "range", "cells like A1:D1"),
            Param("color", "str", "a name like 'yellow' or '#RRGGBB'; 'none' removes it", default="yellow"), SHEET),
        api("set_number_format", "the number format of a range's cells, like '0.00', '0%' or 'YYYY-MM-DD'",
            Param("range", "range", "cells like B2:B10"), Param("format", "str", "a format code"), SHEET),
        api("sort_range", "sort a range's rows by one of its columns",
            Param("range", "range", "the rows to sort, header included if has_header, like A1:C6"),
            Param("key_column", "str", "a column letter like 'C', or the header text"),
            Param("descending", "bool", "highest first", default=False),
            Param("has_header", "bool", "the range's first row is a header and stays on top", default=True), SHEET),
        api("rename_sheet", "rename a sheet", Param("old_name", "str", "its name now"),
            Param("new_name", "str", "its new name")),
        api("add_sheet", "insert a new sheet", Param("name", "str", "its name"),
            Param("position", "int", "0 for first; -1 appends", default=-1)),
        api("freeze_panes", "freeze the rows above and the columns left of a cell (A1 unfreezes)",
            Param("cell", "cell", "like B2: freezes row 1 and column A"), SHEET),
        api("select_range", "select a range on screen (and show its sheet)",
            Param("range", "range", "cells like A1:D1"), SHEET),
        api("save", "save the workbook where it is, in its own format (xlsx stays xlsx)"),
        api("save_as", "save the workbook under a new path; the extension picks the format (xlsx, ods, csv, pdf...)",
            Param("path", "path", "like ~/Documents/out.xlsx")),
    )  # fmt: skip
