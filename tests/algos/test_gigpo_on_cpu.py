"""GiGPO: discounted step returns, episode + anchor-state advantages on a hand-worked example."""

import hashlib

import pytest

from verl_cua.algos.gigpo import (
    SCREEN_GRID,
    gigpo_advantages,
    screen_anchor,
    screenshot_anchor,
    step_returns,
    step_rewards_with_penalties,
    text_anchor,
)

# Two episode groups (tasks A and B) x 3 episodes; anchors are observation ids; gamma = 0.5; default step rewards
# (0 everywhere except the episode reward on the last step).
REWARDS = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
GROUPS = ["A", "A", "A", "B", "B", "B"]
ANCHORS = [
    ["s0", "s1", "s2"],  # e0: step rewards [0, 0, 1] -> returns [0.25, 0.5, 1]
    ["s0", "s3"],  # e1: [0, 0] -> [0, 0]
    ["s0", "s1"],  # e2: [0, 1] -> [0.5, 1]
    ["s0", "s0"],  # e3: [0, 0] -> [0, 0]; a repeated state in one episode; "s0" of B is not "s0" of A
    ["s0", "s4"],  # e4: [0, 0] -> [0, 0]
    ["s0", "s4", "s5"],  # e5: [0, 0, 1] -> [0.25, 0.5, 1]
]


def approx_rows(rows):
    """pytest.approx for a list of rows."""
    return [pytest.approx(row, abs=1e-4) for row in rows]


def test_step_returns():
    # R2 = 1; R1 = 0 + 0.5 * 1 = 0.5; R0 = 1 + 0.5 * 0.5 = 1.25
    assert step_returns([1.0, 0.0, 1.0], 0.5) == pytest.approx([1.25, 0.5, 1.0])
    assert step_returns([0.0, 0.0, 2.0], 0.9) == pytest.approx([1.62, 1.8, 2.0])
    assert step_returns([], 0.5) == []


def test_mean_norm_hand_worked():
    episode, combined, metrics = gigpo_advantages(REWARDS, GROUPS, ANCHORS, gamma=0.5, norm="mean")
    # A^E: group A mean 2/3 -> [1/3, -2/3, 1/3]; group B mean 1/3 -> [-1/3, -1/3, 2/3]
    assert episode == pytest.approx([0.33333, -0.66667, 0.33333, -0.33333, -0.33333, 0.66667], abs=1e-4)
    # A^S, group A: s0 = {e0: 0.25, e1: 0, e2: 0.5}, mean 0.25 -> [0, -0.25, 0.25];
    #   s1 = {e0: 0.5, e2: 1}, mean 0.75 -> [-0.25, 0.25]; s2, s3 singletons -> 0.
    # group B: s0 = {e3: 0, 0; e4: 0; e5: 0.25}, mean 0.0625 -> [-0.0625 x 3, 0.1875];
    #   s4 = {e4: 0, e5: 0.5}, mean 0.25 -> [-0.25, 0.25]; s5 singleton -> 0.
    # combined = A^E + A^S
    assert combined == approx_rows(
        [
            [0.33333, 0.08333, 0.33333],  # 1/3 + [0, -0.25, 0]
            [-0.91667, -0.66667],  # -2/3 + [-0.25, 0]
            [0.58333, 0.58333],  # 1/3 + [0.25, 0.25]
            [-0.39583, -0.39583],  # -1/3 - 0.0625
            [-0.39583, -0.58333],  # -1/3 + [-0.0625, -0.25]
            [0.85417, 0.91667, 0.66667],  # 2/3 + [0.1875, 0.25, 0]
        ]
    )
    # groups with >= 2 members: A.s0 (3), A.s1 (2), B.s0 (4), B.s4 (2): mean size 11 / 4 = 2.75;
    # singletons: A.s2, A.s3, B.s5.
    assert metrics == {"gigpo/step_groups": 4.0, "gigpo/step_group_size_mean": 2.75, "gigpo/singleton_steps": 3.0}


