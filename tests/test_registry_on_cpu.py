"""`Registry`: names -> values with duplicate checks, a one-line lookup error listing the valid names, the class
decorator that registers an instance, where each entry is defined, and dict reads; and the three registries on it."""

import pytest

from verl_cua.registry import Registry, defined_in


def widgets(extra=()):
    return Registry("widget", "widgets", extra_valid=extra)


def test_lookup_returns_the_value_and_an_unknown_name_lists_the_valid_ones_in_one_line():
    reg = widgets(extra=("auto",))
    reg.add("zeta", 1)
    reg.add("alpha", 2)
    assert reg.lookup("zeta") == 1 and reg.lookup("alpha") == 2
    with pytest.raises(ValueError) as err:
        reg.lookup("nope")
    assert str(err.value) == "unknown widget 'nope'; valid widgets: alpha, zeta, auto"
    with pytest.raises(ValueError, match=r"unknown widget \['a'\]; valid widgets"):
        reg.lookup(["a"])  # an unhashable name is an unknown name, not a TypeError


def test_a_taken_name_refuses_a_different_value_and_names_both():
    reg = widgets()
    reg.add("tool", "plugins.a:Tool")
    reg.add("tool", "plugins.a:Tool")  # the same registration again (a module imported twice)
    with pytest.raises(ValueError) as err:
        reg.add("tool", "plugins.b:Tool")
    assert str(err.value) == "widget 'tool' is already registered: plugins.a:Tool vs plugins.b:Tool"
    assert reg["tool"] == "plugins.a:Tool"


def test_a_reloaded_class_replaces_its_entry_but_two_lambdas_are_two_definitions():
    reg = widgets()
    first = type("Tool", (), {"__module__": "plugins.a"})
    reloaded = type("Tool", (), {"__module__": "plugins.a"})  # importlib.reload makes a new class of one definition
    reg.add("tool", first)
    reg.add("tool", reloaded)
    assert reg["tool"] is reloaded
    reg.add("tool", "plugins.a:Tool")  # its lazy "module:Name" form is the same definition too
    reg.add("factory", lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.add("factory", lambda: 2)


def test_the_decorator_registers_one_named_instance_and_returns_the_class():
    reg = widgets()

    @reg.register("gadget")
    class Gadget:
        name = "unset"

    assert isinstance(reg["gadget"], Gadget) and reg["gadget"].name == "gadget"
    assert Gadget.name == "unset"  # the instance is named, the class is left as written
    with pytest.raises(ValueError, match="widget 'gadget' is already registered"):

        @reg.register("gadget")
        class Other:
            pass


def test_origins_say_where_each_entry_is_defined_sorted_by_name():
    reg = widgets()

    class Gadget:
        pass

    reg.add("lazy", "plugins.desk:Desk")
    reg.add("instance", Gadget())
    reg.add("function", defined_in)
    assert reg.origins() == {
        "function": "verl_cua.registry:defined_in",
        "instance": f"{__name__}:{Gadget.__qualname__}",
        "lazy": "plugins.desk:Desk",
    }
    assert list(reg.origins()) == reg.valid()


def test_it_reads_and_writes_like_a_dict(monkeypatch):
    reg = widgets()
    reg.add("a", 1)
    monkeypatch.setitem(reg, "b", 2)
    assert sorted(reg) == ["a", "b"] and len(reg) == 2 and "b" in reg and reg.get("c") is None
    monkeypatch.undo()
    assert dict(reg.items()) == {"a": 1}
    assert reg.pop("a") == 1 and reg.valid() == []


def test_the_three_registries_answer_in_their_own_words():
    from verl_cua.actions import FORMAT_REGISTRY, available_formats, get_format, register_format
    from verl_cua.envs import ENV_REGISTRY, make_env
    from verl_cua.eval.apis import API_REGISTRY, get_api

    assert get_format("uitars") is FORMAT_REGISTRY["uitars"] and get_format("uitars").name == "uitars"
    assert available_formats()[-1] == "auto" and available_formats()[:-1] == sorted(FORMAT_REGISTRY)
    valid = r"api_gui, claude, .*uitars, auto"
    with pytest.raises(ValueError, match=rf"^unknown action format 'x'; valid formats: {valid}$"):
        get_format("x")
    with pytest.raises(ValueError, match=r"^unknown provider API 'x'; valid provider APIs: anthropic, openai$"):
        get_api("x")
    with pytest.raises(ValueError, match=r"^unknown env 'x'; valid envs: .*miniwob"):
        make_env("x")
    with pytest.raises(ValueError, match="action format 'uitars' is already registered: .*uitars:UITarsFormat vs"):

        @register_format("uitars")
        class NotUITars(type(FORMAT_REGISTRY["pyautogui"])):
            pass

    assert type(FORMAT_REGISTRY["uitars"]).__name__ == "UITarsFormat"
    assert {"miniwob", "osworld"} <= set(ENV_REGISTRY) and sorted(API_REGISTRY) == ["anthropic", "openai"]


def test_the_built_in_names_stay_what_verl_cua_registers(scratch_env):
    from verl_cua.actions import FORMAT_REGISTRY
    from verl_cua.envs import ENV_REGISTRY

    scratch_env("kiosk")  # a later registration (a plug-in's, a test's) is valid, not built in
    assert "kiosk" in ENV_REGISTRY.valid() and ENV_REGISTRY.built_in() == ["miniwob", "osworld"]
    assert FORMAT_REGISTRY.built_in() == ["api_gui", "claude", "pyautogui", "qwen25vl", "qwen3vl", "uitars"]
