"""`WriterTools`: LibreOffice Writer's APIs (the document that has the focus; paragraphs are numbered from 1)."""

from verl_cua.actions.apis.base import Param
from verl_cua.actions.apis.toolset import api, register_toolset

PARAGRAPH = Param("paragraph", "int", "a paragraph's number (1 is the first) as get_paragraphs lists them")
ALIGNMENTS = ("left", "center", "right", "justify")


@register_toolset("WriterTools", app="libreoffice_writer")
class WriterTools:
    """Read and edit the open text document."""

    apis = (
        api("get_document_text", "the document's whole text", returns="the text"),
        api("get_paragraphs", "numbered paragraphs with their style and alignment",
            Param("start", "int", "the first paragraph to list", default=1),
            Param("count", "int", "how many", default=50), returns="one line per paragraph"),
        api("find_and_replace", "replace every occurrence of a text",
            Param("find", "str", "the text to find"), Param("replace", "str", "its replacement"),
            Param("match_case", "bool", "case-sensitive", default=False),
            Param("whole_words", "bool", "whole words only", default=False),
            Param("regex", "bool", "find is a regular expression", default=False), returns="how many were replaced"),
        api("insert_text", "insert text at the start or end of the document; '\\n' starts a new paragraph",
            Param("text", "str", "the text"),
            Param("position", "str", "where", default="end", choices=("start", "end"))),
        api("append_paragraph", "add a paragraph at the end (fills the document's only paragraph if it is empty)",
            Param("text", "str", "its text")),
        api("set_paragraph_text", "replace the text of one paragraph", PARAGRAPH, Param("text", "str", "its new text")),
        api("set_paragraph_alignment", "align one paragraph (0: every paragraph)",
            Param("paragraph", "int", "its number (1 is the first); 0 means all"),
            Param("alignment", "str", "how", choices=ALIGNMENTS)),
        api("set_paragraph_style", "apply a paragraph style like 'Heading 1' or 'Default Paragraph Style'", PARAGRAPH,
            Param("style", "str", "the style's name")),
        api("set_font", "set the font of the whole document (paragraph 0) or of one paragraph; ''/0 keeps it",
            Param("font_name", "str", "a font like 'Liberation Serif'", default=""),
            Param("font_size", "float", "points", default=0.0), Param("bold", "bool", "bold or not", default=None),
            Param("italic", "bool", "italic or not", default=None),
            Param("paragraph", "int", "its number; 0 is the whole document", default=0)),
        api("format_text", "set bold/italic/underline/color of every occurrence of a text",
            Param("find", "str", "the text"), Param("bold", "bool", "bold or not", default=None),
            Param("italic", "bool", "italic or not", default=None),
            Param("underline", "bool", "underlined or not", default=None),
            Param("color", "str", "a name like 'red' or '#RRGGBB'; '' keeps it", default=""),
            returns="how many occurrences"),
        api("insert_page_break", "start a paragraph on a new page: by its number, or the first that begins with a text",
            Param("paragraph", "int", "its number (1 is the first); 0: use before_text", default=0),
            Param("before_text", "str", "the paragraph's first words", default="")),
        api("save", "save the document where it is, in its own format (docx stays docx)"),
        api("save_as", "save the document under a new path; the extension picks the format (docx, odt, pdf, txt...)",
            Param("path", "path", "like ~/Documents/out.docx")),
    )  # fmt: skip
