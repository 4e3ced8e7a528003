"""In-desktop part of the app APIs: `CalcTools` on the open spreadsheet (joined after uno_common.py; runs inside the
desktop only). Each method takes the `Office` first, then the spec's parameters by the same names."""

# ruff: noqa: F821  (ApiError, prop, ... come from uno_common.py, joined before this file)
import re

CALC = "com.sun.star.sheet.SpreadsheetDocument"
MAX_READ_CELLS = 10000
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _calc(office):
    return office.document(CALC, "Calc")


def _sheet(doc, name):
    if not name:
        return doc.getCurrentController().getActiveSheet()
    sheets = doc.getSheets()
    if not sheets.hasByName(name):
        raise ApiError(f"no sheet {name!r}; sheets: {', '.join(sheets.getElementNames())}")
    return sheets.getByName(name)


def _range(sheet, ref):
    try:
        return sheet.getCellRangeByName(ref)
    except Exception:
        raise ApiError(f"{ref!r} is not a range of sheet {sheet.getName()!r}") from None


def _column_index(letters):
    index = 0
    for ch in letters.upper():
        index = index * 26 + ord(ch) - 64
    return index - 1


def _write(cell, value):
    """A number, a formula ('=...'; Excel-style ',' separators accepted) or text, as typing it would."""
    if isinstance(value, (int, float)):
        cell.setValue(float(value))
    elif value.startswith("=") and len(value) > 1:
        cell.setFormula(value)
        if cell.getError() and "," in value and ";" not in value:
            cell.setFormula(_semicolons(value))  # LibreOffice's API grammar separates arguments with ';'
    elif _NUMBER.fullmatch(value.strip()):
        cell.setValue(float(value))
    else:
        cell.setString(value)


def _semicolons(formula):
    out, quoted = [], False
    for ch in formula:
        if ch == '"':
            quoted = not quoted
        out.append(";" if ch == "," and not quoted else ch)
    return "".join(out)


def _used(sheet):
    cursor = sheet.createCursor()
    cursor.gotoStartOfUsedArea(False)
    cursor.gotoEndOfUsedArea(True)
    return cursor.AbsoluteName.split(".", 1)[-1].replace("$", "")


CALC_FILTERS = {
    "xlsx": ("Calc MS Excel 2007 XML", False), "xls": ("MS Excel 97", False), "ods": ("calc8", False),
    "csv": ("Text - txt - csv (StarCalc)", True), "pdf": ("calc_pdf_Export", True),
}  # fmt: skip


