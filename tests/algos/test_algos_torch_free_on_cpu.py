"""The list-based algos (GiGPO, success buffer, replay, Entropulse) import and run without torch."""

import subprocess
import sys
import textwrap


def test_list_based_modules_import_without_torch():
    script = textwrap.dedent(
        """
        import random, sys

        for name in ("torch", "verl", "ray", "numpy"):
            sys.modules[name] = None
        import verl_cua.algos
        from types import SimpleNamespace

        from verl_cua.algos.entropulse import Entropulse
        from verl_cua.algos.gigpo import gigpo_advantages
        from verl_cua.algos.replay import replay_targets
        from verl_cua.algos.success_buffer import SuccessBuffer

        buf = SuccessBuffer()
        buf.add("t", "k", "item")
        assert replay_targets(["g", "g"], [0.0, 0.0], ["t", "t"], buf, random.Random(0)) == {1: "item"}
        assert gigpo_advantages([1.0, 0.0], ["g", "g"], [["a"], ["a"]])[0] == [0.5, -0.5]
        settings = SimpleNamespace(schedule="fixed", rl_steps=1, sft_steps=5, ratio=0.5, ema=0.9, early_steps=5,
                                   min_rl_steps=20)  # any object with the settings (the trainer's: cua.entropulse)
        assert Entropulse(settings).observe(0.1) == "sft"
        print("OK")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("OK")
