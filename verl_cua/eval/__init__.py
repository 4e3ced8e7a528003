"""Evaluation harness: any model behind a chat API on the same tasks (`verl-cua eval`). Imports no torch or verl."""

from verl_cua.eval.endpoint import ChatClient, EndpointError
from verl_cua.eval.episode import EpisodeSettings, RunAborted, run_episode
from verl_cua.eval.runner import EvalConfig, run_eval
from verl_cua.eval.summary import print_summary, summarise

__all__ = [
    "ChatClient",
    "EndpointError",
    "EpisodeSettings",
    "EvalConfig",
    "RunAborted",
    "print_summary",
    "run_episode",
    "run_eval",
    "summarise",
]
