"""In-desktop part of the app APIs: `WriterTools` on the open text document (joined after uno_common.py; runs inside
the desktop only). Each method takes the `Office` first, then the spec's parameters by the same names."""

# ruff: noqa: F821  (ApiError, prop, ... come from uno_common.py, joined before this file)

WRITER = "com.sun.star.text.TextDocument"
ADJUST = {"left": "LEFT", "center": "CENTER", "right": "RIGHT", "justify": "BLOCK"}
ADJUST_NAMES = {0: "left", 1: "right", 2: "justify", 3: "center"}


def _writer(office):
    return office.document(WRITER, "Writer")


def _paragraphs(doc):
    """The body text's paragraphs in order (tables skipped)."""
    out, items = [], doc.getText().createEnumeration()
    while items.hasMoreElements():
        item = items.nextElement()
        if item.supportsService("com.sun.star.text.Paragraph"):
            out.append(item)
    return out


def _paragraph(doc, number):
    paragraphs = _paragraphs(doc)
    if not 1 <= number <= len(paragraphs):
        raise ApiError(f"no paragraph {number}; the document has {len(paragraphs)} (numbered from 1)")
    return paragraphs[number - 1]


def _insert_lines(text, at, lines):
    """Insert `lines` at the text range `at`, a paragraph break between them."""
    from com.sun.star.text.ControlCharacter import PARAGRAPH_BREAK

    cursor = text.createTextCursorByRange(at)
    for i, line in enumerate(lines):
        if i:
            text.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
        text.insertString(cursor, line, False)


def _char_props(target, bold=None, italic=None, underline=None, color=""):
    import uno

    done = []
    if bold is not None:
        target.CharWeight = 150.0 if bold else 100.0
        done.append("bold" if bold else "not bold")
    if italic is not None:
        target.CharPosture = uno.Enum("com.sun.star.awt.FontSlant", "ITALIC" if italic else "NONE")
        done.append("italic" if italic else "not italic")
    if underline is not None:
        target.CharUnderline = 1 if underline else 0
        done.append("underlined" if underline else "not underlined")
    if color:
        target.CharColor = color_value(color)
        done.append(f"color {color}")
    return done


WRITER_FILTERS = {
    "docx": ("MS Word 2007 XML", False), "doc": ("MS Word 97", False), "odt": ("writer8", False),
    "rtf": ("Rich Text Format", False), "txt": ("Text", False), "html": ("HTML (StarWriter)", False),
    "pdf": ("writer_pdf_Export", True),
}  # fmt: skip


