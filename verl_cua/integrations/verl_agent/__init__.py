"""verl-agent adapter: `GUIEnvironmentManager` (its env-manager interface over our `EnvPool`), `install()` (our envs
and estimators inside its TaskRunner) and the `main` entry. Imports no verl-agent module until `install()`."""

from verl_cua.integrations.verl_agent.env_manager import GUIEnvironmentManager
from verl_cua.integrations.verl_agent.install import install
from verl_cua.integrations.verl_agent.make_envs import make_gui_envs

__all__ = ["GUIEnvironmentManager", "install", "make_gui_envs"]
