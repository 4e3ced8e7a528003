"""`ImpressTools`: LibreOffice Impress's APIs (the presentation that has the focus; slides are numbered from 1)."""

from verl_cua.actions.apis.base import Param
from verl_cua.actions.apis.toolset import api, register_toolset

SLIDE = Param("slide", "int", "a slide's number (1 is the first)")


@register_toolset("ImpressTools", app="libreoffice_impress")
class ImpressTools:
    """Read and edit the open presentation, and Impress's settings."""

    apis = (
        api("get_slides_info", "every slide's number, layout, title and texts", returns="one block per slide"),
        api("go_to_slide", "show a slide in the editor", SLIDE),
        api("add_slide", "insert a title-and-content slide",
            Param("after", "int", "the number of the slide it follows; 0: after the last", default=0),
            Param("title", "str", "its title", default=""),
            Param("body", "str", "its content; '\\n' separates bullet points", default="")),
        api("delete_slide", "delete a slide", SLIDE),
        api("duplicate_slide", "copy a slide; the copy follows it", SLIDE),
        api("set_slide_title", "set a slide's title text", SLIDE, Param("title", "str", "the title")),
        api("set_slide_body", "set the text of a slide's content (or subtitle) box; '\\n' separates bullets", SLIDE,
            Param("text", "str", "the text")),
        api("set_slide_notes", "set a slide's speaker notes", SLIDE, Param("notes", "str", "the notes")),
        api("set_presenter_console", "turn Impress's Presenter Console (slide shows' second-screen view) on or off",
            Param("enabled", "bool", "on or off")),
        api("export_pdf", "export the presentation (all slides) as a PDF", Param("path", "path", "like ~/out.pdf")),
        api("save", "save the presentation where it is, in its own format (pptx stays pptx)"),
        api("save_as", "save the presentation under a new path; the extension picks the format (pptx, odp, pdf...)",
            Param("path", "path", "like ~/Documents/talk.pptx")),
    )  # fmt: skip
