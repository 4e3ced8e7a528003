"""bench.gigpo_anchors below the desktop: a task it cannot run stops it in one line before any desktop starts, and its
tally (GiGPO's own grouping per anchor against the pointer-parked ground truth) counts the pairs of drawn groups
whose truth is known by construction: screens that differ only in the pointer, per-state trees, one tree for all."""

import json
import random
from math import comb

from PIL import Image, ImageDraw

from bench import gigpo_anchors
from verl_cua.algos.gigpo import text_anchor

TASKS, EPISODES, STATES = ("calc-a", "writer-b"), 3, 2


def _screen(task: int, state: int) -> Image.Image:
    """A drawn desktop, one per (task, state): a window whose place and colour are the state."""
    image = Image.new("RGB", (1280, 720), (200, 200, 200))
    ImageDraw.Draw(image).rectangle((100 + 300 * state, 100 + 200 * task, 400 + 300 * state, 300 + 200 * task),
                                    fill=(40 * state, 90, 200 - 60 * task))  # fmt: skip
    return image


def _with_pointer(image: Image.Image, rng: random.Random) -> Image.Image:
    shot = image.copy()
    x, y = rng.randrange(40, 1240), rng.randrange(40, 680)
    ImageDraw.Draw(shot).polygon([(x, y), (x, y + 12), (x + 8, y + 9)], fill=(0, 0, 0), outline=(255, 255, 255))
    return shot


def _groups(one_tree: bool = False):
    """What `collect` gathers on a desktop, drawn: each episode passes the task's states with the pointer elsewhere."""
    rng = random.Random(0)
    groups, anchors, parked = [], {"screenshot": [], "screen": [], "a11y": []}, []
    for t, task in enumerate(TASKS):
        for _ in range(EPISODES):
            ep = {"screenshot": [], "screen": [], "a11y": [], "parked": []}
            for state in range(STATES):
                base = _screen(t, state)
                ep["parked"].append(gigpo_anchors._anchors(base)[0])
                exact, coarse = gigpo_anchors._anchors(_with_pointer(base, rng))
                ep["screenshot"].append(exact)
                ep["screen"].append(coarse)
                ep["a11y"].append(text_anchor("desktop" if one_tree else f"{task} window {state}"))
            groups.append(task)
            parked.append(ep.pop("parked"))
            for name in anchors:
                anchors[name].append(ep[name])
    return groups, anchors, parked


def test_the_tally_counts_grouped_and_merged_pairs_against_the_ground_truth():
    report = gigpo_anchors.tally(list(TASKS), EPISODES, *_groups())
    same = len(TASKS) * STATES * comb(EPISODES, 2)  # pairs of steps in one state: the same step of two episodes
    assert report["steps"] == len(TASKS) * EPISODES * STATES and report["same_state_pairs"] == same
    exact, tree, coarse = report["screenshot"], report["a11y"], report["screen"]
    assert exact["same_state_pairs_grouped"] == 0 and exact["singleton_steps"] == report["steps"]  # the pointer
    assert tree["same_state_pairs_grouped"] == same and tree["distinct_state_pairs_merged"] == 0
    assert tree["step_groups"] == len(TASKS) * STATES and tree["step_group_size_mean"] == EPISODES
    # the coarse thumbnail: a pointer may move a cell across a level (it does here, on flat gray), windows always do
    assert coarse["same_state_pairs_grouped"] <= same and coarse["distinct_state_pairs_merged"] == 0
    for figures in (exact, tree, coarse):  # every step is a singleton or in one step group
        assert figures["singleton_steps"] + figures["step_groups"] * figures["step_group_size_mean"] == report["steps"]
    # the negative control: one tree for every screen merges every pair of different states within a task
    merged = gigpo_anchors.tally(list(TASKS), EPISODES, *_groups(one_tree=True))["a11y"]["distinct_state_pairs_merged"]
    assert merged == len(TASKS) * comb(EPISODES * STATES, 2) - same


def test_a_task_it_cannot_run_is_one_line_before_any_desktop(capsys):
    assert gigpo_anchors.main(["--tasks", "calc-sum-column,no-such-task"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("bench.gigpo_anchors: unknown task(s) no-such-task; valid:")
    assert "calc-sum-column" in err
    assert gigpo_anchors.main(["--tasks", ""]) == 2 and "no task given" in capsys.readouterr().err


def test_a_group_on_the_local_desktop(local_desktop, capsys):
    """Two episodes of a one-step terminal task: GiGPO's groups per anchor on real screenshots and trees."""
    assert gigpo_anchors.main(["--tasks", "term-create-file", "--episodes", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 2 and report["same_state_pairs"] == 1  # the pointer parked: the same screen twice
    assert report["screenshot"]["same_state_pairs_grouped"] == 0  # the pointer elsewhere: other pixels
    assert all(report[name]["distinct_state_pairs_merged"] == 0 for name in ("screenshot", "screen", "a11y"))
    assert report["a11y"]["same_state_pairs_grouped"] == 1  # the terminal's tree does not show the pointer
