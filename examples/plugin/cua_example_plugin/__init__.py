"""An example verl-cua plug-in: importing it registers the `pyautogui_one` action format and the `miniwob-clicks`
env. verl-cua imports it through the `verl_cua.plugins` entry point of its pyproject.toml."""

from cua_example_plugin import clicks, one_action  # noqa: F401  (each registers on import)
