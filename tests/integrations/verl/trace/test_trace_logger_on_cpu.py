"""`cua.trace.log_episodes`: a real training trace (written by the trace writers) sent through verl's real `Tracking`
to tensorboard and offline wandb as filmstrip images, read back from their files; off, console-only and broken
loggers send nothing and never raise; the pick and the pixels are deterministic."""

import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image
from verl.utils.tracking import Tracking

from verl_cua.actions.parse import parse_action
from verl_cua.integrations.verl.agent_loop import Episode
from verl_cua.integrations.verl.trace.episodes import EpisodeTrace, write_advantages, write_trace_run
from verl_cua.integrations.verl.trace.filmstrip import (
    CAPTION_HEIGHT,
    FRAME_HEIGHT,
    GAP,
    HEADER_HEIGHT,
    MAX_FRAMES,
    episode_title,
    render_episode,
    same_size,
    shown_steps,
)
from verl_cua.integrations.verl.trace.logger import (
    log_trace_step,
    log_traced_episodes,
    pick_episodes,
    trace_step_dir,
)
from verl_cua.viewer.runs import load_run

STEP = 3
SCREEN = (640, 480)
SEEN = (320, 240)  # the resized image the model got, as the trace keeps it
# (task dir, uid, success, model outputs, step advantages); keys sort as listed: the failure comes first on disk
EPISODES = [
    ("click-test-seed1", "aaaaaaaa", False, ["pyautogui.click(10, 20)", "I would click the button"], [-0.5, -0.25]),
    (
        "click-test-seed2",
        "bbbbbbbb",
        True,
        ["pyautogui.moveTo(5, 5)", "pyautogui.write('ok')", "pyautogui.click(300, 200)"],
        [0.75, 0.5, 1.0],
    ),  # fmt: skip
    ("click-test-seed3", "cccccccc", False, ["pyautogui.press('enter')"], [-1.0]),
]


def _colour(episode: int, step: int) -> tuple[int, int, int]:
    return (40 + 60 * episode, 30 + 50 * step, 200 - 40 * step)


def _write_trace(trace_dir: Path) -> None:
    """The trace as training writes it: the agent loop's `EpisodeTrace`, then the trainer's advantages and run.json."""
    extra = []
    advantages = torch.zeros(len(EPISODES), 12)  # each turn: two model tokens, then a 0 in the mask
    mask = torch.zeros(len(EPISODES), 12, dtype=torch.long)
    for e, (task, uid, success, texts, step_adv) in enumerate(EPISODES):
        directory = trace_step_dir(trace_dir, STEP) / task / f"{uid}-0"
        trace = EpisodeTrace(directory, task)
        ep = Episode(task=task, instruction=f"Click the button ({task})", score=float(success), success=success)
        for s, text in enumerate(texts):
            parsed = parse_action(text, format="pyautogui", screen=SCREEN)
            ep.actions.append(text)
            trace.step(seen=Image.new("RGB", SEEN, _colour(e, s)), screen=SCREEN, text=text, parsed=parsed, info={},
                       reward=0.0, model_s=0.1, env_s=0.1)  # fmt: skip
            advantages[e, 3 * s : 3 * s + 2] = step_adv[s]
            mask[e, 3 * s : 3 * s + 2] = 1
        trace.finish(ep, float(success), Image.new("RGB", SEEN, _colour(e, len(texts))), "done")
        extra.append({"cua_trace_dir": str(directory)})
    assert write_advantages(extra, advantages, mask) == len(EPISODES)
    cua = {"trace": {"dir": str(trace_dir)}, "action": {"format": "pyautogui"}, "env": {"name": "miniwob"}}
    config = OmegaConf.create(
        {"actor_rollout_ref": {"model": {"path": "tiny"}, "rollout": {"n": 3}}, "algorithm": {"adv_estimator": "grpo"}}
    )
    write_trace_run(cua, config, STEP)


@pytest.fixture
def run_dir(tmp_path) -> Path:
    _write_trace(tmp_path / "trace")
    return trace_step_dir(tmp_path / "trace", STEP)


def _strip_width(steps: int) -> int:
    frame = round(SEEN[0] * FRAME_HEIGHT / SEEN[1])
    return GAP + (min(steps, MAX_FRAMES) + 1) * (frame + GAP)  # the steps and the final screen