def test_std_norm_hand_worked():
    episode, combined, _ = gigpo_advantages(REWARDS, GROUPS, ANCHORS, gamma=0.5, norm="std")
    # A: [1, 0, 1], deviations [1/3, -2/3, 1/3], unbiased var (1/9 + 4/9 + 1/9) / 2 = 1/3, std 0.57735
    #   -> [0.57735, -1.15470, 0.57735]; B: [0, 0, 1] is the mirror image -> [-0.57735, -0.57735, 1.15470]
    assert episode == pytest.approx([0.57735, -1.15470, 0.57735, -0.57735, -0.57735, 1.15470], abs=1e-4)
    # A.s0: [0.25, 0, 0.5], unbiased std sqrt((0 + 0.0625 + 0.0625) / 2) = 0.25 -> [0, -1, 1]
    # A.s1: [0.5, 1], std sqrt(0.125 / 1) = 0.35355 -> [-0.70711, 0.70711]
    # B.s0: [0, 0, 0, 0.25], mean 0.0625, var (3 x 0.00390625 + 0.03515625) / 3 = 0.015625, std 0.125
    #   -> [-0.5, -0.5, -0.5, 1.5]; B.s4: [0, 0.5] -> [-0.70711, 0.70711]
    assert combined == approx_rows(
        [
            [0.57735, -0.12976, 0.57735],  # 0.57735 + [0, -0.70711, 0]
            [-2.15470, -1.15470],  # -1.15470 + [-1, 0]
            [1.57735, 1.28446],  # 0.57735 + [1, 0.70711]
            [-1.07735, -1.07735],  # -0.57735 - 0.5
            [-1.07735, -1.28446],  # -0.57735 + [-0.5, -0.70711]
            [2.65470, 1.86181, 1.15470],  # 1.15470 + [1.5, 0.70711, 0]
        ]
    )


def test_step_weight_and_explicit_step_rewards():
    # one group of two 2-step episodes sharing both anchors; explicit per-step rewards, gamma 0.5:
    # e0 rewards [1, 0] -> returns [1, 0]; e1 [0, 1] -> [0.5, 1]. Episode rewards 1 and 0 -> A^E = [0.5, -0.5].
    # A^S: x: [1, 0.5] mean 0.75 -> [0.25, -0.25]; y: [0, 1] mean 0.5 -> [-0.5, 0.5]. step_weight 2:
    # e0: 0.5 + 2 x [0.25, -0.5] = [1.0, -0.5]; e1: -0.5 + 2 x [-0.25, 0.5] = [-1.0, 0.5]
    episode, combined, metrics = gigpo_advantages(
        [1.0, 0.0], ["g", "g"], [["x", "y"], ["x", "y"]], [[1.0, 0.0], [0.0, 1.0]], gamma=0.5, step_weight=2.0
    )
    assert episode == pytest.approx([0.5, -0.5])
    assert combined == approx_rows([[1.0, -0.5], [-1.0, 0.5]])
    assert metrics["gigpo/step_groups"] == 2.0 and metrics["gigpo/singleton_steps"] == 0.0


@pytest.mark.parametrize("norm", ["mean", "std"])
def test_singletons_give_zero(norm):
    # every episode alone in its group and every anchor unique: no relative signal at all
    episode, combined, metrics = gigpo_advantages([1.0, 0.0], ["a", "b"], [["x", "y"], ["x"]], norm=norm)
    assert episode == [0.0, 0.0]
    assert combined == [[0.0, 0.0], [0.0]]
    assert metrics == {"gigpo/step_groups": 0.0, "gigpo/step_group_size_mean": 0.0, "gigpo/singleton_steps": 3.0}


def test_equal_returns_under_std_norm_give_zero():
    episode, combined, _ = gigpo_advantages([1.0, 1.0], ["g", "g"], [["x"], ["x"]], norm="std")
    assert episode == [0.0, 0.0] and combined == [[0.0], [0.0]]


def test_empty_episode_and_validation():
    episode, combined, _ = gigpo_advantages([1.0, 0.0], ["g", "g"], [["x"], []])
    assert episode == pytest.approx([0.5, -0.5]) and combined == [[0.5], []]
    with pytest.raises(ValueError, match="valid: mean, std"):
        gigpo_advantages([1.0], ["g"], [["x"]], norm="z")
    with pytest.raises(ValueError, match="lengths differ"):
        gigpo_advantages([1.0], ["g", "h"], [["x"]])
    with pytest.raises(ValueError, match="one reward per step"):
        gigpo_advantages([1.0], ["g"], [["x", "y"]], [[1.0]])


