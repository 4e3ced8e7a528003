"""Our state in verl's `global_step_N` folder: atomic folder writes (a SIGKILL mid-save leaves the old state or
none), a manifest whose sha256 catches a corrupt file, the format version, retention following verl's actor folders,
the trainer state's round trip (Entropulse, buffer with tensors, sampler, totals), and the settings a resume refuses
to change, in one line before Ray starts."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from verl_cua.algos.entropulse import Entropulse
from verl_cua.algos.success_buffer import SuccessBuffer
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.schema import EntropulseConfig
from verl_cua.integrations.verl.resume.checkpoint_io import (
    FORMAT_VERSION,
    CheckpointStateError,
    content_digest,
    ema_shard_path,
    prune_orphans,
    read_manifest,
    read_state_dir,
    save_tensor_file,
    write_state_dir,
)
from verl_cua.integrations.verl.resume.state import (
    STATE_SETTINGS,
    check_resume,
    conflicting_settings,
    load_trainer_state,
    setting_values,
    state_digests,
    trainer_state,
)


def _trainer(seed: int = 0) -> SimpleNamespace:
    pulse = Entropulse(EntropulseConfig(schedule="fixed", rl_steps=2, sft_steps=1))
    return SimpleNamespace(
        global_steps=0,
        entropulse=pulse,
        success_buffer=SuccessBuffer(4),
        _cua_rng=random.Random(seed),
        cua_totals={"infra_failures": 0, "episodes": 0},
    )


def _trained(steps: int = 3) -> SimpleNamespace:
    """A trainer state as a few steps leave it: entropy history, an SFT phase, buffered rows with tensors."""
    t = _trainer()
    for step in range(1, steps + 1):
        t.global_steps = step
        if t.entropulse.observe(1.0 / step) == "sft":
            t.entropulse.sft_done(steps_run=1)
        row = {
            "input_ids": torch.arange(step * 5),
            "multi_modal_inputs": {"pixel_values": torch.randn(4, 6, dtype=torch.bfloat16)},
            "extra_fields": {"cua_task": "click-test", "cua_score": 1.0, "step_index": 0},
        }
        trajectory = {"actions": [f"click({step}, 2)"], "rows": [row]}
        t.success_buffer.add(f"click-test@seed={step % 2}", f"k{step}", trajectory)
        t._cua_rng.random()
        t.cua_totals["infra_failures"] += step
        t.cua_totals["episodes"] += 16
    return t


def test_the_trainer_state_round_trips_through_the_folder(tmp_path):
    source = _trained()
    state = trainer_state(source)
    manifest = write_state_dir(tmp_path / "global_step_3", state, {"global_step": 3, "settings": {}})
    assert manifest["format_version"] == FORMAT_VERSION and manifest["files"]["state.pt"]["bytes"] > 0
    mask = os.umask(0o022)
    os.umask(mask)
    assert (tmp_path / "global_step_3" / "cua" / "state.pt").stat().st_mode & 0o777 == 0o666 & ~mask  # not owner-only
    loaded, read_back = read_state_dir(tmp_path / "global_step_3")
    assert read_back == json.loads((tmp_path / "global_step_3" / "cua" / "manifest.json").read_text())

    target = _trainer(seed=99)
    load_trainer_state(target, loaded)
    assert state_digests(trainer_state(target)) == state_digests(state)
    assert target.entropulse.state_dict() == source.entropulse.state_dict()
    assert target.entropulse.phases_completed == 1 and target.entropulse.rl_steps_in_phase == 1
    assert target._cua_rng.random() == source._cua_rng.random()  # replay/SFT sampling continues, not restarts
    assert target.cua_totals == {"infra_failures": 6, "episodes": 48}
    row = target.success_buffer.get("click-test@seed=1")[-1]["rows"][0]
    assert row["multi_modal_inputs"]["pixel_values"].dtype == torch.bfloat16
    # and a fresh trainer's state differs, so the digests do say something
    assert state_digests(trainer_state(_trainer())) != state_digests(state)


def test_content_digest_sees_values_types_and_order_of_lists():
    base = {"a": [1, 2.0, "x"], "t": torch.ones(3), "b": b"\x00"}
    assert content_digest(base) == content_digest(dict(reversed(list(base.items()))))  # dict order is not content
    for changed in (
        {**base, "a": [2, 1.0, "x"]},
        {**base, "a": [1, 2, "x"]},  # 2.0 -> 2
        {**base, "t": torch.ones(3, dtype=torch.float64)},
        {**base, "t": torch.ones(1, 3)},
        {**base, "b": b"\x01"},
        {**base, "n": np.float32(1.0)},
    ):
        assert content_digest(changed) != content_digest(base)


def test_a_corrupt_or_newer_state_is_one_clear_error(tmp_path):
    folder = tmp_path / "global_step_1"
    write_state_dir(folder, trainer_state(_trained(1)), {"global_step": 1})
    state_file = folder / "cua" / "state.pt"
    data = bytearray(state_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state_file.write_bytes(bytes(data))
    with pytest.raises(CheckpointStateError, match="does not match its sha256"):
        read_state_dir(folder)
    manifest = folder / "cua" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(CheckpointStateError, match="upgrade verl-cua"):
        read_manifest(folder)
    assert read_state_dir(tmp_path / "global_step_9") is None  # a checkpoint without our state: nothing to load


def test_the_state_file_refuses_pickled_code(tmp_path):
    """The state loads with torch's weights_only unpickler: a state.pt that would run code on load is refused."""
    folder = tmp_path / "global_step_1"
    write_state_dir(folder, {"x": 1}, {})
    evil = folder / "cua" / "state.pt"
    torch.save({"x": SimpleNamespace(y=1)}, evil)  # any non-allow-listed object stands for a code-running pickle
    manifest = json.loads((folder / "cua" / "manifest.json").read_text())
    manifest["files"]["state.pt"]["sha256"] = __import__("hashlib").sha256(evil.read_bytes()).hexdigest()
    (folder / "cua" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(Exception, match="[Ww]eights only"):
        read_state_dir(folder)


def test_saving_the_same_step_again_replaces_it_whole(tmp_path):
    folder = tmp_path / "global_step_2"
    write_state_dir(folder, {"v": 1}, {"global_step": 2})
    write_state_dir(folder, {"v": 2}, {"global_step": 2})
    assert read_state_dir(folder)[0] == {"v": 2}
    assert sorted(p.name for p in folder.iterdir()) == ["cua"]  # no temporary or old folder left behind


def test_a_kill_during_the_save_leaves_the_old_state_or_none(tmp_path):
    """A writer SIGKILLed at random moments while it saves a large state again and again: every time, the folder
    holds a complete state (old or new) or, before the first save finished, none; never a half."""
    folder = tmp_path / "global_step_5"
    script = textwrap.dedent(f"""
        import torch
        from verl_cua.integrations.verl.resume.checkpoint_io import write_state_dir
        i = 0
        while True:
            i += 1
            state = {{"i": i, "big": torch.full((3_000_000,), float(i))}}
            write_state_dir({str(folder)!r}, state, {{"global_step": 5}})
            print(i, flush=True)
    """)
    rng = random.Random(5)
    outcomes = set()
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()  # one save done: the kill now lands in a later save, at a random point of it
        time.sleep(rng.uniform(0.0, 0.6))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        loaded = read_state_dir(folder)
        if loaded is None:
            outcomes.add("none")
            continue
        state, _ = loaded
        assert torch.equal(state["big"], torch.full((3_000_000,), float(state["i"])))
        outcomes.add("complete")
    assert outcomes == {"complete"}
    write_state_dir(folder, {"i": 0}, {})  # the next save clears what the kills left behind
    assert sorted(p.name for p in folder.iterdir()) == ["cua"]


def test_our_state_goes_when_verl_removes_the_actor_checkpoint(tmp_path):
    for step in (1, 2, 3):
        write_state_dir(tmp_path / f"global_step_{step}", {"s": step}, {})
        (tmp_path / f"global_step_{step}" / "actor").mkdir()
    (tmp_path / "global_step_1" / "actor").rmdir()  # what verl's max_actor_ckpt_to_keep does
    removed = prune_orphans(tmp_path)
    assert [p.parent.name for p in removed] == ["global_step_1"]
    assert [read_state_dir(tmp_path / f"global_step_{s}") is not None for s in (1, 2, 3)] == [False, True, True]


def test_verls_retention_of_two_takes_our_ema_shards_and_state_of_older_steps(tmp_path):
    """verl's own rotation (BaseCheckpointManager, as the recipes' CKPT_KEEP=2 sets it) on the folders a save
    writes: the EMA shards inside `actor/` go with it, our `cua/` goes with the next prune_orphans."""
    from verl.utils.checkpoint.checkpoint_manager import BaseCheckpointManager

    manager = BaseCheckpointManager.__new__(BaseCheckpointManager)  # its rotation only: no model, no process group
    manager.previous_saved_paths = []
    for step in (1, 2, 3):
        folder = tmp_path / f"global_step_{step}"
        write_state_dir(folder, {"s": step}, {})  # our trainer's order: our state, verl's actor, then the prune
        actor = folder / "actor"
        manager.ensure_checkpoint_capacity(2)
        actor.mkdir()
        (actor / "model_world_size_1_rank_0.pt").write_bytes(b"weights")
        save_tensor_file([torch.ones(2)], ema_shard_path(actor, 0))
        manager.register_checkpoint(str(actor), 2)
        prune_orphans(tmp_path)
    assert not (tmp_path / "global_step_1" / "actor").exists() and read_state_dir(tmp_path / "global_step_1") is None
    for step in (2, 3):
        assert ema_shard_path(tmp_path / f"global_step_{step}" / "actor", 0).is_file()
        assert read_state_dir(tmp_path / f"global_step_{step}") is not None


def _config(tmp_path, **cua) -> dict:
    return {
        "algorithm": {"adv_estimator": "sdpo"},
        "trainer": {"resume_mode": "auto", "default_local_dir": str(tmp_path), "resume_from_path": None},
        "cua": {
            "env": {"name": "miniwob", "rows": "episode", "image_storage": "png"},
            "action": {"format": "pyautogui"},
            "buffer": {"per_task": 8},
            "sdpo": {"teacher": "ema"},
            "entropulse": {"schedule": "fixed"},
            **cua,
        },
    }


def _saved_checkpoint(tmp_path, config: dict, step: int = 4) -> None:
    write_state_dir(tmp_path / f"global_step_{step}", {}, {"global_step": step, "settings": setting_values(config)})
    (tmp_path / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_a_resume_with_other_state_settings_stops_in_one_line_naming_them(tmp_path):
    config = _config(tmp_path)
    assert set(setting_values(config)) == set(STATE_SETTINGS)
    _saved_checkpoint(tmp_path, config)
    check_resume(config)  # the same settings: fine
    changed = _config(tmp_path, env={"name": "miniwob", "rows": "step", "image_storage": "png"})
    changed["algorithm"]["adv_estimator"] = "grpo"
    with pytest.raises(CuaConfigError) as err:
        check_resume(changed)
    message = str(err.value)
    assert "\n" not in message and "global_step_4" in message and "cua.resume.allow_changes=true" in message
    assert "algorithm.adv_estimator ('sdpo' -> 'grpo')" in message and "cua.env.rows ('episode' -> 'step')" in message
    assert "cua.env.name" not in message  # only what changed
    changed["cua"]["resume"] = {"allow_changes": True}
    check_resume(changed)  # the user's override
    assert conflicting_settings(setting_values(config), setting_values(config)) == []


def test_resume_checks_only_what_verl_would_load(tmp_path):
    config = _config(tmp_path)
    _saved_checkpoint(tmp_path, _config(tmp_path, buffer={"per_task": 2}), step=3)
    for mode in ("disable",):
        check_resume({**config, "trainer": {**config["trainer"], "resume_mode": mode}})  # fresh start: no check
    with pytest.raises(CuaConfigError, match=r"cua.buffer.per_task \(2 -> 8\)"):
        check_resume(config)
    path = {**config["trainer"], "resume_mode": "resume_path", "resume_from_path": str(tmp_path / "global_step_3")}
    with pytest.raises(CuaConfigError, match="global_step_3"):
        check_resume({**config, "trainer": path})
    (tmp_path / "latest_checkpointed_iteration.txt").unlink()
    check_resume(config)  # auto without a tracker: verl starts fresh, nothing to compare


@pytest.mark.e2e
def test_main_stops_a_conflicting_resume_in_one_line_before_ray(tmp_path):
    """`python -m verl_cua.main` with a checkpoint saved under sdpo, resumed under grpo: exit 2, one line."""
    saved = _config(tmp_path)
    _saved_checkpoint(tmp_path, saved)
    args = [
        sys.executable, "-m", "verl_cua.main", "preset=cpu", "algorithm.adv_estimator=grpo",
        "trainer.resume_mode=auto", f"trainer.default_local_dir={tmp_path}", f"hydra.run.dir={tmp_path / 'hydra'}",
    ]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"verl-cua: the checkpoint {tmp_path / 'global_step_4'} was saved with other settings: ")
    assert "algorithm.adv_estimator ('sdpo' -> 'grpo')" in line and "ray init" not in proc.stdout
