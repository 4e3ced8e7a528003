"""Entropulse: its settings' bounds (the config schema's) and the RL/SFT phase state machine for each schedule."""

import pytest

from verl_cua.algos.entropulse import Entropulse
from verl_cua.integrations.verl.config.schema import EntropulseConfig


def run(pulse: Entropulse, entropies, after=None) -> list[str]:
    """Observe each entropy; on "sft" immediately finish the SFT phase (with entropy_after=after)."""
    decisions = []
    for entropy in entropies:
        decision = pulse.observe(entropy)
        decisions.append(decision)
        if decision == "sft":
            pulse.sft_done(after)
    return decisions


def test_none_schedule_never_pulses():
    pulse = Entropulse(EntropulseConfig())
    assert run(pulse, [1.0, 0.0, 0.0] * 20) == ["rl"] * 60
    assert pulse.phases_completed == 0 and pulse.rl_steps_in_phase == 60


def test_fixed_schedule_switches_at_exact_steps():
    pulse = Entropulse(EntropulseConfig(schedule="fixed", rl_steps=5, sft_steps=3))
    decisions = []
    for step in range(1, 13):
        decisions.append(pulse.observe(0.5))
        if step == 5:
            assert pulse.phase == "sft" and pulse.metrics()["entropulse/phase"] == 1.0
            with pytest.raises(RuntimeError, match="sft_done"):
                pulse.observe(0.5)
            pulse.sft_done()
            assert pulse.rl_steps_in_phase == 0 and pulse.phase == "rl"
        elif decisions[-1] == "sft":
            pulse.sft_done()
    assert decisions == ["rl", "rl", "rl", "rl", "sft", "rl", "rl", "rl", "rl", "sft", "rl", "rl"]
    assert pulse.phases_completed == 2 and pulse.total_sft_steps == 6 and pulse.rl_steps_in_phase == 2
    metrics = pulse.metrics()
    assert metrics["entropulse/sft_phases"] == 2.0 and metrics["entropulse/sft_steps"] == 6.0
    assert metrics["entropulse/rl_steps_in_phase"] == 2.0 and metrics["entropulse/phase"] == 0.0
    with pytest.raises(RuntimeError, match="outside an SFT phase"):
        pulse.sft_done()


def test_entropy_schedule_waits_for_min_rl_steps_then_resets():
    cfg = EntropulseConfig(schedule="entropy", ratio=0.5, ema=0.5, early_steps=1, min_rl_steps=4, sft_steps=2)
    pulse = Entropulse(cfg)
    # early value = 1.0 (first step), threshold 0.5 x 1.0 = 0.5.
    # EMA: 1.0; 0.5 x 1 + 0.5 x 0 = 0.5 (not < 0.5); 0.25 (< 0.5 but only 3 steps in phase); 0.125 at step 4 -> sft
    emas = []
    decisions = []
    for entropy in [1.0, 0.0, 0.0, 0.0]:
        decisions.append(pulse.observe(entropy))
        emas.append(pulse.ema_entropy)
    assert decisions == ["rl", "rl", "rl", "sft"]
    assert emas == pytest.approx([1.0, 0.5, 0.25, 0.125])
    assert pulse.early_entropy == 1.0
    pulse.sft_done(entropy_after=0.9)
    assert pulse.ema_entropy == 0.9 and pulse.rl_steps_in_phase == 0
    # EMA restarts at 0.9: 0.9, 0.5 x 0.9 + 0.5 x 0.1 = 0.5, 0.3 (phase has 3 < 4 steps), 0.2 -> sft
    decisions = [pulse.observe(e) for e in [0.9, 0.1, 0.1, 0.1]]
    assert decisions == ["rl", "rl", "rl", "sft"]
    assert pulse.ema_entropy == pytest.approx(0.2)
    assert pulse.early_entropy == 1.0  # fixed after the first early_steps steps
    # without entropy_after the next observation re-initializes the EMA
    pulse.sft_done()
    assert pulse.ema_entropy is None
    assert pulse.observe(0.05) == "rl" and pulse.ema_entropy == 0.05
    assert pulse.phases_completed == 2 and pulse.total_sft_steps == 4


def test_entropy_schedule_needs_early_value_first():
    # ema 0 -> the EMA is the latest entropy; ratio 1; the early value needs 3 steps: (1.0 + 0.5 + 0.1) / 3 = 0.53333
    pulse = Entropulse(EntropulseConfig(schedule="entropy", ratio=1.0, ema=0.0, early_steps=3, min_rl_steps=1))
    assert pulse.observe(1.0) == "rl" and pulse.early_entropy is None
    assert pulse.observe(0.5) == "rl"  # 0.5 < 1.0 but the early value is not known yet
    assert pulse.observe(0.1) == "sft"  # 0.1 < 0.53333
    assert pulse.early_entropy == pytest.approx(0.53333, abs=1e-4)


