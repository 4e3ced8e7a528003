"""`EnvSpec` and `env_spec`: what the built-in envs say of themselves, the defaults an env registered without a spec
(or not registered here) gets, and provider and desktop-cost reads."""

from dataclasses import replace

import pytest

from verl_cua.envs import DesktopCost, EnvSpec, env_screen, env_spec
from verl_cua.envs.spec import HOST_DESKTOP


def test_the_built_in_envs_say_what_the_doctor_and_sft_data_read():
    miniwob, osworld = env_spec("miniwob"), env_spec("osworld")
    assert miniwob.keeps_idle and miniwob.seeded_tasks and miniwob.provider_in({"provider": "docker"}) is None
    assert miniwob.desktop_cost(None) == DesktopCost(0.4, 0.5)
    assert not osworld.keeps_idle and not osworld.seeded_tasks
    assert osworld.provider_in({}) == "local" and osworld.provider_in({"provider": "aws"}) == "aws"
    assert osworld.desktop_cost("docker") == DesktopCost(4.0, 4) and osworld.desktop_cost("local") == HOST_DESKTOP
    assert osworld.desktop_cost("aws") == HOST_DESKTOP  # a cloud VM: only the client runs here


def test_an_env_without_a_spec_or_unknown_here_gets_the_defaults(scratch_env):
    scratch_env("bare")
    for name in ("bare", "registered-elsewhere"):
        spec = env_spec(name)
        assert replace(spec, name="", entry_point=None) == EnvSpec() and spec.name == name
        assert spec.provider_in({"provider": "x"}) is None
        assert spec.desktop_cost(None) == HOST_DESKTOP and not spec.keeps_idle and not spec.seeded_tasks
    assert env_screen("bare", {"screen": [640, 480]}) == (640, 480)
    with pytest.raises(ValueError, match=r"^env 'bare' does not say its screenshots' size"):
        env_screen("bare", {})


def test_a_later_registration_without_a_spec_keeps_the_first_one(scratch_env):
    spec = EnvSpec(keeps_idle=True)
    factory = lambda **kwargs: None  # noqa: E731
    scratch_env("kiosk", spec, entry_point=factory)
    scratch_env("kiosk", entry_point=factory)
    assert env_spec("kiosk") == replace(spec, name="kiosk", entry_point=factory)
