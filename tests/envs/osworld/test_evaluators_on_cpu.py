"""OSWorld's metrics and getters, loaded lazily by verl_cua: what our task set uses imports cleanly, nothing heavy
loads with DesktopEnv, and a metric whose heavy package is missing fails with one line naming it (never a score).

Real throughout: OSWorld's metric/getter modules, DesktopEnv, real files in tmp_path. The "heavy packages" of (b)
are sentinel packages on PYTHONPATH that record being imported (a stand-in for torch/easyocr/OpenCV/librosa,
which this machine does not have), in fresh interpreters.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import wave

import pytest
from PIL import Image

from verl_cua.envs.osworld import evaluators
from verl_cua.envs.osworld.check import used_evaluators
from verl_cua.envs.osworld.tasks import load_task, task_names

pytest.importorskip("desktop_env")

HEAVY = ("torch", "easyocr", "cv2", "librosa", "skimage", "fitz")


def _installed(package: str) -> bool:
    """Whether `package` is really importable here (not one of our stubs)."""
    module = sys.modules.get(package)
    if module is not None:
        return not hasattr(module, "__verl_cua_stub__")
    return importlib.util.find_spec(package) is not None


def _resolve(name: str, kind: str):
    return evaluators.metric(name) if kind == "metric" else evaluators.getter(name)


# -- (a) our task set ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", task_names())
def test_every_metric_and_getter_our_task_uses_imports_without_missing_dependency(name):
    task, _ = load_task(name)
    used = used_evaluators(task)
    assert any(kind == "metric" for _, kind in used) or task["evaluator"]["func"] == "infeasible"
    for fn_name, kind in used:
        fn = _resolve(fn_name, kind)
        assert callable(fn) and evaluators.missing_dependency(fn) is None, (name, kind, fn_name)
        expected = fn_name if kind == "metric" else f"get_{fn_name}"
        assert fn.__name__ == expected and fn.__module__.startswith("desktop_env.evaluators.")

    # and DesktopEnv resolves them itself, as at reset, through the lazy packages
    evaluators.install()
    from desktop_env.desktop_env import DesktopEnv

    class Bare:
        pass

    bare = Bare()
    DesktopEnv._set_evaluator_info(bare, task)
    metrics = bare.metric if isinstance(bare.metric, list) else [bare.metric]
    assert all(evaluators.missing_dependency(m) is None for m in metrics)


# -- (b) nothing heavy loads with DesktopEnv -----------------------------------------------------------------------


def _python(script: str, tmp_path, sentinels: bool) -> tuple[dict, list[str]]:
    """Run `script` in a fresh interpreter; returns (its JSON stdout, heavy packages imported from PYTHONPATH)."""
    env = dict(os.environ)
    log = tmp_path / "heavy-imports.log"
    log.write_text("")
    if sentinels:
        root = tmp_path / "sentinels"
        for pkg in HEAVY:  # importing one logs its name, then fails as a broken install would
            (root / pkg).mkdir(parents=True, exist_ok=True)
            log_it = f"open(os.environ['HEAVY_LOG'], 'a').write('{pkg}\\n')"
            (root / pkg / "__init__.py").write_text(f"import os\n{log_it}\nraise ImportError('sentinel {pkg}')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["HEAVY_LOG"] = str(log)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script) + textwrap.dedent(REPORT)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    lines = proc.stdout.strip().splitlines()
    return (json.loads(lines[-1]) if proc.returncode == 0 and lines else {"stderr": proc.stderr[-3000:]}), sorted(
        set(log.read_text().split())
    )


REPORT = """
    import json, sys
    heavy = {HEAVY!r}
    print(json.dumps({{
        "heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy),
        "real_heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy
                             and not hasattr(sys.modules[m], "__verl_cua_stub__")),
        "evaluator_modules": sorted(m for m in sys.modules if m.startswith(("desktop_env.evaluators.metrics.",
                                                                             "desktop_env.evaluators.getters."))),
    }}))
