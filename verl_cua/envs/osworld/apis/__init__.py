"""The app APIs of the `api_gui` action format, run on OSWorld desktops: `runner` (host side) posts each checked call
with the in-desktop library (`desktop/*.py`, read as text, never imported here) to the desktop's `/run_python`."""

from verl_cua.envs.osworld.apis.runner import ApiOutcome, build_script, focused_app, library_source, run_api

__all__ = ["ApiOutcome", "build_script", "focused_app", "library_source", "run_api"]