def test_pick_puts_a_success_and_a_failure_first_then_the_rest_in_order(run_dir):
    run = load_run(run_dir)
    keys = lambda n: [e.key for e in pick_episodes(run, n)]  # noqa: E731
    assert keys(1) == ["click-test-seed2/bbbbbbbb-0"]
    assert keys(3) == ["click-test-seed2/bbbbbbbb-0", "click-test-seed1/aaaaaaaa-0", "click-test-seed3/cccccccc-0"]
    assert keys(9) == keys(3) and keys(0) == []


def test_filmstrip_layout_frames_and_determinism(run_dir):
    success = load_run(run_dir).episodes["click-test-seed2/bbbbbbbb-0"]
    image = render_episode(success)
    assert image.size == (_strip_width(3), HEADER_HEIGHT + FRAME_HEIGHT + CAPTION_HEIGHT + GAP)
    pixels = np.asarray(image)
    frame = round(SEEN[0] * FRAME_HEIGHT / SEEN[1])
    for s in range(4):  # each frame is that step's screenshot, in order, the final screen last
        x = GAP + s * (frame + GAP) + frame // 2
        assert tuple(pixels[HEADER_HEIGHT + FRAME_HEIGHT // 2, x]) == _colour(1, s)
    cx, cy = GAP + 2 * (frame + GAP) + 300 * frame / SCREEN[0], HEADER_HEIGHT + 200 * FRAME_HEIGHT / SCREEN[1]
    ring = pixels[round(cy) - 10 : round(cy) + 11, round(cx) - 10 : round(cx) + 11].reshape(-1, 3)
    assert (ring == (255, 45, 149)).all(axis=1).any()  # step 3's click(300, 200), in the viewer's click colour
    failure = render_episode(load_run(run_dir).episodes["click-test-seed1/aaaaaaaa-0"])
    assert tuple(pixels[2, 2]) != np.asarray(failure)[2, 2].tolist()  # the header's colour is the status
    assert shown_steps(3) == [0, 1, 2]
    long = shown_steps(40)  # a long episode: evenly spaced steps, the first and the last among them
    assert long[0] == 0 and long[-1] == 39 and len(long) == MAX_FRAMES and long == sorted(set(long))


def test_missing_or_broken_screenshots_become_placeholders(run_dir):
    directory = run_dir / "click-test-seed3" / "cccccccc-0"
    (directory / "step_000.png").unlink()
    (directory / "step_001.png").write_bytes(b"not a png")  # the final screen
    pixels = np.asarray(render_episode(load_run(run_dir).episodes["click-test-seed3/cccccccc-0"]))
    assert pixels.shape == (HEADER_HEIGHT + FRAME_HEIGHT + CAPTION_HEIGHT + GAP, GAP + 2 * (FRAME_HEIGHT + GAP), 3)
    for x in (GAP + 4, 2 * GAP + FRAME_HEIGHT + 4):
        assert tuple(pixels[HEADER_HEIGHT + 4, x]) == (70, 70, 70)


def test_same_trace_gives_the_same_pick_and_pixels(run_dir, tmp_path):
    _write_trace(tmp_path / "again")  # the same episodes written afresh, elsewhere
    first, second = (pick_episodes(load_run(d), 3) for d in (run_dir, trace_step_dir(tmp_path / "again", STEP)))
    assert [e.key for e in first] == [e.key for e in second]
    for a, b in zip(first, second, strict=True):
        assert np.array_equal(np.asarray(render_episode(a)), np.asarray(render_episode(b)))


def _read_events(directory: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    return events


def test_tensorboard_gets_one_image_and_the_actions_per_episode(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    tracking = Tracking(project_name="cua", experiment_name="trace", default_backend=["tensorboard", "console"])
    assert log_traced_episodes(tracking, run_dir, STEP, 2) == 2
    tracking.finish()
    events = _read_events(tmp_path / "tb")
    assert events.Tags()["images"] == ["cua/episodes/0", "cua/episodes/1"]
    expected = [render_episode(e) for e in pick_episodes(load_run(run_dir), 2)]
    for i, want in enumerate(expected):
        (logged,) = events.Images(f"cua/episodes/{i}")
        assert logged.step == STEP and (logged.width, logged.height) == want.size
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(logged.encoded_image_string))), np.asarray(want))
    (text,) = events.Tensors("cua/episodes/0/actions/text_summary")
    actions = text.tensor_proto.string_val[0].decode()
    assert "move(5, 5)" in actions and 'type("ok")' in actions and "click(300, 200)" in actions
    assert "+0.75" in actions and "click-test-seed2" in actions
    (failure,) = events.Tensors("cua/episodes/1/actions/text_summary")
    assert "invalid: " in failure.tensor_proto.string_val[0].decode()


def test_wandb_offline_run_holds_the_images(run_dir, tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is not installed (verl[verl-core] brings it)")
    for key, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(key, value)
    tracking = Tracking(project_name="cua", experiment_name="trace", default_backend=["wandb"])
    assert log_traced_episodes(tracking, run_dir, STEP, 3) == 3
    assert tracking.logger["wandb"].run.step == STEP  # logged at the training step, not wandb's own counter
    tracking.finish()
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    logged = sorted((run / "files" / "media" / "images" / "cua").glob("episodes_*.png"))
    picked = pick_episodes(load_run(run_dir), 3)
    expected = same_size([render_episode(e) for e in picked])  # one panel: wandb wants one size
    assert len(logged) == 3 and len({e.size for e in expected}) == 1
    got = sorted(np.asarray(Image.open(p).convert("RGB")).tobytes() for p in logged)
    assert got == sorted(np.asarray(e).tobytes() for e in expected)
    (history,) = run.glob("run-*.wandb")  # the run's records: the history row names the images and their captions
    record = history.read_bytes()
    assert b'"images/separated"' in record and all(p.name.encode() in record for p in logged)
    captions = json.dumps([episode_title(e) for e in picked], ensure_ascii=False, separators=(",", ":")).encode()
    assert captions in record and picked[0].key.startswith("click-test-seed2")


class BrokenWriter:
    """A SummaryWriter that takes one image, then fails (a full disk, a closed writer)."""

    def __init__(self):
        self.images = 0

    def add_image(self, *args, **kwargs):
        if self.images:
            raise OSError("disk full")
        self.images += 1

    def add_text(self, *args, **kwargs):
        pass

    def close(self):
        pass


class BrokenWandb:
    def Image(self, *args, **kwargs):  # noqa: N802 (wandb's name)
        raise RuntimeError("wandb is gone")

    def finish(self, exit_code: int = 0):
        pass


def test_off_console_only_and_broken_loggers_send_what_they_can_and_never_raise(run_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    tracking = Tracking(project_name="cua", experiment_name="trace", default_backend=["tensorboard"])
    assert log_traced_episodes(tracking, run_dir, STEP, 0) == 0
    assert log_trace_step(tracking, {"trace": {"dir": str(run_dir.parent)}}, STEP) == 0  # log_episodes unset
    tracking.finish()
    assert _read_events(tmp_path / "tb").Tags()["images"] == []
    console = Tracking(project_name="cua", experiment_name="trace", default_backend=["console"])
    assert log_traced_episodes(console, run_dir, STEP, 3) == 0
    assert log_traced_episodes(None, run_dir, STEP, 3) == 0

    tracking = Tracking(project_name="cua", experiment_name="broken", default_backend=["tensorboard"])
    tracking.logger["tensorboard"].writer.close()
    tracking.logger["tensorboard"].writer = BrokenWriter()
    tracking.logger["wandb"] = BrokenWandb()
    with caplog.at_level(logging.WARNING):
        assert log_traced_episodes(tracking, run_dir, STEP, 3) == 1  # the one image the writer took
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert any("the tensorboard logger failed" in w and "disk full" in w for w in warnings)
    assert any("the wandb logger failed" in w and "wandb is gone" in w for w in warnings)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert log_traced_episodes(tracking, run_dir.parent / "step_000099", STEP, 3) == 0  # no such step traced
    assert "cannot render the episodes" in caplog.text
    tracking.finish()


def test_log_trace_step_reads_the_trace_config(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    tracking = Tracking(project_name="cua", experiment_name="trace", default_backend=["tensorboard"])
    cua = {"trace": {"dir": str(run_dir.parent), "log_episodes": 1}}
    assert log_trace_step(tracking, cua, STEP) == 1
    assert log_trace_step(tracking, {"trace": {"dir": None, "log_episodes": 1}}, STEP) == 0
    tracking.finish()
    assert _read_events(tmp_path / "tb").Tags()["images"] == ["cua/episodes/0"]