def test_anchors():
    assert screenshot_anchor(b"\x89PNG") == hashlib.sha1(b"\x89PNG").hexdigest()
    assert text_anchor("button  OK\n  (10, 20)") == text_anchor("button OK (10, 20) ")
    assert text_anchor("button OK") != text_anchor("button Cancel")
    assert text_anchor("a b") == hashlib.sha1(b"a b").hexdigest()


def test_penalties_are_charged_at_their_step():
    # score 1, invalid actions at steps 0 and 2 of 4, penalty 0.1: rewards -0.1, 0, -0.1, 1 (sum = the reward 0.8)
    rewards = step_rewards_with_penalties(1.0, [True, False, True, False], 0.1)
    assert rewards == pytest.approx([-0.1, 0.0, -0.1, 1.0]) and sum(rewards) == pytest.approx(0.8)
    assert step_rewards_with_penalties(0.0, [True], 0.1, steps=3) == pytest.approx([-0.1, 0.0, 0.0])
    assert step_rewards_with_penalties(1.0, [], 0.1) == []
    # two episodes of one group pass the same screen "s" at step 0; only the first acted invalidly there.
    # gamma 0.5: returns at "s": A: -0.1 + 0.5 * 1 = 0.4; B: 0 + 0.5 * 1 = 0.5 -> A^S = -0.05, +0.05 (mean norm).
    # Lumping the penalty into the last step would give A: 0.5 * 0.9 = 0.45 -> a smaller step gap (-0.025, +0.025).
    anchors = [["s", "x"], ["s", "y"]]
    a = step_rewards_with_penalties(1.0, [True, False], 0.1)
    b = step_rewards_with_penalties(1.0, [False, False], 0.1)
    episode_adv, per_step, _ = gigpo_advantages([0.9, 1.0], ["g", "g"], anchors, step_rewards=[a, b], gamma=0.5)
    assert episode_adv == pytest.approx([-0.05, 0.05])
    assert per_step[0][0] == pytest.approx(-0.05 - 0.05) and per_step[1][0] == pytest.approx(0.05 + 0.05)
    _, lumped, _ = gigpo_advantages([0.9, 1.0], ["g", "g"], anchors, gamma=0.5)
    assert lumped[0][0] == pytest.approx(-0.05 - 0.025)


def _thumbnail(image):
    from PIL import Image

    return image.convert("L").resize(SCREEN_GRID, Image.BOX).tobytes()


def test_screen_anchor_mostly_ignores_the_pointer_but_not_a_new_window():
    """On a 1920 x 1080 screen, the pointer drawn at 20 random places: exact pixels give 20 anchors, the screen
    anchor one anchor for most of them (a pointer that tips a cell's mean over a level boundary splits one off);
    a dialog opening is a new state."""
    import random
    from collections import Counter

    from PIL import Image, ImageDraw

    base = Image.new("RGB", (1920, 1080), (40, 90, 160))
    draw = ImageDraw.Draw(base)
    draw.rectangle((150, 150, 900, 600), fill=(230, 230, 230))  # a window
    draw.text((180, 180), "Documents", fill=(0, 0, 0))
    rng = random.Random(0)
    exact, coarse = set(), Counter()
    for _ in range(20):
        x, y = rng.randrange(40, 1880), rng.randrange(40, 1040)
        shot = base.copy()
        offsets = [(0, 0), (0, 17), (4, 13), (7, 20), (9, 19), (6, 12), (12, 12)]  # the desktop server's pointer
        arrow = [(x + dx, y + dy) for dx, dy in offsets]
        ImageDraw.Draw(shot).polygon(arrow, fill="white", outline="black")
        exact.add(screenshot_anchor(shot.tobytes()))
        coarse[screen_anchor(_thumbnail(shot))] += 1
    assert len(exact) == 20
    modal, count = coarse.most_common(1)[0]
    assert count >= 14, coarse
    dialog = base.copy()
    ImageDraw.Draw(dialog).rectangle((1000, 300, 1700, 800), fill=(250, 250, 250))  # a dialog opened
    assert screen_anchor(_thumbnail(dialog)) != modal
    with pytest.raises(ValueError, match="pixels for a 16x9"):
        screen_anchor(b"\x00" * 10, (16, 9))
