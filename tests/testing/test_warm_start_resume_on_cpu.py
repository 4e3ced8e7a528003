"""A warm start stopped mid-build continues from its checkpoint to the same weights, bit for bit, as a build that
was never stopped: after Ctrl-C (one line, exit 130, a checkpoint saved at the stop) and after a kill -9 (the last
periodic checkpoint; a process waiting on the lock says within 10 s who holds it and how far it got, then takes the
build over). Real processes, real signals, the real tiny model; 30 steps keep it short."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from verl_cua.testing.tiny_models import build_tiny_model

STEPS = 30
CLI = [sys.executable, "-m", "verl_cua.testing.warm_start"]


def _cache(root: Path) -> Path:
    """A model cache of its own holding the tiny model; the model's folder inside it."""
    src = build_tiny_model("qwen25vl")
    dst = root / "tiny-models" / src.name
    shutil.copytree(src, dst)
    return dst


def _env(root: Path, every_s: str) -> dict:
    return {**os.environ, "VERL_CUA_CACHE": str(root), "VERL_CUA_CHECKPOINT_EVERY_S": every_s}


def _start(model: Path, root: Path, every_s: str, err: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, str(model), "--steps", str(STEPS)], env=_env(root, every_s), text=True,
                            stdout=subprocess.PIPE, stderr=err.open("w"), start_new_session=True)  # fmt: skip


def _wait_for(path: Path, text: str, timeout: float = 300.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = path.read_text() if path.exists() else ""
        if text in out:
            return out
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}: {path.read_text()[-2000:]}")


def _weights(folder: str) -> dict:
    return load_file(str(Path(folder.strip()) / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The weights of a build never stopped."""
    root = tmp_path_factory.mktemp("reference")
    model = _cache(root)
    out = subprocess.run([*CLI, str(model), "--steps", str(STEPS)], env=_env(root, "60"), capture_output=True,
                         text=True, timeout=600, check=True)  # fmt: skip
    return _weights(out.stdout)


def test_ctrl_c_keeps_a_checkpoint_and_the_rerun_ends_at_the_same_weights(tmp_path, reference):
    model, err = _cache(tmp_path), tmp_path / "first.err"
    first = _start(model, tmp_path, "1000", err)  # no periodic checkpoint: only the stop's own
    _wait_for(err, f"1/{STEPS} steps")
    os.killpg(first.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    _, _ = first.communicate(timeout=120)
    lines = err.read_text().splitlines()
    assert first.returncode == 130
    assert "Traceback" not in err.read_text()
    ours = [line for line in lines if line.startswith("verl_cua.testing.warm_start:")]
    assert len(ours) == 1 and "kept its checkpoint" in ours[0] and "run the same command again" in ours[0], lines
    assert "stopped (Ctrl-C) at step " in ours[0], ours
    done = int(ours[0].split("at step ")[1].split("/")[0])
    assert 1 <= done < STEPS
    assert list(tmp_path.glob("tiny-models/.*.state/warm.pt")), "the stop saved no checkpoint"

    rerun = subprocess.run([*CLI, str(model), "--steps", str(STEPS)], env=_env(tmp_path, "1000"),
                           capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
    assert f"continuing from its checkpoint at step {done}" in rerun.stderr
    assert _same(_weights(rerun.stdout), reference)
    assert not list(tmp_path.glob("tiny-models/.*.state")), "the published model left its checkpoint folder"


def test_a_waiter_says_who_holds_the_lock_then_takes_over_a_killed_build(tmp_path, reference):
    model = _cache(tmp_path)
    holder_err, waiter_err = tmp_path / "holder.err", tmp_path / "waiter.err"
    holder = _start(model, tmp_path, "0", holder_err)  # a checkpoint after every step
    _wait_for(holder_err, f"3/{STEPS} steps")
    os.killpg(holder.pid, signal.SIGSTOP)  # a holder busy elsewhere: alive, holding the lock, making no progress
    try:
        started = time.monotonic()
        waiter = _start(model, tmp_path, "0", waiter_err)
        text = _wait_for(waiter_err, "verl-cua cache: waiting for", timeout=60)
        assert time.monotonic() - started < 10  # within 10 s of its start (its imports are the stdlib)
        line = next(line for line in text.splitlines() if "waiting for" in line)
        assert f"pid {holder.pid}" in line and f"/{STEPS} steps" in line, line
        assert waiter.poll() is None, "the waiter did not wait for the lock"
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # a kill -9: no checkpoint at the stop, the last periodic one stands
        holder.wait(timeout=60)
    out, _ = waiter.communicate(timeout=600)
    text = waiter_err.read_text()
    assert waiter.returncode == 0, text
    assert "died at" in text and "taking the build over" in text, text
    resumed = int(text.split("continuing from its checkpoint at step ")[1].split()[0])
    assert resumed >= 2  # step 3's line comes before step 3's checkpoint: the stop may land between them
    assert _same(_weights(out), reference)


def test_a_checkpoint_of_other_weights_is_loaded_so_the_comparison_can_fail(tmp_path, reference):
    """Negative control: a checkpoint whose weights were changed resumes to other weights (the comparison above
    could not pass by the rerun ignoring its checkpoint and training from the start)."""
    model, err = _cache(tmp_path), tmp_path / "first.err"
    first = _start(model, tmp_path, "1000", err)
    _wait_for(err, f"1/{STEPS} steps")
    os.killpg(first.pid, signal.SIGINT)
    first.communicate(timeout=120)
    (ckpt,) = tmp_path.glob("tiny-models/.*.state/warm.pt")
    state = torch.load(ckpt, weights_only=True)
    name = next(iter(state["model"]))
    state["model"][name] = state["model"][name] + 1.0
    torch.save(state, ckpt)
    rerun = subprocess.run([*CLI, str(model), "--steps", str(STEPS)], env=_env(tmp_path, "1000"),
                           capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
    assert not _same(_weights(rerun.stdout), reference)


@pytest.mark.parametrize("crash_at", [2, 7])  # during the in-context copying (4 steps), during the icl warm start
def test_an_icl_warm_start_that_crashed_resumes_to_the_same_weights(tmp_path, monkeypatch, crash_at):
    """The other loops: in-context copying, then the warm start in SDPO's teacher context (its own random stream);
    a crash (an exception at optimizer step `crash_at`, a checkpoint after every step) in either phase, then the
    same call again, ends at the weights of a build that never crashed."""
    from verl_cua.testing.warm_start import warm_start

    monkeypatch.setenv("VERL_CUA_CHECKPOINT_EVERY_S", "0")
    settings = {"steps": 4, "icl": 0.5, "induction_steps": 4}
    want = _weights(str(warm_start(_cache(tmp_path / "ref"), **settings)))

    model, calls, step = _cache(tmp_path / "run"), [0], torch.optim.AdamW.step

    def crashing(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == crash_at:
            raise RuntimeError("a crash mid-build")
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", crashing)
    with pytest.raises(RuntimeError, match="mid-build"):
        warm_start(model, **settings)
    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    kept = {p.name for p in (tmp_path / "run" / "tiny-models").glob(".*.state/*.pt")}
    assert kept == ({"induction.pt"} if crash_at <= 4 else {"induction.pt", "warm.pt"}), kept  # what it resumes
    assert _same(_weights(str(warm_start(model, **settings))), want)
