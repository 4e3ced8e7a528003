"""Hostile files for the tests: a spreadsheet of millions of empty cells, small on disk, costly to parse."""

CELL_BOMB = """
import zipfile
ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
rel = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships'
pkg = 'http://schemas.openxmlformats.org/package/2006/relationships'
with zipfile.ZipFile({path!r}, 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('[Content_Types].xml', '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
               '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
               '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
               'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>')
    z.writestr('_rels/.rels', f'<Relationships xmlns="{{pkg}}"><Relationship Id="rId1" '
               f'Type="{{rel}}/officeDocument" Target="xl/workbook.xml"/></Relationships>')
    z.writestr('xl/workbook.xml', f'<workbook {{ns}} xmlns:r="{{rel}}"><sheets><sheet name="S" sheetId="1" '
               'r:id="rId1"/></sheets></workbook>')
    z.writestr('xl/_rels/workbook.xml.rels', f'<Relationships xmlns="{{pkg}}"><Relationship Id="rId1" '
               f'Type="{{rel}}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>')
    row = '<row>' + '<c/>' * 1000 + '</row>'
    z.writestr('xl/worksheets/sheet1.xml', f'<worksheet {{ns}}><sheetData>' + row * {rows} + '</sheetData></worksheet>')
print('written')
"""


def cell_bomb(path: str, rows: int) -> str:
    """Python code (for `python -c` or a desktop's `/run_python`) writing an xlsx of `rows` x 1000 empty cells at
    `path` (8000 rows: 60 kB on disk, 30 MB unzipped; openpyxl needs about 400 MB and 6 s per million cells)."""
    return CELL_BOMB.format(path=path, rows=int(rows))
