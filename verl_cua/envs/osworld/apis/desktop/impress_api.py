"""In-desktop part of the app APIs: `ImpressTools` on the open presentation (joined after uno_common.py; runs inside
the desktop only). Each method takes the `Office` first, then the spec's parameters by the same names."""

# ruff: noqa: F821  (ApiError, prop, ... come from uno_common.py, joined before this file)

IMPRESS = "com.sun.star.presentation.PresentationDocument"
TITLE_SHAPE = "com.sun.star.presentation.TitleTextShape"
BODY_SHAPES = ("com.sun.star.presentation.OutlinerShape", "com.sun.star.presentation.SubtitleShape")
TITLE_CONTENT_LAYOUT = 1  # AutoLayout "Title, Content"


def _impress(office):
    return office.document(IMPRESS, "Impress")


def _slide(doc, number):
    pages = doc.getDrawPages()
    if not 1 <= number <= pages.getCount():
        raise ApiError(f"no slide {number}; the presentation has {pages.getCount()} (numbered from 1)")
    return pages.getByIndex(number - 1)


def _shapes(page):
    return [page.getByIndex(i) for i in range(page.getCount())]


def _shape(page, types, what, number):
    for shape in _shapes(page):
        if shape.getShapeType() in types:
            return shape
    raise ApiError(f"slide {number} has no {what} box")


IMPRESS_FILTERS = {
    "pptx": ("Impress MS PowerPoint 2007 XML", False), "ppt": ("MS PowerPoint 97", False), "odp": ("impress8", False),
    "pdf": ("impress_pdf_Export", True),
}  # fmt: skip


class ImpressTools:
    @staticmethod
    def get_slides_info(office):
        doc = _impress(office)
        pages = doc.getDrawPages()
        lines = [f"{pages.getCount()} slides"]
        for i in range(pages.getCount()):
            page = pages.getByIndex(i)
            texts = []
            for shape in _shapes(page):
                text = shape.getString() if hasattr(shape, "getString") else ""
                if text.strip():
                    kind = shape.getShapeType().rsplit(".", 1)[-1].replace("Shape", "")
                    texts.append(f"  {kind}: {text.strip()[:300]}")
            lines.append(f"slide {i + 1} (layout {page.Layout}):")
            lines.extend(texts or ["  (no text)"])
        return "\n".join(lines)

    @staticmethod
    def go_to_slide(office, slide):
        doc = _impress(office)
        doc.getCurrentController().setCurrentPage(_slide(doc, slide))
        return f"showing slide {slide}"

    @staticmethod
    def add_slide(office, after=0, title="", body=""):
        doc = _impress(office)
        pages = doc.getDrawPages()
        count = pages.getCount()
        follows = count if after <= 0 or after > count else after
        page = pages.insertNewByIndex(follows - 1)  # inserts after that index
        number = follows + 1
        page.Layout = TITLE_CONTENT_LAYOUT
        if title:
            _shape(page, (TITLE_SHAPE,), "title", number).setString(title)
        if body:
            _shape(page, BODY_SHAPES, "content", number).setString(body)
        doc.getCurrentController().setCurrentPage(page)
        return f"added slide {_index(pages, page) + 1} of {pages.getCount()}"

    @staticmethod
    def delete_slide(office, slide):
        doc = _impress(office)
        pages = doc.getDrawPages()
        if pages.getCount() == 1:
            raise ApiError("cannot delete the only slide")
        pages.remove(_slide(doc, slide))
        return f"deleted slide {slide}; {pages.getCount()} left"

    @staticmethod
    def duplicate_slide(office, slide):
        doc = _impress(office)
        copy = doc.duplicate(_slide(doc, slide))
        return f"slide {slide} copied to slide {_index(doc.getDrawPages(), copy) + 1}"

    @staticmethod
    def set_slide_title(office, slide, title):
        doc = _impress(office)
        _shape(_slide(doc, slide), (TITLE_SHAPE,), "title", slide).setString(title)
        return f"slide {slide} title set"

    @staticmethod
    def set_slide_body(office, slide, text):
        doc = _impress(office)
        _shape(_slide(doc, slide), BODY_SHAPES, "content", slide).setString(text)
        return f"slide {slide} content set"

    @staticmethod
    def set_slide_notes(office, slide, notes):
        doc = _impress(office)
        notes_page = _slide(doc, slide).getNotesPage()
        _shape(notes_page, ("com.sun.star.presentation.NotesShape",), "notes", slide).setString(notes)
        return f"slide {slide} notes set"

    @staticmethod
    def set_presenter_console(office, enabled):
        provider = office.ctx.getValueByName("/singletons/com.sun.star.configuration.theDefaultProvider")
        access = provider.createInstanceWithArguments(
            "com.sun.star.configuration.ConfigurationUpdateAccess",
            (prop("nodepath", "/org.openoffice.Office.Impress/Misc/Start"),),
        )
        access.setPropertyValue("EnablePresenterScreen", bool(enabled))
        access.commitChanges()
        provider.flush()  # write registrymodifications.xcu now, not on LibreOffice's next idle write
        return f"Presenter Console {'enabled' if enabled else 'disabled'}"

    @staticmethod
    def export_pdf(office, path):
        if not path.lower().endswith(".pdf"):
            raise ApiError("path must end in .pdf")
        return save_document_as(_impress(office), path, IMPRESS_FILTERS)

    @staticmethod
    def save(office):
        return save_document(_impress(office), IMPRESS_FILTERS)

    @staticmethod
    def save_as(office, path):
        return save_document_as(_impress(office), path, IMPRESS_FILTERS)


def _index(pages, page):
    for i in range(pages.getCount()):
        if pages.getByIndex(i) == page:
            return i
    return pages.getCount() - 1
