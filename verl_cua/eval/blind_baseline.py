"""The blind baseline of single-click MiniWoB++ tasks: the best a policy that never looks at the screenshot can do.

Such a policy clicks the same point on every layout (the instruction text is the same for all seeds of these
tasks), so its best is the point that hits the most training targets; scored on held-out layouts, it is the bar
a policy must clear before its success can be credited to looking. Targets come from the page's DOM.
"""

from __future__ import annotations

from verl_cua.envs.task_sets import resolve_tasks


def target_boxes(task: str, seeds: str, limit: int | None = None) -> list[tuple[float, float, float, float]]:
    """The click target's (left, top, right, bottom) in task-area pixels, for each seed of `task` (the first
    `limit` seeds)."""
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import target_box

    env = MiniWoBEnv(task)
    try:
        boxes = []
        for ref in resolve_tasks("miniwob", [task], seeds)[:limit]:
            env.reset(ref.task)
            boxes.append(target_box(env, task))
        return boxes
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
    import numpy as np

    train = [box for task in tasks for box in target_boxes(task, train_seeds, max_train)]
    heldout = [box for task in tasks for box in target_boxes(task, heldout_seeds)]
    on_train, on_heldout = hit_rates(train), hit_rates(heldout)
    y, x = np.unravel_index(int(on_train.argmax()), on_train.shape)
    return {
        "point": [int(x), int(y)],
        "train_rate": float(on_train[y, x]),
        "heldout_rate": float(on_heldout[y, x]),
        "uniform_rate": float(on_heldout.mean()),
        "train_layouts": len(train),
        "heldout_layouts": len(heldout),
    }
