"""`Agent`'s desktop APIs, offered whatever app has the focus (its GUI primitives are GUI actions, not APIs)."""

from verl_cua.actions.apis.base import Param
from verl_cua.actions.apis.toolset import DESKTOP, api, register_toolset

APP_NAMES = (
    "libreoffice calc", "libreoffice writer", "libreoffice impress", "chrome", "terminal", "vlc", "gimp", "files",
)  # fmt: skip


@register_toolset("Agent", app=DESKTOP)
class AgentTools:
    """Open an app or bring a window to the front."""

    apis = (
        api("open_app", "start an app", Param("app_name", "str", "the app", choices=APP_NAMES)),
        api(
            "switch_window",
            "bring the window whose title contains this text to the front",
            Param("title", "str", "a part of the window's title"),
        ),
    )
