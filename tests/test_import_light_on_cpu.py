"""The actions, envs and tools layers work with torch, verl and ray unavailable (an eval box or desktop host)."""

import subprocess
import sys
import textwrap

BLOCKED = ("torch", "verl", "ray", "torchvision", "vllm", "sglang")


def _run_blocked(body: str) -> None:
    """Run `body` in a fresh Python where the ML stack cannot be imported; fail if any of it got loaded."""
    script = "\n".join(
        [
            "import importlib.util, sys",
            f"BLOCKED = {BLOCKED!r}",
            "for name in BLOCKED:  # None in sys.modules: `import` fails and find_spec() says 'not installed'",
            "    sys.modules[name] = None",
            textwrap.dedent(body),
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED and sys.modules[m] is not None)",
            "assert not loaded, loaded",
            "print('OK')",
        ]
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("OK")


def test_actions_import_and_parse_every_format_without_torch_verl_or_ray():
    _run_blocked(
        """
        assert importlib.util.find_spec("torch") is None
        import verl_cua, verl_cua.cli
        from verl_cua.actions import parse_action
        from verl_cua.actions.prompts import build_prompt
        from verl_cua.integrations.verl import plugin
        outputs = {
            "qwen3vl": '<tool_call>{"name": "computer_use", "arguments": {"action": "wait"}}</tool_call>',
            "qwen25vl": '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", '
                        '"coordinate": [966, 546]}}</tool_call>',
            "uitars": "Action: click(start_box='(161,91)')",
            "pyautogui": "```python\\npyautogui.click(1, 2)\\n```",
            "claude": '{"action": "wait"}',
        }
        for fmt, text in outputs.items():
            result = parse_action(text, format=fmt, screen=(1920, 1080))
            assert result.valid, (fmt, result.error)
            build_prompt(fmt, screen=(1920, 1080))
        """
    )


def test_envs_layer_imports_without_torch_verl_or_ray():
    """Every envs module (MiniWoB, pool, OSWorld env, local desktop, OSWorld's DesktopEnv) loads with them blocked."""
    _run_blocked(
        """
        from verl_cua.envs import EnvPool, make_env, ENV_REGISTRY
        import verl_cua.envs.miniwob, verl_cua.envs.pool
        import verl_cua.envs.osworld.env, verl_cua.envs.osworld.local_desktop, verl_cua.envs.osworld.tasks
        if importlib.util.find_spec("desktop_env") is not None:
            import verl_cua.envs.osworld.provider
            from verl_cua.envs.osworld import evaluators
            evaluators.install()
            from desktop_env.desktop_env import DesktopEnv
            evaluators.metric("compare_table"), evaluators.getter("vm_file")
        assert sorted(ENV_REGISTRY) == ["miniwob", "osworld"], sorted(ENV_REGISTRY)
        """
    )


def test_eval_and_viewer_import_without_torch_verl_or_ray():
    """The tools layer (eval harness, viewer, CLI, `verl-cua list` with the verl names) runs on an eval box with no ML
    stack."""
    _run_blocked(
        """
        import verl_cua.eval, verl_cua.eval.runner, verl_cua.viewer, verl_cua.viewer.compare, verl_cua.cli
        import verl_cua.envs.trajectory, verl_cua.envs.task_sets
        from verl_cua.eval.apis import API_REGISTRY
        verl_cua.cli.build_parser().parse_args(["view", "runs/a", "runs/b"])
        import contextlib, io
        with contextlib.redirect_stdout(io.StringIO()) as listed:
            assert verl_cua.cli.main(["list"]) == 0
        assert "gui_agent" in listed.getvalue() and "verl_cua.envs.osworld.env:OSWorldEnv" in listed.getvalue()
        assert "verl_cua.envs.osworld.env" not in sys.modules  # listing an env does not import it
        assert sorted(API_REGISTRY) == ["anthropic", "openai"], sorted(API_REGISTRY)
        """
    )
