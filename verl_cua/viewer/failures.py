"""Why episodes failed, from what the step lines and `result.json` already hold: one reason per episode, counted per
run for the report's failure summary."""

from __future__ import annotations

import hashlib
from collections import Counter

from verl_cua.envs.trajectory import EpisodeRecord
from verl_cua.viewer.runs import step_valid

INFRA = "infra"
REASONS = {  # reason key -> label, in the order the summary lists equal counts
    "invalid_action": "invalid action / parse error",
    "wrong_answer": "wrong target or answer (scored 0 at the end)",
    "max_steps": "max steps reached",
    "gave_up": "the model gave up (fail)",
    "truncated": "out of token budget",
    "desktop_broken": "desktop broken by the agent",
    "unfinished": "unfinished",
}
END_REASONS = {
    "max_steps": "max_steps",
    "fail": "gave_up",
    "truncated": "truncated",
    "desktop_broken": "desktop_broken",
}
REASON_CHARS = 80


def failure_reason(episode: EpisodeRecord) -> str | None:
    """The reason key of an episode that did not succeed (None for a success): `infra: <its error>`, `unfinished`,
    `invalid_action` (its last step was no valid action, or the env refused it), an end reason the harness or the
    trainer recorded (`max_steps`, `gave_up`, `truncated`, `desktop_broken`), else `wrong_answer`."""
    status = episode.status
    if status == "success":
        return None
    if status == "unfinished":
        return "unfinished"
    result = episode.result or {}
    if status == "infra_failure":
        error = str(result.get("error") or result.get("end_reason") or "no reason recorded").strip()
        first = error.splitlines()[0] if error else "no reason recorded"
        return f"{INFRA}: {first[: REASON_CHARS - 1] + '…' if len(first) > REASON_CHARS else first}"
    last = episode.steps[-1] if episode.steps else {}
    if last and (step_valid(last) is False or last.get("env_error")):
        return "invalid_action"
    return END_REASONS.get(str(result.get("end_reason")), "wrong_answer")


def reason_label(reason: str) -> str:
    """The reason as the summary shows it (`invalid action / parse error`, `infra failure: endpoint timed out`)."""
    if reason.startswith(f"{INFRA}: "):
        return "infra failure: " + reason[len(INFRA) + 2 :]
    return REASONS.get(reason, reason)


def failure_counts(episodes: list[EpisodeRecord]) -> list[tuple[str, int]]:
    """(reason, episodes) for the episodes that did not succeed, most frequent first."""
    counts = Counter(r for r in map(failure_reason, episodes) if r is not None)
    order = list(REASONS)
    rank = lambda r: order.index(r) if r in order else len(order)  # noqa: E731
    return sorted(counts.items(), key=lambda item: (-item[1], rank(item[0]), item[0]))


def reason_token(run_index: int, reason: str) -> str:
    """A space-free token for `data-reasons` and the reason filter: the run's index and a hash of the reason."""
    return f"{run_index}-{hashlib.sha1(reason.encode()).hexdigest()[:10]}"
