"""CoSo's weights in the agent loop, as a turn hook (`hooks.TurnHook`): each model turn's per-token causal weights
(`verl_cua.algos.coso`, the reply parsed as the loop parses it), kept aligned with an episode row's response mask
through verl's token merges, or one list per step row; the rows' extra fields `cua_coso_weights` and
`cua_coso_seconds`."""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any

from verl_cua.algos.coso import action_parser, causal_weights, token_pieces

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import CosoConfig
    from verl_cua.integrations.verl.hooks import TurnContext


class CosoWeights:
    """One episode's CoSo weights, built by the agent loop when `cua.coso.enable`."""

    def __init__(self, coso: CosoConfig, context: TurnContext):
        self.window, self.context = coso.window, context
        self.turns: list[list[float]] = []  # per model turn: the weight of each generated token
        self.seconds: list[float] = []  # per model turn: the seconds its weights took
        self.aligned: list[float] = []  # an episode row: the weight of each response token, aligned with its mask

    def on_turn(
        self, token_ids: list[int], screen: tuple[int, int], image_size: tuple[int, int], marks: dict | None = None
    ) -> None:
        """The turn's causal weights: masking a window of tokens from each changes the parsed action (a named mark
        resolved against `marks`, the set-of-marks of the screen shown) or not."""
        start = time.perf_counter()
        context = self.context
        pieces = token_pieces(token_ids, partial(context.tokenizer.decode, skip_special_tokens=True))
        parse = action_parser(context.format, screen, image_size, clean=context.clean, marks=marks)
        self.turns.append(causal_weights(pieces, parse, self.window))
        self.seconds.append(time.perf_counter() - start)

    def on_merge(self, merged: Any, mask: list[int]) -> None:
        """The weights edited as the merge edits the response mask: the last turn's on its assistant tokens, 0 on
        context tokens (verl's `align_response_metadata`, as for the log-probs)."""
        turn = self.turns[-1] if merged.kind == "assistant" else None
        _, self.aligned = self.context.align(merged, mask, self.aligned, assistant_logprobs=turn)

    def fields(self, row: int | None) -> dict[str, Any]:
        """The weights of the episode row (`row=None`) or of step row `row` (cut to the response length)."""
        if row is None:
            weights, seconds = self.aligned, sum(self.seconds)
        else:
            weights, seconds = self.turns[row][: self.context.response_length], self.seconds[row]
        return {"cua_coso_weights": [float(w) for w in weights], "cua_coso_seconds": float(seconds)}
