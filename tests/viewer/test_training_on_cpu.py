"""The report's training mode on a trace written by the trainer's own trace classes: GRPO groups side by side,
failure reasons, the prompt of each step, the filmstrip of long episodes, and `view` refusing a folder with no run;
the page is checked in headless Chromium and screenshotted."""

import statistics
import subprocess
import sys
import time

import pytest
from PIL import Image, ImageStat

from verl_cua.envs.trajectory import EpisodeRecord, prompt_record
from verl_cua.testing.training_trace import INFRA_ERROR, write_training_trace
from verl_cua.testing.viewer_runs import HOSTILE, write_sample_runs
from verl_cua.viewer import build_report, load_run
from verl_cua.viewer.failures import failure_counts, failure_reason, reason_token
from verl_cua.viewer.prompt import prompt_details, prompt_messages
from verl_cua.viewer.training import group_episodes, is_training_trace, reward, reward_stats, session

A, B, C = "click-test-seed3/aaaa1111", "click-test-seed4/bbbb2222", "click-test-seed3/cccc3333"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return write_training_trace(tmp_path_factory.mktemp("trace") / "traces")


@pytest.fixture(scope="module")
def groups(trace):
    return {
        f"{key.step}/{key.task}/{key.uid}": episodes for key, episodes in group_episodes(load_run(trace), 0).items()
    }


def test_a_trace_is_grouped_by_step_task_and_uid(trace, groups, tmp_path):
    assert is_training_trace(load_run(trace)) and is_training_trace(load_run(trace / "step_000001"))
    assert not is_training_trace(load_run(next(iter(write_sample_runs(tmp_path)))))  # an eval run
    assert list(groups) == [f"1/{A}", f"1/{B}", f"2/{C}"]
    assert [session(e) for e in groups[f"1/{A}"]] == [0, 1, 2, 3]
    rewards = [reward(e) for e in groups[f"1/{A}"]]
    assert rewards[3] is None  # the infra failure leaves its group, as the trainer drops it
    mean, std = reward_stats(groups[f"1/{A}"])
    assert mean == pytest.approx(statistics.mean(rewards[:3])) and std == pytest.approx(statistics.stdev(rewards[:3]))
    assert reward_stats(groups[f"2/{C}"]) == (0.0, 0.0)
    one_step = load_run(trace / "step_000002")  # one step of the trace viewed alone: its step from its folder
    assert [k.step for k in group_episodes(one_step, 0)] == [2]


def test_failure_reasons_come_from_the_step_lines_and_the_result(groups):
    reasons = [failure_reason(e) for g in groups.values() for e in g]
    assert reasons == [
        None,
        "wrong_answer",  # clicked beside the button, then DONE: scored 0
        "invalid_action",  # the reply was no action
        f"infra: {INFRA_ERROR}",
        None,
        "gave_up",
        "max_steps",
        "max_steps",
    ]
    unfinished = EpisodeRecord("x/y-0", groups[f"1/{A}"][0].dir, None, [{}])
    refused = EpisodeRecord("x/y-1", unfinished.dir, {"status": "failure"}, [{"valid": True, "env_error": "no window"}])
    assert failure_reason(unfinished) == "unfinished" and failure_reason(refused) == "invalid_action"
    episodes = [e for g in groups.values() for e in g]
    assert failure_counts(episodes)[0] == ("max_steps", 2)
    assert sum(count for _, count in failure_counts(episodes)) == sum(e.status != "success" for e in episodes)


def test_the_prompt_is_rebuilt_across_the_episode(groups):
    wrong = groups[f"1/{A}"][1]  # episode rows: the first prompt, then each reply and the turn after it
    messages, complete = prompt_messages(wrong, 1)
    assert complete and [role for role, _, _ in messages] == ["system", "user", "assistant", "user"]
    images = [p["screenshot"] for _, parts, _ in messages for p in parts if p.get("type") == "image"]
    assert images == ["step_000.png", "step_001.png"] and all((wrong.dir / name).is_file() for name in images)
    html = prompt_details(wrong, 1)
    assert "as in step 1's prompt" in html and "step 1's model output" in html and "4 messages" in html
    long = groups[f"1/{B}"][0]  # step rows: the whole prompt each step, the last two screenshots
    last, _ = prompt_messages(long, 6)
    assert [p["screenshot"] for _, parts, _ in last for p in parts if p.get("type") == "image"] == [
        "step_005.png",
        "step_006.png",
    ]
    assert "Step 6: pyautogui.click(100, 650)" in prompt_details(long, 6)
    assert prompt_messages(EpisodeRecord("x", long.dir, None, [{}]), 0) is None


def test_prompt_text_is_escaped_and_images_beyond_history_are_marked(groups):
    asked = [{"role": "system", "content": HOSTILE}, {"role": "user", "content": [{"type": "image", "image": "a.png"}]}]
    record = prompt_record(asked, str, layout="episode", history_images=1)
    later = prompt_record([{"role": "user", "content": [{"type": "image", "image": "b.png"}]}], str, layout="episode")
    episode = EpisodeRecord("x", groups[f"1/{A}"][0].dir, None, [{"prompt": record}, {"prompt": later}])
    first = prompt_details(episode, 0)
    assert "<script>" not in first and "&lt;script&gt;alert(1)&lt;/script&gt;" in first
    later["history_images"] = 1
    second = prompt_details(episode, 1)
    assert second.count('class="pimg omitted"') == 1 and second.count('class="pimg"') == 1 and "1 image" in second


