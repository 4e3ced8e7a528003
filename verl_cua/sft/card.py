"""The dataset card of an SFT set: what went in (per task, per source model), how big it is (rows, steps, images,
tokens as the target model's processor counts them) and what was left out and why. Saved beside the parquet file.
A planner dataset (`--planner`) says so under `planner` (the spec, its context window, the target text)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from verl_cua.envs.trajectory import write_json
from verl_cua.sft.planner import planner_card

ERROR_CHARS = 120  # an invalid step's error as the card groups it: its first line, cut here


def row_tokens(processor, messages: list[dict[str, str]], image_sizes: list[tuple[int, int]]) -> int:
    """Tokens of one row for the target model: the chat template's text plus each screenshot's image tokens."""
    parts = []
    for m in messages:
        pieces = m["content"].split("<image>")
        content: list[dict[str, Any]] = []
        for i, piece in enumerate(pieces):
            if i:
                content.append({"type": "image"})
            if piece:
                content.append({"type": "text", "text": piece})
        parts.append({"role": m["role"], "content": content})
    text = processor.apply_chat_template(parts, tokenize=False)
    n = len(processor.tokenizer(text, add_special_tokens=False)["input_ids"])
    ip = processor.image_processor
    factor = int(ip.patch_size) * int(ip.merge_size)
    return n + sum((w // factor) * (h // factor) - 1 for w, h in image_sizes)


def dataset_card(config, kept, rows, negatives, skipped: Counter, processor, read_steps: int, seconds: float) -> dict:
    """Counts of the built set; `kept`: the converted episodes, `rows`: the parquet rows."""
    from PIL import Image

    tokens = []
    for row in rows:
        sizes = [_png_size(Image, cell["bytes"]) for cell in row["images"]]
        tokens.append(row_tokens(processor, row["messages"], sizes))
    per_task: dict[str, dict[str, int]] = {}
    per_model: dict[str, dict[str, int]] = {}
    for c in kept:
        for table, key in ((per_task, c.group), (per_model, c.source_model)):
            entry = table.setdefault(key, {"episodes": 0, "steps": 0})
            entry["episodes"] += 1
            entry["steps"] += len(c.steps)
    steps = sum(len(c.steps) for c in kept)
    return {
        "out": str(config.out),
        "format": config.format,
        "model": str(config.model),
        "rows_layout": config.rows,
        "history_images": config.history_images,
        "max_pixels": config.max_pixels,
        "select": config.select,
        "judge": None if config.judge is None else str(config.judge),
        "planner": _planner(config),
        "runs": [str(r) for r in config.runs],
        "rows": len(rows),
        "episodes": len(kept),
        "steps": steps,
        "images": sum(len(r["images"]) for r in rows),
        "tokens": {"total": sum(tokens), "mean": sum(tokens) / len(tokens), "max": max(tokens)},
        "negatives": len(negatives),
        "skipped": dict(sorted(skipped.items())),
        "invalid_steps": invalid_steps(kept, config.invalid),
        "per_task": dict(sorted(per_task.items())),
        "per_source_model": dict(sorted(per_model.items())),
        "steps_read": read_steps,
        "seconds": round(seconds, 3),
        "seconds_per_1000_steps": round(1000 * seconds / max(1, read_steps), 3),
    }


def _planner(config) -> dict | None:
    """The `planner` entry: None for the acting model's rows, else what `verl_cua.sft.planner` says of its rows."""
    return planner_card(config) if config.planner else None


def invalid_steps(kept, invalid: str) -> dict:
    """The kept episodes' invalid steps, never trained on: how many, what became of them, why (the parser's error,
    most frequent first) and which (`run::episode step N`)."""
    errors = Counter(str(n["error"]).splitlines()[0][:ERROR_CHARS] for c in kept for n in c.negatives)
    return {
        "count": sum(errors.values()),
        "handling": "dropped" if invalid == "drop" else "kept apart as negatives",
        "errors": dict(errors.most_common()),
        "steps": [f"{c.run}::{c.key} step {n['step']}" for c in kept for n in c.negatives],
    }


def _png_size(image_module, data: bytes) -> tuple[int, int]:
    import io

    with image_module.open(io.BytesIO(data)) as image:
        return image.size


def card_path(out: str | Path) -> Path:
    """`data/sft.parquet` -> `data/sft.card.json`."""
    out = Path(out)
    return out.with_name(out.stem + ".card.json")


def write_card(card: dict, out: str | Path) -> Path:
    """Save the card beside the parquet file."""
    path = card_path(out)
    write_json(path, card)
    return path


def card_text(card: dict) -> str:
    """The card as a few lines for the terminal."""
    tok = card["tokens"]
    planner = card.get("planner")
    target = f"for {card['format']}" if not planner else f"for the {planner['spec']} planner ({card['format']} actions)"
    lines = [
        f"{card['rows']} rows ({card['rows_layout']}) from {card['episodes']} episodes, {card['steps']} steps, "
        f"{card['images']} images, {tok['total']} tokens (mean {tok['mean']:.0f}, max {tok['max']}) {target}",
        "per task: " + _top(card["per_task"]),
        "per source model: " + _top(card["per_source_model"]),
        "skipped: " + _skipped(card),
        f"built in {card['seconds']:.1f} s ({card['seconds_per_1000_steps']:.1f} s per 1000 steps read; "
        "the processor's loading not counted)",
    ]
    return "\n".join(lines)


def _skipped(card: dict, n: int = 3) -> str:
    """Episodes left out by reason, then the invalid steps of the kept ones and the `n` most frequent errors."""
    parts = [", ".join(f"{k} {v}" for k, v in card["skipped"].items())]
    invalid = card["invalid_steps"]
    if invalid["count"]:
        errors = list(invalid["errors"].items())
        why = ", ".join(f"{count}x {error!r}" for error, count in errors[:n])
        more = f", {len(errors) - n} more errors (the card has all)" if len(errors) > n else ""
        parts.append(f"{invalid['count']} invalid steps {invalid['handling']} ({why}{more})")
    return "; ".join(p for p in parts if p) or "none"


def _top(table: dict[str, dict[str, int]], n: int = 12) -> str:
    """The `n` largest entries (by steps) as text, and how many more there are."""
    items = sorted(table.items(), key=lambda kv: (-kv[1]["steps"], kv[0]))
    text = ", ".join(f"{k} {v['episodes']} ep/{v['steps']} steps" for k, v in items[:n])
    return text + (f", ... {len(items) - n} more (the card has all)" if len(items) > n else "")


def read_card(out: str | Path) -> dict:
    """The card saved beside `out`."""
    return json.loads(card_path(out).read_text(encoding="utf-8"))
