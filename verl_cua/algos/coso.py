"""CoSo (Counterfactual Soft RL, arXiv 2505.03792): an entropy bonus on each response token weighted by how much the
token causes the parsed action.

The paper's causal weight is B_i = |P_SCM(a|y) - P_SCM(a|y with tokens i..i+w-1 replaced by [UNK])| with a small
learned classifier as the SCM. We have the exact parser, so P(a|y) is an indicator and B_i (before normalisation) is
whether masking the window of `window` tokens that starts at token i changes the parsed action (its validity, kinds
or any argument). Tokens whose text is empty (special tokens, decoded without them) or whitespace only get 0, as the
paper's special tokens do. Per response, min-max normalisation then the square root give B in [0, 1]; a response
whose raw weights are all equal keeps them (all 0: no token is causal; all 1: every token is).

The weights are pure Python (the agent loop computes them, torch-free); `weighted_entropy` and `coso_metrics` are the
loss's tensor side. No verl imports."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

MASK_TEXT = " "  # what a masked window's text becomes: a token boundary with no content, our [UNK]
WINDOW = 4  # the paper's w
INVALID = ("invalid",)


def action_signature(parsed: Any) -> Hashable:
    """What an output means to the environment: `INVALID`, or every parsed action with all its arguments."""
    if not getattr(parsed, "valid", False):
        return INVALID
    return tuple(repr(sorted(a.to_dict().items())) for a in parsed.actions)


def action_parser(
    format: str,
    screen: tuple[int, int] | None = None,
    image: tuple[int, int] | None = None,
    clean=None,
    marks: dict | None = None,
) -> Callable[[str], Hashable]:
    """text -> `action_signature` of `verl_cua.actions.parse_action(text, format, screen, image, marks)`, `clean`
    applied to the text first (the agent loop's special-string removal); a parser error counts as an invalid output."""
    from verl_cua.actions import parse_action

    def parse(text: str) -> Hashable:
        try:
            text = clean(text) if clean else text
            return action_signature(parse_action(text, format=format, screen=screen, image=image, marks=marks))
        except Exception:
            return INVALID

    return parse


def raw_causal_weights(pieces: Sequence[str], parse: Callable[[str], Hashable], window: int = WINDOW) -> list[float]:
    """Per token (its text `pieces[i]`): 1.0 when replacing the text of tokens i..i+window-1 by `MASK_TEXT` changes
    `parse` of the joined text, else 0.0; empty or whitespace-only tokens are 0.0. `parse` errors count as a change
    to `INVALID`. Never raises on any text."""
    n = len(pieces)
    if n == 0:
        return []
    window = max(1, int(window))
    text = "".join(pieces)
    base = _safe(parse, text)
    seen: dict[str, Hashable] = {text: base}
    # prefix sums of the pieces' lengths: the counterfactual text is a slice either side of the window
    ends = [0]
    for piece in pieces:
        ends.append(ends[-1] + len(piece))
    out = []
    for i, piece in enumerate(pieces):
        if not piece.strip():
            out.append(0.0)
            continue
        counter = text[: ends[i]] + MASK_TEXT + text[ends[min(n, i + window)] :]
        if counter not in seen:
            seen[counter] = _safe(parse, counter)
        out.append(0.0 if seen[counter] == base else 1.0)
    return out


def _safe(parse: Callable[[str], Hashable], text: str) -> Hashable:
    try:
        return parse(text)
    except Exception:
        return INVALID


def normalize_weights(raw: Sequence[float]) -> list[float]:
    """The paper's normalisation: per response min-max then sqrt, into [0, 1]. All-equal raw weights (min-max 0/0)
    keep their value, clipped to [0, 1]: all 0 stays 0 (nothing causal), all 1 stays 1 (every token causal)."""
    if not raw:
        return []
    lo, hi = min(raw), max(raw)
    if not (hi > lo):  # also catches NaN
        return [math.sqrt(min(1.0, max(0.0, float(v)))) if v == v else 0.0 for v in raw]
    span = hi - lo
    return [math.sqrt(min(1.0, max(0.0, (float(v) - lo) / span))) if v == v else 0.0 for v in raw]


def causal_weights(pieces: Sequence[str], parse: Callable[[str], Hashable], window: int = WINDOW) -> list[float]:
    """CoSo's weights of one response: `normalize_weights(raw_causal_weights(...))`, one per token, in [0, 1]."""
    return normalize_weights(raw_causal_weights(pieces, parse, window))


def token_pieces(token_ids: Sequence[int], decode: Callable[[list[int]], str]) -> list[str]:
    """Each token's text, so that "".join(pieces) is `decode(token_ids)`: the growth of the decoded prefix. A token
    that ends inside a multi-byte character (its prefix decodes to U+FFFD) gets "" and the token completing the
    character gets the character; a decoder that rewrites earlier text leaves the rewritten tail on the last token."""
    ids = list(token_ids)
    pieces: list[str] = []
    emitted = ""
    for k in range(len(ids)):
        prefix = decode(ids[: k + 1])
        if k < len(ids) - 1 and prefix.endswith("\ufffd"):
            pieces.append("")
            continue
        if prefix.startswith(emitted):
            pieces.append(prefix[len(emitted) :])
            emitted = prefix
        else:
            pieces.append("")
    return pieces


def weighted_entropy(entropy, weights, mask):
    """Per token B_i * H_i on `mask` (0 elsewhere), [B, L] tensors; the weights carry no gradient."""
    import torch

    return torch.where(mask.bool(), entropy * weights.detach().to(entropy.dtype), torch.zeros_like(entropy))


def coso_metrics(entropy, weights, mask) -> dict[str, float]:
    """`coso/weight_mean` (mean B over the model tokens), `coso/weighted_entropy` (mean B*H) and
    `coso/causal_fraction` (share of model tokens with B > 0); {} for a mask without tokens."""
    m = mask.bool()
    n = int(m.sum())
    if not n:
        return {}
    w = weights.detach().float()[m]
    h = entropy.detach().float()[m]
    return {
        "coso/weight_mean": float(w.mean()),
        "coso/weighted_entropy": float((w * h).mean()),
        "coso/causal_fraction": float((w > 0).float().mean()),
    }