class WriterTools:
    @staticmethod
    def get_document_text(office):
        return _writer(office).getText().getString()

    @staticmethod
    def get_paragraphs(office, start=1, count=50):
        paragraphs = _paragraphs(_writer(office))
        first = max(start, 1)
        lines = [f"{len(paragraphs)} paragraphs"]
        for number in range(first, min(first + max(count, 0), len(paragraphs) + 1)):
            p = paragraphs[number - 1]
            align = ADJUST_NAMES.get(_adjust(p), "left")
            text = p.getString()
            lines.append(f"{number} [{p.ParaStyleName}, {align}] {text[:200]}{'...' if len(text) > 200 else ''}")
        return "\n".join(lines)

    @staticmethod
    def find_and_replace(office, find, replace, match_case=False, whole_words=False, regex=False):
        if not find:
            raise ApiError("find is empty")
        doc = _writer(office)
        descriptor = doc.createReplaceDescriptor()
        descriptor.SearchString = find
        descriptor.ReplaceString = replace
        descriptor.SearchCaseSensitive = bool(match_case)
        descriptor.SearchWords = bool(whole_words)
        descriptor.SearchRegularExpression = bool(regex)
        count = doc.replaceAll(descriptor)
        return f"replaced {count} occurrence{'s' if count != 1 else ''} of {find!r}"

    @staticmethod
    def insert_text(office, text, position="end"):
        body = _writer(office).getText()
        _insert_lines(body, body.getEnd() if position == "end" else body.getStart(), text.split("\n"))
        return f"inserted {len(text)} characters at the {position}"

    @staticmethod
    def append_paragraph(office, text):
        doc = _writer(office)
        body = doc.getText()
        paragraphs = _paragraphs(doc)
        empty = len(paragraphs) == 1 and paragraphs[0].getString() == ""
        _insert_lines(body, body.getEnd(), (text.split("\n") if empty else ["", *text.split("\n")]))
        return f"appended paragraph {len(_paragraphs(doc))}"

    @staticmethod
    def set_paragraph_text(office, paragraph, text):
        if "\n" in text:
            raise ApiError("text has a newline: one paragraph only (append_paragraph adds more)")
        _paragraph(_writer(office), paragraph).setString(text)
        return f"paragraph {paragraph} set"

    @staticmethod
    def set_paragraph_alignment(office, paragraph, alignment):
        import uno

        doc = _writer(office)
        targets = _paragraphs(doc) if paragraph == 0 else [_paragraph(doc, paragraph)]
        for p in targets:
            p.ParaAdjust = uno.Enum("com.sun.star.style.ParagraphAdjust", ADJUST[alignment])
        return f"{'every paragraph' if paragraph == 0 else f'paragraph {paragraph}'} aligned {alignment}"

    @staticmethod
    def set_paragraph_style(office, paragraph, style):
        doc = _writer(office)
        styles = doc.getStyleFamilies().getByName("ParagraphStyles")
        names = {styles.getByName(n).DisplayName: n for n in styles.getElementNames()}
        if style not in names and not styles.hasByName(style):
            raise ApiError(f"no paragraph style {style!r}; e.g. {', '.join(sorted(names)[:12])}")
        _paragraph(doc, paragraph).ParaStyleName = names.get(style, style)
        return f"paragraph {paragraph} has style {style!r}"

    @staticmethod
    def set_font(office, font_name="", font_size=0.0, bold=None, italic=None, paragraph=0):
        doc = _writer(office)
        if paragraph == 0:
            body = doc.getText()
            target = body.createTextCursor()
            target.gotoStart(False)
            target.gotoEnd(True)
        else:
            target = _paragraph(doc, paragraph)
        done = []
        if font_name:
            target.CharFontName = font_name
            target.CharFontNameAsian = font_name
            target.CharFontNameComplex = font_name
            done.append(f"font {font_name!r}")
        if font_size:
            if not 1 <= font_size <= 400:
                raise ApiError("font_size must be between 1 and 400 points")
            target.CharHeight = float(font_size)
            done.append(f"{font_size:g} pt")
        done += _char_props(target, bold=bold, italic=italic)
        if not done:
            raise ApiError("nothing to set: give font_name, font_size, bold or italic")
        return f"{'the whole document' if paragraph == 0 else f'paragraph {paragraph}'}: {', '.join(done)}"

    @staticmethod
    def format_text(office, find, bold=None, italic=None, underline=None, color=""):
        if not find:
            raise ApiError("find is empty")
        doc = _writer(office)
        descriptor = doc.createSearchDescriptor()
        descriptor.SearchString = find
        found = doc.findAll(descriptor)
        if found.getCount() == 0:
            raise ApiError(f"{find!r} does not occur in the document")
        done = []
        for i in range(found.getCount()):
            done = _char_props(found.getByIndex(i), bold=bold, italic=italic, underline=underline, color=color)
        if not done:
            raise ApiError("nothing to set: give bold, italic, underline or color")
        return f"{found.getCount()} occurrence(s) of {find!r}: {', '.join(done)}"

    @staticmethod
    def insert_page_break(office, paragraph=0, before_text=""):
        import uno

        doc = _writer(office)
        if paragraph:
            number = paragraph
        elif before_text.strip():
            texts = [p.getString().strip() for p in _paragraphs(doc)]
            wanted = before_text.strip()
            hits = [i for i, t in enumerate(texts) if t.startswith(wanted)] or [
                i for i, t in enumerate(texts) if wanted in t
            ]
            if not hits:
                raise ApiError(f"no paragraph begins with {before_text!r}")
            number = hits[0] + 1
        else:
            raise ApiError("give paragraph (its number) or before_text")
        _paragraph(doc, number).BreakType = uno.Enum("com.sun.star.style.BreakType", "PAGE_BEFORE")
        return f"paragraph {number} starts a new page"

    @staticmethod
    def save(office):
        return save_document(_writer(office), WRITER_FILTERS)

    @staticmethod
    def save_as(office, path):
        return save_document_as(_writer(office), path, WRITER_FILTERS)


def _adjust(paragraph):
    """ParaAdjust as the ParagraphAdjust enum's index (LEFT 0, RIGHT 1, BLOCK 2, CENTER 3)."""
    value = paragraph.ParaAdjust
    return value if isinstance(value, int) else {"LEFT": 0, "RIGHT": 1, "BLOCK": 2, "CENTER": 3}.get(value.value, 0)