def test_view_refuses_a_folder_that_holds_no_run(tmp_path):
    empty = tmp_path / "not a run"
    (empty / "notes").mkdir(parents=True)
    out = tmp_path / "report.html"
    cli = [sys.executable, "-m", "verl_cua.cli", "view", str(empty), "--out", str(out)]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not out.exists() and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and str(empty) in done.stderr and "trajectory.jsonl" in done.stderr


def test_eval_runs_and_training_traces_are_reported_apart(trace, tmp_path):
    eval_run = next(iter(write_sample_runs(tmp_path)))
    with pytest.raises(ValueError, match="is a training trace and .* is not"):
        build_report([trace, eval_run], tmp_path / "mixed.html")
    assert not (tmp_path / "mixed.html").exists()


def _loaded(driver, selector: str, timeout: float = 15.0) -> int:
    """Scroll each image of `selector` into view until all have loaded; how many there are."""
    deadline = time.monotonic() + timeout
    while True:
        sizes = driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(i => {"
            " i.scrollIntoView({block: 'center'}); return i.complete ? i.naturalWidth : 0; });",
            selector,
        )
        if sizes and all(sizes):
            return len(sizes)
        assert time.monotonic() < deadline, f"{selector}: not loaded {sizes}"
        time.sleep(0.1)


def _not_blank(path) -> None:
    with Image.open(path) as image:
        stat = ImageStat.Stat(image.convert("L"))
        assert image.width >= 1000 and stat.stddev[0] > 10, f"{path} looks blank"


def test_training_report_in_chromium(driver, trace, tmp_path):
    report = build_report([trace], tmp_path / "report.html")
    page = report.resolve().as_uri()
    run = lambda script, *args: driver.execute_script(script, *args)  # noqa: E731
    driver.get(page)
    rows = run("return Array.from(document.querySelectorAll('tr.task-row')).map(r => r.dataset.statuses)")
    assert rows == ["success,failure,failure,infra_failure", "success,failure", "failure,failure"]
    run("document.querySelector('.run-card button.reason[data-reason=\"' + arguments[0] + '\"]').click()",
        reason_token(0, "gave_up"))  # fmt: skip
    shown = run("return Array.from(document.querySelectorAll('tr.task-row:not([hidden])')).map(r => r.dataset.task)")
    assert shown == [f"0/step_000001/{B}"]
    assert run("return document.getElementById('f-count').innerText") == "1 of 3 groups"
    driver.save_screenshot(str(tmp_path / "table.png"))
    _not_blank(tmp_path / "table.png")

    driver.get(f"{page}#group-0-step_000001-click-test-seed3-aaaa1111")  # short episodes: the grid
    heads = run(
        "return Array.from(document.querySelectorAll('.task-detail:target .grid > .run-head')).map(h => h.innerText)"
    )
    assert [h.split()[0] for h in heads] == ["#0", "#1", "#2", "#3"]  # the group's episodes, side by side
    assert "reward 1" in heads[0] and "adv +1.15" in heads[0] and "infra failure" in heads[3]
    stats = run("return document.querySelector('.task-detail:target .group-stats').innerText")
    assert "reward mean 0.3" in stats and "std 0.608" in stats
    assert run("return document.querySelector('.task-detail:target .views').classList.contains('compact')") is False
    assert run("return document.querySelectorAll('#pwned, .task-detail:target script:not([type])').length") == 0
    run("var d = document.querySelectorAll('.task-detail:target .cell.step details.prompt')[4];"
        " d.open = true; d.scrollIntoView();")  # fmt: skip  # episode #1's step 2: two history images
    assert _loaded(driver, ".task-detail:target details.prompt[open] .pimg img") == 2
    driver.save_screenshot(str(tmp_path / "group.png"))
    _not_blank(tmp_path / "group.png")

    driver.get(f"{page}#group-0-step_000001-click-test-seed4-bbbb2222")  # 7 steps: filmstrips first
    assert run("return document.querySelector('.task-detail:target .views').classList.contains('compact')") is True
    assert _loaded(driver, ".task-detail:target .strips .thumb img") == 16  # 7 steps and the end, twice
    run("document.querySelectorAll('.task-detail:target .thumb')[12].click()")  # episode #1, step 5
    expanded = run("return document.querySelector('.task-detail:target .expanded').innerText")
    assert "#1" in expanded and "step 5" in expanded and "click(100, 650)" in expanded
    driver.save_screenshot(str(tmp_path / "filmstrip.png"))
    _not_blank(tmp_path / "filmstrip.png")
    run("document.querySelector('.task-detail:target .compact-toggle').click()")
    assert run("return getComputedStyle(document.querySelector('.task-detail:target .grid')).display") == "grid"


def test_a_step_is_invalid_alike_in_its_thumbnail_its_cell_and_the_failure_reason(tmp_path):
    """A step line that records validity only in its parsed action reads as invalid in every view of it."""
    from verl_cua.viewer.strip import filmstrip

    steps = [{"step": 1, "action": {"valid": False, "raw": "click(?)"}}, {"step": 2, "valid": True}]
    episode = EpisodeRecord("t/x", tmp_path, {"status": "failure", "reward": 0.0}, steps)
    strip = filmstrip(0, "run", episode)
    assert strip.count(" invalid") == 1  # step 1's thumbnail only (it read as valid before the shared rule)
    last_only = EpisodeRecord("t/y", tmp_path, {"status": "failure", "reward": 0.0}, steps[:1])
    assert failure_reason(last_only) == "invalid_action"