class CalcTools:
    @staticmethod
    def get_workbook_info(office):
        doc = _calc(office)
        active = doc.getCurrentController().getActiveSheet().getName()
        where = _display(doc.getLocation()) if doc.hasLocation() else "(never saved)"
        lines = [f"workbook {where}; active sheet {active!r}"]
        sheets = doc.getSheets()
        for i, name in enumerate(sheets.getElementNames()):
            lines.append(f"sheet {i} {name!r}: used range {_used(sheets.getByName(name))}")
        return "\n".join(lines)

    @staticmethod
    def get_range_values(office, range, sheet=""):
        cells = _range(_sheet(_calc(office), sheet), range)
        address = cells.getRangeAddress()
        count = (address.EndColumn - address.StartColumn + 1) * (address.EndRow - address.StartRow + 1)
        if count > MAX_READ_CELLS:
            raise ApiError(f"{range} has {count} cells; read at most {MAX_READ_CELLS} at once")
        return table_text(cells.getDataArray())

    @staticmethod
    def set_cell_value(office, cell, value, sheet=""):
        target = _range(_sheet(_calc(office), sheet), cell).getCellByPosition(0, 0)
        _write(target, value)
        shown = target.getString()
        return f"{cell} = {shown}" + (" (formula error)" if target.getError() else "")

    @staticmethod
    def set_range_values(office, cell, values, sheet=""):
        target = _sheet(_calc(office), sheet)
        corner = _range(target, cell).getRangeAddress()
        for r, row in enumerate(values):
            for c, value in enumerate(row):
                _write(target.getCellByPosition(corner.StartColumn + c, corner.StartRow + r), value)
        width = max((len(row) for row in values), default=0)
        return f"wrote {len(values)} rows x {width} columns from {cell}"

    @staticmethod
    def set_column_values(office, column, values, start_row=1, sheet=""):
        if not re.fullmatch(r"[A-Za-z]{1,3}", column):
            raise ApiError(f"column {column!r} is not a column letter like C")
        if start_row < 1:
            raise ApiError("start_row is a row number: 1 or more")
        target = _sheet(_calc(office), sheet)
        for i, value in enumerate(values):
            _write(target.getCellByPosition(_column_index(column), start_row - 1 + i), value)
        last = start_row + len(values) - 1
        return f"wrote {len(values)} values to {column.upper()}{start_row}:{column.upper()}{last}"

    @staticmethod
    def insert_rows(office, before_row, count=1, sheet=""):
        if before_row < 1 or not 1 <= count <= 10000:
            raise ApiError("before_row is a row number (1 or more); count is 1 to 10000")
        _sheet(_calc(office), sheet).getRows().insertByIndex(before_row - 1, count)
        return f"inserted {count} row(s) above row {before_row}"

    @staticmethod
    def delete_rows(office, start_row, count=1, sheet=""):
        if start_row < 1 or not 1 <= count <= 10000:
            raise ApiError("start_row is a row number (1 or more); count is 1 to 10000")
        _sheet(_calc(office), sheet).getRows().removeByIndex(start_row - 1, count)
        return f"deleted rows {start_row} to {start_row + count - 1}"

    @staticmethod
    def clear_range(office, range, sheet=""):
        cells = _range(_sheet(_calc(office), sheet), range)  # connects: imports uno, which makes `com` importable
        from com.sun.star.sheet.CellFlags import ANNOTATION, DATETIME, FORMULA, HARDATTR, STRING, STYLES, VALUE

        cells.clearContents(VALUE | DATETIME | STRING | ANNOTATION | FORMULA | HARDATTR | STYLES)
        return f"cleared {range}"

    @staticmethod
    def set_font(office, range, bold=None, italic=None, font_name="", font_size=0.0, sheet=""):
        import uno

        cells = _range(_sheet(_calc(office), sheet), range)
        done = []
        if bold is not None:
            cells.CharWeight = 150.0 if bold else 100.0
            done.append("bold" if bold else "not bold")
        if italic is not None:
            cells.CharPosture = uno.Enum("com.sun.star.awt.FontSlant", "ITALIC" if italic else "NONE")
            done.append("italic" if italic else "not italic")
        if font_name:
            cells.CharFontName = font_name
            done.append(f"font {font_name!r}")
        if font_size:
            if not 1 <= font_size <= 400:
                raise ApiError("font_size must be between 1 and 400 points")
            cells.CharHeight = float(font_size)
            done.append(f"{font_size:g} pt")
        if not done:
            raise ApiError("nothing to set: give bold, italic, font_name or font_size")
        return f"{range}: {', '.join(done)}"

    @staticmethod
    def highlight_range(office, range, color="yellow", sheet=""):
        cells = _range(_sheet(_calc(office), sheet), range)
        value = color_value(color)
        cells.CellBackColor = value
        cells.IsCellBackgroundTransparent = value == -1
        return f"{range}: background {color}"

    @staticmethod
    def set_number_format(office, range, format, sheet=""):
        doc = _calc(office)
        cells = _range(_sheet(doc, sheet), range)
        formats = doc.getNumberFormats()
        locale = cells.CharLocale
        key = formats.queryKey(format, locale, False)
        if key == -1:
            try:
                key = formats.addNew(format, locale)
            except Exception:
                raise ApiError(f"{format!r} is not a number format code") from None
        cells.NumberFormat = key
        return f"{range}: format {format!r}"

    @staticmethod
    def sort_range(office, range, key_column, descending=False, has_header=True, sheet=""):
        import uno

        cells = _range(_sheet(_calc(office), sheet), range)
        address = cells.getRangeAddress()
        width = address.EndColumn - address.StartColumn + 1
        header = [str(v).strip() for v in cells.getDataArray()[0]] if has_header else []
        if key_column.strip() in header:  # a header text first: a header "ID" is not column ID
            field = header.index(key_column.strip())
        elif re.fullmatch(r"[A-Za-z]{1,3}", key_column):
            field = _column_index(key_column) - address.StartColumn
        else:
            raise ApiError(f"no column {key_column!r} in the first row of {range}: {', '.join(header)}")
        if not 0 <= field < width:
            raise ApiError(f"column {key_column} is outside {range}")
        sort_field = uno.createUnoStruct("com.sun.star.table.TableSortField")
        sort_field.Field = field
        sort_field.IsAscending = not descending
        descriptor = (
            prop("SortFields", uno.Any("[]com.sun.star.table.TableSortField", (sort_field,))),
            prop("ContainsHeader", bool(has_header)),
        )
        uno.invoke(cells, "sort", (descriptor,))
        order = "descending" if descending else "ascending"
        return f"sorted {range} by column {key_column} ({order})"

    @staticmethod
    def rename_sheet(office, old_name, new_name):
        sheet = _sheet(_calc(office), old_name)
        if not new_name.strip():
            raise ApiError("new_name is empty")
        try:
            sheet.setName(new_name)
        except Exception:
            raise ApiError(f"LibreOffice refused the sheet name {new_name!r}") from None
        if sheet.getName() != new_name:
            raise ApiError(f"LibreOffice refused the sheet name {new_name!r}")
        return f"renamed sheet {old_name!r} to {new_name!r}"

    @staticmethod
    def add_sheet(office, name, position=-1):
        sheets = _calc(office).getSheets()
        if sheets.hasByName(name):
            raise ApiError(f"a sheet {name!r} exists already")
        count = sheets.getCount()
        index = count if position < 0 or position > count else position
        sheets.insertNewByName(name, index)
        return f"added sheet {name!r} at position {index}"

    @staticmethod
    def freeze_panes(office, cell, sheet=""):
        doc = _calc(office)
        target = _sheet(doc, sheet)
        address = _range(target, cell).getRangeAddress()
        controller = doc.getCurrentController()
        controller.setActiveSheet(target)
        controller.freezeAtPosition(address.StartColumn, address.StartRow)
        if address.StartColumn == 0 and address.StartRow == 0:
            return "unfroze the panes"
        return f"froze the rows above and the columns left of {cell}"

    @staticmethod
    def select_range(office, range, sheet=""):
        doc = _calc(office)
        target = _sheet(doc, sheet)
        controller = doc.getCurrentController()
        controller.setActiveSheet(target)
        controller.select(_range(target, range))
        return f"selected {range}"

    @staticmethod
    def save(office):
        return save_document(_calc(office), CALC_FILTERS)

    @staticmethod
    def save_as(office, path):
        return save_document_as(_calc(office), path, CALC_FILTERS)