""".format(HEAVY=HEAVY)


def test_install_then_desktop_env_import_loads_no_heavy_package(tmp_path):
    script = """
        from verl_cua.envs.osworld import evaluators
        evaluators.install()
        import desktop_env.desktop_env
        assert desktop_env.desktop_env.metrics.__name__ == "desktop_env.evaluators.metrics"
    """
    report, imported = _python(script, tmp_path, sentinels=True)
    assert report.get("heavy") == [], report
    # no metric/getter module, except the one upstream's SetupController imports itself (compare_urls)
    assert set(report["evaluator_modules"]) <= {"desktop_env.evaluators.metrics.utils"}, report
    assert imported == []


def test_control_upstream_eager_import_does_reach_the_heavy_sentinels(tmp_path):
    """Without install(), DesktopEnv's `from desktop_env.evaluators import metrics` imports every metric module:
    the sentinels see it (so the previous test would see a regression)."""
    script = """
        try:
            import desktop_env.desktop_env
        except ImportError as exc:
            assert "sentinel" in str(exc), exc
    """
    report, imported = _python(script, tmp_path, sentinels=True)
    assert "stderr" not in report, report
    assert imported and set(imported) <= set(HEAVY)


def test_our_task_set_metrics_load_only_stubs_of_heavy_packages(tmp_path):
    script = """
        from verl_cua.envs.osworld.check import check_client
        check_client()  # install(), DesktopEnv, every metric and getter our task set uses
    """
    report, _ = _python(script, tmp_path, sentinels=False)
    assert report.get("real_heavy") == [] and report["evaluator_modules"], report
    assert report["heavy"] == []  # not even stubs: they stay private to the evaluator modules


# -- (c) a metric whose heavy package is missing ---------------------------------------------------------------


def _png(path, colour="white"):
    Image.new("RGB", (24, 12), colour).save(path)
    return str(path)


def _wav(path):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000)
        w.writeframes(b"\x00\x10" * 800)
    return str(path)


MISSING = [
    # metric, package import name, pip name in the message, real inputs
    ("compare_image_text", "easyocr", "easyocr", lambda d: (_png(d / "a.png"), {"type": "text", "text": "hi"})),
    ("compare_audios", "librosa", "librosa", lambda d: (_wav(d / "a.wav"), _wav(d / "b.wav"))),
    ("compare_images", "skimage", "scikit-image", lambda d: (_png(d / "a.png"), _png(d / "b.png", "black"))),
    ("compare_videos", "cv2", "opencv-python-headless", lambda d: (_wav(d / "a.avi"), _wav(d / "b.avi"))),
]


@pytest.mark.parametrize("metric,package,pip_name,inputs", MISSING, ids=[m[0] for m in MISSING])
def test_metric_with_missing_package_raises_one_line_naming_it(tmp_path, metric, package, pip_name, inputs):
    if _installed(package):
        pytest.skip(f"{package} is installed here")
    evaluators.install()
    from desktop_env.evaluators import metrics

    fn = getattr(metrics, metric)  # as DesktopEnv resolves it at reset: no error yet
    predicted = evaluators.missing_dependency(fn)
    with pytest.raises(evaluators.MissingDependency) as info:
        fn(*inputs(tmp_path))  # upstream wraps these in `except Exception` (0 or even 1.0 without the package)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and f"needs the package {pip_name}" in message and "pip install" in message
    assert predicted == message


def test_metric_in_a_module_with_stubs_but_not_using_them_runs(tmp_path):
    fn = evaluators.metric("check_file_exists")  # gimp.py stubs scikit-image and OpenCV; this metric uses neither
    assert fn.__module__ == "desktop_env.evaluators.metrics.gimp"  # upstream's __init__ imports it last from gimp
    assert evaluators.missing_dependency(fn) is None
    _png(tmp_path / "a.png")
    assert fn(str(tmp_path), "a.png") == 1 and fn(str(tmp_path), "b.png") == 0


def test_missing_dependency_answers_for_every_osworld_metric_and_getter():
    evaluators.install()
    from desktop_env.evaluators import getters, metrics

    pip_names = set(evaluators.PIP_NAMES.values())
    seen = set()
    for package, module in (("metrics", metrics), ("getters", getters)):
        for name in evaluators.index(package):
            fn = getattr(module, name)
            message = evaluators.missing_dependency(fn)  # never raises, even for stubbed classes it names
            assert callable(fn)
            if message is not None:
                assert len(message.splitlines()) == 1
                seen.add(message.split("needs the package ")[1].split(": pip")[0])
    assert seen <= pip_names
    assert "easyocr" in seen or _installed("easyocr")
    assert "librosa" in seen or _installed("librosa")


def test_stubs_do_not_leak_to_other_code():
    """After a metric module was loaded with stubs, another library's `import easyocr` still fails normally
    (so its own `except ImportError` fallback works) instead of getting a stub that raises later."""
    evaluators.install()
    from desktop_env.evaluators import metrics

    metrics.compare_image_text, metrics.compare_videos  # noqa: B018 - loads docs.py and vlc.py with their stubs
    for package in ("easyocr", "cv2", "librosa", "skimage"):
        if _installed(package):
            continue
        assert package not in sys.modules
        with pytest.raises(ImportError) as info:
            importlib.import_module(package)
        assert not isinstance(info.value, evaluators.MissingDependency)


# -- (d) names OSWorld does not have ---------------------------------------------------------------------------


def test_unknown_metric_or_getter_is_an_evaluator_error():
    with pytest.raises(evaluators.EvaluatorError, match="OSWorld has no metric 'exact_matchh'"):
        evaluators.metric("exact_matchh")
    with pytest.raises(evaluators.EvaluatorError, match="OSWorld has no getter 'get_vm_cmd'"):
        evaluators.getter("vm_cmd")
    # a public helper of a metrics submodule that OSWorld's `metrics` package does not export
    with pytest.raises(evaluators.EvaluatorError, match="calculate_brightness"):
        evaluators.metric("calculate_brightness")
    evaluators.install()
    from desktop_env.evaluators import metrics

    assert not hasattr(metrics, "exact_matchh")
    assert metrics.infeasible() is None  # upstream's placeholder, which DesktopEnv looks up at reset
