"""A format's spec is its class: a format registered with `register_format` alone is prompted, sized, trainable and
given its per-turn context wherever verl-cua reads formats (G2: it used to crash `build_prompt` with a KeyError and be
refused by the config); a class lacking a member is refused at registration, in one line."""

import pytest

from verl_cua.actions import FORMAT_REGISTRY, build_prompt, parse_action, register_format
from verl_cua.actions.formats.base import FormatResult
from verl_cua.actions.geometry import QWEN25VL_RESIZE, CoordinateSpace, smart_resize_size
from verl_cua.actions.types import GUIAction
from verl_cua.eval.images import model_image_size

SCREEN = (1920, 1080)


@pytest.fixture
def toy_format():
    """`toy`: clicks written as `CLICK x y` in Qwen2.5-VL's resized pixels, with a per-turn note; removed after. It
    states every member of the spec itself (no `BaseFormat`), as a plug-in written against the protocol would."""

    @register_format("toy")
    class ToyFormat:
        name = "toy"
        trainable = True
        resize = QWEN25VL_RESIZE

        def detect(self, text):
            return text.startswith("CLICK")

        def coordinate_space(self, screen, image):
            width, height = image or smart_resize_size(screen, **self.resize)
            return CoordinateSpace(width, height, screen[0], screen[1])

        def parse(self, text, ctx):
            _, x, y = text.split()
            sx, sy = ctx.space.to_screen(x, y, ctx.notes)
            return FormatResult([GUIAction("click", x=sx, y=sy)])

        def render(self, actions, space, thought):
            return "\n".join(f"CLICK {a.x} {a.y}" for a in actions)

        def system_prompt(self, size):
            return f"Write CLICK x y in a {size[0]}x{size[1]} image.", None

        def user_text(self, instruction, context):
            return f"Goal: {instruction}" + (f" ({context})" if context else "")

        def model_image_size(self, screen, max_pixels):
            limits = {**self.resize, "max_pixels": max_pixels or self.resize["max_pixels"]}
            return smart_resize_size(tuple(screen), **limits)

        def turn_context(self, extra):
            return f"Tabs open: {(extra or {}).get('tabs', 0)}"

        def longest_turn_context(self):
            return "Tabs open: 999"

    yield "toy"
    FORMAT_REGISTRY.pop("toy", None)


def test_a_registered_format_is_prompted_sized_and_given_its_turn_context(toy_format):
    spec = build_prompt(toy_format, screen=SCREEN)  # G2: a KeyError before the format spec
    image = model_image_size(toy_format, SCREEN, 500_000)
    assert image[0] * image[1] <= 500_000 and image[0] % 28 == 0  # its own resize, capped
    spec = build_prompt(toy_format, screen=SCREEN, image=image)
    assert spec.system == f"Write CLICK x y in a {image[0]}x{image[1]} image." and spec.tools is None
    assert spec.user_text("Open the file.", "Tabs open: 2") == "Goal: Open the file. (Tabs open: 2)"
    from verl_cua.actions.formats import trainable_formats
    from verl_cua.actions.prompts import longest_turn_context, turn_context

    assert (
        turn_context(toy_format, {"tabs": 3}) == "Tabs open: 3" and longest_turn_context(toy_format) == "Tabs open: 999"
    )
    parsed = parse_action(f"CLICK {image[0] // 2} {image[1] // 2}", format=toy_format, screen=SCREEN, image=image)
    assert parsed.valid and abs(parsed.actions[0].x - SCREEN[0] // 2) <= 2
    assert toy_format in trainable_formats()


def test_base_format_gives_the_defaults_of_what_a_format_leaves_out():
    from verl_cua.actions.formats import BaseFormat

    class Minimal(BaseFormat):
        name = "minimal"

    fmt = Minimal()
    assert fmt.trainable and fmt.resize is None and fmt.model_image_size(SCREEN, 1000) == SCREEN
    assert fmt.user_text("Open the file.", "ctx") == "Task: Open the file.\nctx" and fmt.turn_context({"x": 1}) is None
    assert fmt.longest_turn_context() == ""


def test_an_untrainable_format_is_left_out_of_the_trainable_ones():
    from verl_cua.actions.formats import trainable_formats

    assert "claude" in FORMAT_REGISTRY and "claude" not in trainable_formats()  # an API model, evaluated only
    assert {"qwen3vl", "qwen25vl", "uitars", "pyautogui", "api_gui"} <= set(trainable_formats())


def test_a_class_that_lacks_part_of_the_spec_is_refused_in_one_line():
    with pytest.raises(TypeError) as err:

        @register_format("half")
        class Half:  # parses, but says nothing of its prompt
            name = "half"

            def detect(self, text):
                return False

            def parse(self, text, ctx):
                return FormatResult([])

    message = str(err.value)
    assert "\n" not in message and "lacks trainable, resize, coordinate_space, render, system_prompt" in message
    assert "BaseFormat" in message and "half" not in FORMAT_REGISTRY


@pytest.mark.parametrize("name", sorted(FORMAT_REGISTRY))
def test_every_built_in_format_declares_the_whole_spec(name):
    from verl_cua.actions.formats import FORMAT_MEMBERS

    fmt = FORMAT_REGISTRY[name]
    assert all(hasattr(fmt, member) for member in FORMAT_MEMBERS)
    image = fmt.model_image_size(SCREEN, None)
    system, tools = fmt.system_prompt((image[0], image[1]))
    assert system.strip() and (tools is None or isinstance(tools, list))
    assert "Open the file." in fmt.user_text("Open the file.", None)
    assert len(fmt.longest_turn_context()) >= len(fmt.turn_context({}) or "")