def test_entropy_schedule_hand_computed_ema_sequence():
    # ema 0.9, early over 2 steps, ratio 0.5, min 3 steps; entropies 2.0, 2.0, then 0.2 onwards.
    # early = 2.0 -> threshold 1.0. EMA: 2.0, 2.0, 0.9 x 2 + 0.1 x 0.2 = 1.82, 1.658, 1.5122, 1.38098, 1.262882,
    # 1.1565938, 1.06093442, 0.974840978 (< 1.0 at step 10) -> sft
    pulse = Entropulse(EntropulseConfig(schedule="entropy", ratio=0.5, ema=0.9, early_steps=2, min_rl_steps=3))
    emas, decisions = [], []
    for entropy in [2.0, 2.0] + [0.2] * 8:
        decisions.append(pulse.observe(entropy))
        emas.append(pulse.ema_entropy)
    expected = [2.0, 2.0, 1.82, 1.658, 1.5122, 1.38098, 1.262882, 1.1565938, 1.06093442, 0.974840978]
    assert emas == pytest.approx(expected, abs=1e-6)
    assert decisions == ["rl"] * 9 + ["sft"]
    assert pulse.metrics()["entropulse/entropy_early"] == 2.0


def test_unknown_entropies_are_skipped():
    pulse = Entropulse(EntropulseConfig(schedule="entropy", early_steps=2, min_rl_steps=1))
    assert pulse.observe(None) == "rl" and pulse.observe(float("nan")) == "rl"
    assert pulse.ema_entropy is None and pulse.early_entropy is None
    assert "entropulse/entropy_ema" not in pulse.metrics() and "entropulse/entropy_early" not in pulse.metrics()
    assert pulse.rl_steps_in_phase == 2


def test_state_dict_round_trip_continues_identically():
    cfg = EntropulseConfig(schedule="entropy", ratio=0.5, ema=0.5, early_steps=2, min_rl_steps=2)
    entropies = [1.0, 1.0, 0.8, 0.4, 0.3, 0.1, 0.9, 0.9, 0.2, 0.1, 0.05, 0.05]
    reference = Entropulse(cfg)
    expected = run(reference, entropies, after=0.9)
    first = Entropulse(cfg)
    head = run(first, entropies[:5], after=0.9)
    resumed = Entropulse(cfg)
    resumed.load_state_dict(first.state_dict())
    assert resumed.state_dict() == first.state_dict()
    assert head + run(resumed, entropies[5:], after=0.9) == expected
    assert resumed.metrics() == reference.metrics()
    assert "sft" in expected


def test_state_dict_round_trip_mid_sft():
    pulse = Entropulse(EntropulseConfig(schedule="fixed", rl_steps=1))
    assert pulse.observe(0.3) == "sft"
    copy = Entropulse(EntropulseConfig(schedule="fixed", rl_steps=1))
    copy.load_state_dict(pulse.state_dict())
    assert copy.phase == "sft"
    copy.sft_done()
    assert copy.phases_completed == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedule": "cosine"}, "schedule='cosine' is not valid; valid: none, fixed, entropy"),
        ({"rl_steps": 0}, "rl_steps"),
        ({"sft_steps": -1}, "sft_steps"),
        ({"early_steps": 2.5}, "early_steps"),
        ({"min_rl_steps": 0}, "min_rl_steps"),
        ({"ratio": 0.0}, "ratio"),
        ({"ratio": 1.5}, "ratio"),
        ({"ema": 1.0}, "ema"),
        ({"ema": -0.1}, "ema"),
    ],
)
def test_config_validation(kwargs, message):
    """The bounds are the config schema's, checked before Ray starts (a ratio of 0 used to pass it and fail in the
    trainer, after the workers had started)."""
    from verl_cua.integrations.verl.config.checks import validate_cua_config
    from verl_cua.integrations.verl.config.fields import CuaConfigError

    with pytest.raises(CuaConfigError, match=f"cua.entropulse.{message}") as err:
        validate_cua_config({"entropulse": kwargs})
    assert "\n" not in str(err.value)


def test_a_phase_that_ran_no_sft_step_is_not_counted():
    from verl_cua.algos.entropulse import Entropulse
    from verl_cua.integrations.verl.config.schema import EntropulseConfig

    pulse = Entropulse(EntropulseConfig(schedule="fixed", rl_steps=2, sft_steps=3))
    assert pulse.observe(1.0) == "rl" and pulse.observe(1.0) == "sft"
    pulse.sft_done(steps_run=0)  # nothing was buffered yet
    assert (pulse.phase, pulse.phases_completed, pulse.total_sft_steps, pulse.rl_steps_in_phase) == ("rl", 0, 0, 0)
    assert pulse.observe(1.0) == "rl" and pulse.observe(1.0) == "sft"  # a full RL phase again, then another try
    pulse.sft_done(steps_run=3)
    assert (pulse.phases_completed, pulse.total_sft_steps) == (1, 3)
