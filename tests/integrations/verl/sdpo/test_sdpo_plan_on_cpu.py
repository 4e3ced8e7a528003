"""Which rows the SDPO teacher reprompts: demos from a successful sibling episode (never one's own), feedback only
on failures, nothing for infra failures; groups with neither are counted."""

from dataclasses import replace

from verl_cua.integrations.verl.config.schema import SdpoConfig
from verl_cua.integrations.verl.sdpo.plan import plan_reprompts

SDPO = SdpoConfig(demo=True, feedback=True, final_screenshot=True, dont_reprompt_on_self_success=True)
SDPO_ALL = replace(SDPO, feedback_only_without_demo=False)  # demo and feedback together


def _row(success=False, feedback="", actions=("click(1, 2)",), shot=b"png", infra=False):
    return {
        "cua_success": success,
        "cua_feedback": feedback,
        "cua_actions": list(actions),
        "cua_final_screenshot": shot,
        "cua_infra_failure": infra,
    }


def test_demo_feedback_and_counts():
    rows = [
        _row(success=True, actions=["click(5, 5)"]),  # g1: the only success -> no demo of its own
        _row(feedback=""),  # g1 failure, no feedback -> demo of row 0
        _row(feedback="2 outputs were not valid actions"),  # g2 failure with feedback, no success in g2
        _row(feedback=""),  # g2 failure without feedback -> nothing new
        _row(feedback="", infra=True),  # g3 infra: never reprompted
        _row(feedback=""),  # g4: no success, no feedback -> a no-signal group
    ]
    plan = plan_reprompts(rows, ["g1", "g1", "g2", "g2", "g3", "g4"], [0, 1, 0, 1, 0, 0], SDPO)
    assert plan.reprompt == [False, True, True, False, False, False]
    assert plan.demo_actions[1] == ["click(5, 5)"] and plan.demo_actions[2] is None
    assert plan.feedback[2] == "2 outputs were not valid actions"
    assert plan.use_image == [False, False, True, False, False, False]  # row 1 has a demo: no env feedback
    assert plan.metrics["sdpo/no_signal_groups"] == 1.0  # g4 (g3 is infra only and not counted)
    assert plan.metrics["sdpo/success_group_fraction"] == 1 / 3
    assert plan.metrics["sdpo/reprompt_fraction"] == 2 / 5


def test_environment_feedback_comes_only_without_a_demo_unless_asked_for_with_it():
    """The reference's environment_feedback_only_without_solution: a row with a demo gets neither the feedback text
    nor the final screenshot; feedback_only_without_demo=False gives it all three."""
    rows = [_row(success=True, actions=["click(5, 5)"]), _row(feedback="clicked outside the button")]
    rows += [_row(feedback="no valid action")]  # group h: no success, so its feedback stays
    uids, sessions = ["g", "g", "h"], [0, 1, 0]
    plan = plan_reprompts(rows, uids, sessions, SDPO)
    assert plan.demo_actions[1] == ["click(5, 5)"] and plan.feedback[1] == "" and not plan.use_image[1]
    assert plan.feedback[2] == "no valid action" and plan.use_image[2]
    both = plan_reprompts(rows, uids, sessions, SDPO_ALL)
    assert both.demo_actions[1] == ["click(5, 5)"] and both.feedback[1] == "clicked outside the button"
    assert both.use_image[1] and both.reprompt == plan.reprompt == [False, True, True]


def test_two_successes_teach_each_other_and_switches_turn_parts_off():
    rows = [_row(success=True, actions=["a"]), _row(success=True, actions=["b"]), _row(feedback="x")]
    plan = plan_reprompts(rows, ["g"] * 3, [0, 1, 2], SDPO)
    assert plan.demo_actions == [["b"], ["a"], ["a"]] and plan.reprompt == [True, True, True]
    plan = plan_reprompts(rows, ["g"] * 3, [0, 1, 2], replace(SDPO, demo=False, final_screenshot=False))
    assert plan.reprompt == [False, False, True] and plan.use_image == [False, False, False]


def test_step_rows_of_one_episode_share_its_demo_and_success():
    # episode (g, 0) succeeded over 2 step rows; episode (g, 1) failed over 2 step rows
    rows = [_row(success=True, actions=["a", "b"])] * 2 + [_row()] * 2
    plan = plan_reprompts(rows, ["g"] * 4, [0, 0, 1, 1], SDPO)
    assert plan.demo_actions == [None, None, ["a", "b"], ["a", "b"]]  # a success is not its own demo
    assert plan.reprompt == [False, False, True, True]


def test_a_group_without_success_takes_a_buffered_success_of_its_task():
    rows = [{**_row(feedback=""), "cua_task": "click-test", "cua_actions": ["x"]}, _row(feedback="")]
    buffered = {"click-test": [["old"], ["newest"], ["x"]]}  # the own trajectory is never its own demo
    plan = plan_reprompts(rows, ["g", "h"], [0, 0], SDPO, buffer_demos=buffered)
    assert plan.demo_actions == [["newest"], None]
    assert plan.reprompt == [True, False]
    assert plan.metrics["sdpo/buffer_demo_fraction"] == 0.5
