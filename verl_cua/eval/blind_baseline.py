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
    """(instruction, first target box in task-area pixels) for each seed of `task` (the first `limit` seeds)."""
    return [(text, boxes[0]) for text, boxes in sequence_targets(task, seeds, limit)]


def sequence_targets(task: str, seeds: str, limit: int | None = None) -> list[tuple[str, list]]:
    """(instruction, every target box in click order) for each seed of `task` (the first `limit` seeds)."""
    from verl_cua.envs.miniwob import MiniWoBEnv
    from verl_cua.envs.miniwob_targets import target_boxes

    env = MiniWoBEnv(task)
    try:
        found = []
        for ref in resolve_tasks("miniwob", [task], seeds)[:limit]:
            obs = env.reset(ref.task)
            found.append((obs.instruction, target_boxes(env, task)))
        return found
    finally:
        env.close()


def sequence_baseline(train: list[list], heldout: list[list], candidates: int = 400) -> dict:
    """The best fixed sequence of clicks, one per target (a blind policy of a multi-click task such as
    click-button-sequence): the first point among the `candidates` best for the first target, each next point the
    best on the training layouts the sequence so far solves; its success on the held-out layouts (every click in
    its target, in order). A search, so a lower bound of the best fixed sequence."""
    import numpy as np

    first = hit_rates([boxes[0] for boxes in train])
    order = np.argsort(first.ravel())[::-1][:candidates]
    best: tuple[float, list] = (-1.0, [])
    for flat in order:
        y, x = divmod(int(flat), first.shape[1])
        points, alive = [(x, y)], [b for b in train if _inside((x, y), b[0])]
        for k in range(1, len(train[0])):
            if not alive:
                break
            points.append(_best(hit_rates([b[k] for b in alive])))
            alive = [b for b in alive if _inside(points[-1], b[k])]
        rate = len(alive) / len(train)
        if len(points) == len(train[0]) and rate > best[0]:
            best = (rate, points)
    solved = [all(_inside(p, b) for p, b in zip(best[1], boxes, strict=True)) for boxes in heldout]
    return {"points": [list(p) for p in best[1]], "train_rate": best[0], "heldout_rate": sum(solved) / len(solved)}


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
    train_seq = {task: sequence_targets(task, train_seeds, max_train) for task in tasks}
    heldout_seq = {task: sequence_targets(task, heldout_seeds) for task in tasks}
    train_pairs = [(text, boxes[0]) for task in tasks for text, boxes in train_seq[task]]
    heldout_pairs = [(text, boxes[0]) for task in tasks for text, boxes in heldout_seq[task]]
    train, heldout = [box for _, box in train_pairs], [box for _, box in heldout_pairs]
    on_train, on_heldout = hit_rates(train), hit_rates(heldout)
    x, y = _best(on_train)
    if len(tasks) == 1 and len(train_seq[tasks[0]][0][1]) > 1:  # a multi-click task: the best fixed sequence
        seq = sequence_baseline([b for _, b in train_seq[tasks[0]]], [b for _, b in heldout_seq[tasks[0]]])
        return {
            "point": seq["points"][0],
            "points": seq["points"],
            "train_rate": seq["train_rate"],
            "heldout_rate": seq["heldout_rate"],
            "uniform_rate": float(on_heldout.mean()),  # a random first click's hit rate
            "train_layouts": len(train),
            "heldout_layouts": len(heldout),
            "by_instruction": None,  # one instruction for every layout: the same figure
        }
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
