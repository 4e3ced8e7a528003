"""The blind baseline of single-click MiniWoB++ tasks: the best a policy that never looks at the screenshot can do.

Such a policy clicks the same point on every layout with the same instruction, so its best is the point that hits
the most training targets; scored on held-out layouts, it is the bar a policy must clear before its success can be
credited to looking. Conditioned on the instruction, it is the best point per instruction text, fitted on the
training layouts with that text (a held-out instruction never trained on gets the overall best point): the bar for a
policy that reads its task but not its screen. Targets come from the page's DOM.
"""

from __future__ import annotations

from verl_cua.envs.task_sets import resolve_tasks


def target_boxes(task: str, seeds: str, limit: int | None = None) -> list[tuple[float, float, float, float]]:
    """The click target's (left, top, right, bottom) in task-area pixels, for each seed of `task` (the first
    `limit` seeds)."""
    return [box for _, box in targets(task, seeds, limit)]


def targets(task: str, seeds: str, limit: int | None = None) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(instruction, target box in task-area pixels) for each seed of `task` (the first `limit` seeds)."""
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import target_box

    env = MiniWoBEnv(task)
    try:
        found = []
        for ref in resolve_tasks("miniwob", [task], seeds)[:limit]:
            obs = env.reset(ref.task)
            found.append((obs.instruction, target_box(env, task)))
        return found
    finally:
        env.close()


def hit_rates(boxes: list[tuple[float, float, float, float]], size: tuple[int, int] = (160, 210)):
    """(height, width) array: the share of `boxes` a click at each pixel hits (MiniWoB clicks a pixel's centre)."""
    import numpy as np

    b = np.asarray(boxes, dtype=float).reshape(-1, 4)
    xs, ys = np.arange(size[0]) + 0.5, np.arange(size[1]) + 0.5
    in_x = (xs[None, :] >= b[:, 0:1]) & (xs[None, :] < b[:, 2:3])
    in_y = (ys[None, :] >= b[:, 1:2]) & (ys[None, :] < b[:, 3:4])
    return np.einsum("ny,nx->yx", in_y.astype(float), in_x.astype(float)) / max(1, len(b))


def blind_baseline(
    tasks: tuple[str, ...] | list[str], train_seeds: str, heldout_seeds: str, max_train: int = 200
) -> dict:
    """The best single click point on (at most `max_train` of) the training layouts of `tasks`, and its success on
    the held-out ones."""
    train_pairs = [pair for task in tasks for pair in targets(task, train_seeds, max_train)]
    heldout_pairs = [pair for task in tasks for pair in targets(task, heldout_seeds)]
    train, heldout = [box for _, box in train_pairs], [box for _, box in heldout_pairs]
    on_train, on_heldout = hit_rates(train), hit_rates(heldout)
    x, y = _best(on_train)
    return {
        "point": [x, y],
        "train_rate": float(on_train[y, x]),
        "heldout_rate": float(on_heldout[y, x]),
        "uniform_rate": float(on_heldout.mean()),
        "train_layouts": len(train),
        "heldout_layouts": len(heldout),
        "by_instruction": by_instruction(train_pairs, heldout_pairs, (x, y)),
    }


def by_instruction(train: list, heldout: list, fallback: tuple[int, int]) -> dict:
    """The blind baseline conditioned on the instruction: each held-out layout clicked at the best point of the
    training layouts with its instruction (`fallback`, the overall best, for an instruction never trained on)."""
    points = {}
    for text in dict.fromkeys(t for t, _ in train):
        points[text] = _best(hit_rates([box for t, box in train if t == text]))
    hits = [_inside(points.get(text, fallback), box) for text, box in heldout]
    return {
        "heldout_rate": sum(hits) / max(1, len(hits)),
        "instructions": len(points),
        "heldout_seen": sum(text in points for text, _ in heldout) / max(1, len(heldout)),
    }


def _best(rates) -> tuple[int, int]:
    import numpy as np

    y, x = np.unravel_index(int(rates.argmax()), rates.shape)
    return int(x), int(y)


def _inside(point: tuple[int, int], box: tuple[float, float, float, float]) -> bool:
    """Whether a click at pixel `point` (MiniWoB clicks its centre) lands in `box`, as `hit_rates` counts it."""
    x, y = point[0] + 0.5, point[1] + 0.5
    return box[0] <= x < box[2] and box[1] <= y < box[3]
