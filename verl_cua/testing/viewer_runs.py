"""Two small synthetic runs in the on-disk trajectory format, for the viewer's tests and a quick look at a report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from verl_cua.envs.trajectory import RUN, EpisodeWriter, step_record, write_json

SCREEN = (1920, 1080)
HOSTILE = '<script>alert(1)</script> and </script><img src=x onerror="alert(2)"> & "quotes"'
BUTTON = (860, 500, 1060, 580)  # the blue "button" every screenshot shows; clicks aim at its centre (960, 540)


def screenshot(index: int, size: tuple[int, int] = SCREEN) -> Image.Image:
    """A grey screen with a blue button (at `BUTTON`, scaled to `size`) and a darker band per step index."""
    image = Image.new("RGB", size, (200, 203, 208))
    draw = ImageDraw.Draw(image)
    sx, sy = size[0] / SCREEN[0], size[1] / SCREEN[1]
    draw.rectangle((0, 0, size[0], round(40 * sy)), fill=(60, 64, 72))
    x0, y0, x1, y1 = BUTTON
    draw.rectangle((round(x0 * sx), round(y0 * sy), round(x1 * sx), round(y1 * sy)), fill=(40, 90, 200))
    draw.rectangle(
        (round(100 * sx), round((200 + 60 * index) * sy), round(700 * sx), round((230 + 60 * index) * sy)),
        fill=(150, 154, 160),
    )
    return image


def act(kind: str, **fields: Any) -> dict[str, Any]:
    """One action dict as `GUIAction.to_dict()` writes it."""
    action = dict.fromkeys(("x", "y", "x2", "y2", "text", "keys", "dx", "dy"))
    action.update(fields, kind=kind)
    return action


def write_episode(
    run_dir: Path,
    key: str,
    actions: list[list[dict[str, Any]]],
    status: str | None,
    *,
    score: float | None = None,
    image_size: tuple[int, int] = SCREEN,
    instruction: str = "Sum column A into A10.",
    model_text: str | None = None,
    trace: bool = False,
) -> Path:
    """An episode directory with one step per entry of `actions` (each a list of action dicts); no result if
    `status` is None (unfinished). `trace`: add step advantages and a reward as the trainer's dump does."""
    writer = EpisodeWriter(run_dir / key)
    for i, step_actions in enumerate(actions):
        name = writer.screenshot(i, screenshot(i, image_size))
        valid = bool(step_actions)
        text = model_text if model_text is not None and i == 0 else f"Thought: step {i + 1}.\nAction: ..."
        parsed = {
            "valid": valid,
            "error": None if valid else "no action found in the output",
            "format": "uitars",
            "thought": f"Step {i + 1}: I act on the button." if valid else None,
            "actions": step_actions,
            "code": None,
        }
        writer.step(
            step_record(
                step=i + 1,
                screenshot=name,
                screen=list(SCREEN),
                model_text=text,
                action=parsed,
                valid=valid,
                error=parsed["error"],
                infra_failure=False,
                reward=0.0,
                advantage=None,
                timing={"model_s": 1.25 + i, "env_s": 0.5},
                usage={"prompt_tokens": 1500 + 100 * i, "completion_tokens": 40},
                response={"choices": [{"message": {"content": text}}]},
            )
        )
    final = writer.screenshot(len(actions), screenshot(len(actions), image_size))
    if status is None:
        writer.close()
        return writer.dir
    domain, _, task_id = key.rpartition("/")
    result = {
        "task": key,
        "env": "osworld",
        "domain": domain,
        "task_id": task_id,
        "instruction": instruction,
        "status": status,
        "score": score if score is not None else (1.0 if status == "success" else 0.0),
        "steps": len(actions),
        "invalid_actions": sum(not a for a in actions),
        "end_reason": "done" if status == "success" else "max_steps" if status == "failure" else "infra",
        "error": "desktop did not boot" if status == "infra_failure" else None,
        "attempts": 2 if status == "infra_failure" else 1,
        "final_screenshot": final,
        "seconds": 12.5,
        "model_seconds": 8.0,
        "env_seconds": 4.5,
        "usage": {"prompt_tokens": 3000, "completion_tokens": 80},
    }
    if trace:
        result["reward"] = 1.0 if status == "success" else 0.0
        result["step_advantages"] = [0.5 if status == "success" else -0.5] * len(actions)
    writer.finish(result)
    return writer.dir


def write_sample_runs(root: str | Path) -> tuple[Path, Path]:
    """Runs `baseline` and `candidate` below `root` (each wins one task the other fails); returns their directories."""
    root = Path(root)
    a, b = root / "baseline", root / "candidate"
    write_json(a / RUN, {"name": "baseline", "model": "qwen3-vl-8b", "format": "qwen3vl", "env": "osworld"})
    write_json(b / RUN, {"name": "candidate", "model": "ui-tars-7b", "format": "uitars", "env": "osworld"})
    click, typing, keys = act("click", x=960, y=540), act("type", text="=SUM(A1:A9)"), act("key", keys=["ctrl", "s"])
    tasks = {
        "calc/calc-sum-column": "Sum column A into A10.",
        "calc/calc-chart": "Insert a bar chart of the table.",
        "chrome/chrome-bookmark": "Bookmark the current page.",
        "chrome/chrome-search": "Search the web for verl.",
        "writer/writer-bold": "Make the title bold.",
        "writer/writer-only-baseline": "Count the words of the document.",
        "writer/writer-unfinished": "Save the document as PDF.",
    }
    episodes = [
        (a, "calc/calc-sum-column", [[click], [typing, keys], [act("done")]], "success", {"model_text": HOSTILE}),
        (b, "calc/calc-sum-column", [[act("right_click", x=400, y=300)], []], "failure", {}),
        (a, "calc/calc-chart", [[act("drag", x=100, y=200, x2=700, y2=800)]], "failure", {}),
        (b, "calc/calc-chart", [[act("scroll", x=960, y=540, dy=-5)]], "failure", {"image_size": (1280, 720)}),
        (a, "chrome/chrome-bookmark", [[click], [keys]], "failure", {}),
        (b, "chrome/chrome-bookmark", [[click], [act("key", keys=["ctrl", "d"])], [act("done")]], "success", {}),
        (a, "chrome/chrome-search", [[act("double_click", x=300, y=100)]], "infra_failure", {}),
        (b, "chrome/chrome-search", [[click], [act("done")]], "success", {}),
        (a, "writer/writer-bold", [[click], [act("done")]], "success", {}),
        (b, "writer/writer-bold", [[act("triple_click", x=500, y=400)], [act("done")]], "success", {}),
        (a, "writer/writer-only-baseline", [[act("wait")]], "failure", {"score": 0.25}),
        (a, "writer/writer-unfinished", [[click]], "failure", {}),
        (b, "writer/writer-unfinished", [[act("move", x=10, y=10)]], None, {}),
    ]
    for run_dir, key, actions, status, extra in episodes:
        write_episode(run_dir, key, actions, status, instruction=tasks[key], **extra)
    return a, b
