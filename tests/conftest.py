"""Suite-wide settings: hypothesis derandomised under CI=true; GPU tests (`test_*_on_gpu.py`) skipped with a visible
reason where no CUDA device is present; the `e2e` and `desktop` markers put on every test that uses a fixture which
starts verl or a desktop (`MARKER_FIXTURES`); the `chromium`, `local_desktop` and `scratch_env` fixtures."""

import os
import shutil

import pytest
from hypothesis import settings

# No test reaches Hugging Face's hub (the model preflight asks it about hub names): a closed loopback port stands in;
# tests of the hub check start their own hub on 127.0.0.1.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
for _proxy in ("NO_PROXY", "no_proxy"):  # loopback servers of the tests are reached directly, never via a proxy
    os.environ[_proxy] = ",".join(filter(None, [os.environ.get(_proxy), "127.0.0.1", "localhost", "::1"]))

settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")

GPU_TEST_SUFFIX = "_on_gpu.py"
NO_GPU_REASON = "needs a CUDA GPU (torch.cuda.is_available() is False)"


# The layers of the suite (markers registered in pyproject.toml, `-m "not e2e and not desktop"` is the fast loop):
# `e2e`: the test starts verl: a training run (`python -m verl_cua.main` or `verl_cua.sft` in a subprocess, even one
# that stops before Ray; a recipe script), verl's `run_ppo`, or a Ray cluster. `desktop`: the test uses a real Xvfb
# desktop with its apps (the local OSWorld desktop) or a real Chromium (MiniWoB++).
# A test gets the marker of every fixture below that it uses, directly or through other fixtures; a test that starts
# verl or a desktop without one of them carries the marker itself (`pytestmark = pytest.mark.e2e` in its module, or
# `@pytest.mark.e2e` on it). tests/test_markers_on_cpu.py checks both.
MARKER_FIXTURES = {
    "chromium": "desktop",  # Debian's Chromium for MiniWoB++ (below)
    "local_desktop": "desktop",  # the local OSWorld desktop (below)
    "sft_model": "e2e",  # verl's SFT trainer on the oracle's runs (tests/integrations/verl/conftest.py)
    "quickstart": "e2e",  # recipes/quickstart.sh: GRPO training, merge, serve, eval (test_learning_on_cpu.py)
    "ray_cluster": "e2e",  # a Ray cluster for the hf rollout's replica (test_hf_rollout_on_cpu.py)
    "local_ray": "e2e",  # a Ray cluster for the Ray env pool (test_ray_pool_on_cpu.py)
}
COLLECTED = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the items that use a fixture of `MARKER_FIXTURES`, keep what was collected for the markers' check, and skip
    the items of `*_on_gpu.py` files where torch sees no CUDA device (torch is imported only if any exist)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ())) & MARKER_FIXTURES.keys()
        for marker in sorted({MARKER_FIXTURES[name] for name in used}):
            item.add_marker(marker)
    config.stash[COLLECTED] = [
        (item.nodeid, getattr(item, "originalname", item.name), frozenset(getattr(item, "fixturenames", ())),
         frozenset(mark.name for mark in item.iter_markers()))
        for item in items
    ]  # fmt: skip
    gpu_items = [item for item in items if item.path.name.endswith(GPU_TEST_SUFFIX)]
    if not gpu_items or _cuda_available():
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=NO_GPU_REASON))


def _cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium/chromedriver (tests/run.sh installs them): fail in CI when missing, skip elsewhere."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return True
    message = "chromium/chromedriver missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def local_desktop():
    """The local OSWorld desktop's system side (envs/local_desktop/setup.sh): fail in CI when missing, else skip."""
    from verl_cua.envs.osworld.local_desktop import DesktopStartError, check_system

    try:
        check_system()
        import desktop_env  # noqa: F401
    except (DesktopStartError, ImportError) as exc:
        message = f"local desktop unavailable ({exc}); run envs/local_desktop/setup.sh and envs/osworld/install.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return True


@pytest.fixture
def scratch_env():
    """`register(name, spec=None, entry_point=None)`: register an env for one test (by default a factory that builds
    nothing), removed after it."""
    from verl_cua.envs import ENV_REGISTRY, ENV_SPECS, register_env

    names = []

    def register(name, spec=None, entry_point=None):
        register_env(name, entry_point or (lambda **kwargs: None), spec)
        names.append(name)
        return name

    yield register
    for name in names:
        ENV_REGISTRY.pop(name, None)
        ENV_SPECS.pop(name, None)


@pytest.fixture(scope="session")
def marker_fixtures() -> dict[str, str]:
    """`MARKER_FIXTURES`: fixture name -> the marker every test using it gets (for tests/test_markers_on_cpu.py)."""
    return dict(MARKER_FIXTURES)


@pytest.fixture(scope="session")
def collected_tests(request) -> list[tuple[str, str, frozenset, frozenset]]:
    """(node id, function name, fixtures, markers) of every test this session collected, before `-m` or `-k`
    deselected any (for tests/test_markers_on_cpu.py)."""
    return list(request.config.stash.get(COLLECTED, []))
