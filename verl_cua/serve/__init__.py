"""`verl-cua serve`: a checkpoint behind an OpenAI-compatible chat endpoint on CPU (transformers, the `hf` rollout's
generation), so `verl-cua eval` can score a trained model where vLLM does not run."""

from verl_cua.serve.chat import ChatRequest, RequestError, parse_request
from verl_cua.serve.server import ChatModel, ChatServer

__all__ = ["ChatModel", "ChatRequest", "ChatServer", "RequestError", "parse_request"]
