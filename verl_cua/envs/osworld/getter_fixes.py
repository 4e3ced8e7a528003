"""Our versions of OSWorld getters whose upstream reading is wrong on today's browsers (used in their place).

`data_delete_automacally` (sic, upstream's name): upstream answers "true" when Chrome's Preferences hold
`profile.default_content_setting_values` at all, and Chromium since about version 130 always writes that dict (a
migration flag), so the task scored 1.0 before any action. The setting the task asks for ("delete data sites have
saved when you close all windows") is the cookies content setting at SESSION_ONLY (4); that is what we read.
"""

from __future__ import annotations

import json
import logging

logger = logging.getLogger(__name__)
SESSION_ONLY = 4  # Chrome's ContentSetting for "clear on exit"


def _preferences(env) -> dict | None:
    """Chrome's Default/Preferences in the desktop's HOME (Linux layout), None when unreadable."""
    path = env.controller.execute_python_command(
        "import os; print(os.path.join(os.getenv('HOME'), '.config/google-chrome/Default/Preferences'))"
    )["output"].strip()
    content = env.controller.get_file(path)
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        logger.warning("Chrome's Preferences at %s are not JSON", path)
        return None


def get_data_delete_automacally(env, config: dict) -> str | None:
    """ "true" when Chrome clears site data on exit (cookies content setting SESSION_ONLY), else "false"."""
    data = _preferences(env)
    if data is None:
        return None
    settings = data.get("profile", {}).get("default_content_setting_values", {})
    return "true" if settings.get("cookies") == SESSION_ONLY else "false"


GETTER_FIXES = {"get_data_delete_automacally": get_data_delete_automacally}
