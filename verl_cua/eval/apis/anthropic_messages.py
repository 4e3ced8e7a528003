"""Anthropic's Messages API with the computer-use tool: screenshots go back to Claude as `tool_result` images."""

from __future__ import annotations

import json
from typing import Any

from verl_cua.eval.apis.base import OMITTED, ModelReply, Request, register_api, shown_images

API_VERSION = "2023-06-01"
COMPUTER_USE_BETA = "computer-use-2025-01-24"  # the beta that carries the computer_20250124 tool


@register_api("anthropic")
class AnthropicMessages:
    """`POST {base}/v1/messages`. With `--format claude` the computer tool is offered and each reply's `tool_use`
    blocks are answered by `tool_result` blocks, the last carrying the new screenshot; other formats are plain text."""

    name = "anthropic"
    path = "/v1/messages"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"

    def headers(self, api_key: str | None) -> dict[str, str]:
        """API key, API version and the computer-use beta."""
        headers = {"anthropic-version": API_VERSION, "anthropic-beta": COMPUTER_USE_BETA}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(self, request: Request) -> dict[str, Any]:
        """System prompt and tools apart from the messages, as the Messages API takes them."""
        shown = shown_images(request.turns, request.history_images)
        messages: list[dict[str, Any]] = []
        previous = None
        for i, turn in enumerate(request.turns):
            image = _image_block(turn) if i in shown else None
            uses = [b for b in (previous.message["content"] if previous else []) if b.get("type") == "tool_use"]
            content: list[dict[str, Any]] = []
            if uses:  # every tool_use needs its tool_result, first in the next user turn
                for k, use in enumerate(uses):
                    parts = [_text(turn.error)] if turn.error else []  # nothing was done: say why
                    if k == len(uses) - 1 and turn.image is not None:
                        parts.append(image or _text(OMITTED))  # the screen after the actions, error or not
                    result = {"content": parts or [_text("done")]}
                    if turn.error:
                        result["is_error"] = True
                    content.append({"type": "tool_result", "tool_use_id": use["id"], **result})
            elif turn.image is not None:
                content.append(image or _text(OMITTED))
            content.append(_text(turn.text))
            messages.append({"role": "user", "content": content})
            if turn.reply is not None:
                messages.append(turn.reply.message)
            previous = turn.reply
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "system": request.spec.system,
            "messages": messages,
        }
        if request.spec.format == "claude" and request.spec.tools:
            body["tools"] = request.spec.tools
        return {**body, **request.extra_body}

    def reply(self, body: dict[str, Any], request: Request) -> ModelReply:
        """Format claude: the content blocks as JSON (what the claude parser reads); other formats: their text."""
        if not isinstance(body, dict):
            raise ValueError("response is not a JSON object")
        if body.get("type") == "error":
            error = body.get("error") or {}
            raise ValueError(f"API error {error.get('type', '?')}: {error.get('message', '')}")
        content = body.get("content")
        if not isinstance(content, list):
            raise ValueError(f"response has no content list (keys: {', '.join(sorted(body)[:6])})")
        if request.spec.format == "claude":
            text = json.dumps(content, ensure_ascii=False)
        else:
            text = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        usage = body.get("usage") or {}
        prompt = sum(
            int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        tokens = {"prompt_tokens": prompt, "completion_tokens": int(usage.get("output_tokens") or 0)} if usage else None
        # an empty turn cannot be sent back (the API rejects empty content): keep a placeholder in the history
        message = {"role": "assistant", "content": content or [_text("(no reply)")]}
        return ModelReply(text=text, message=message, usage=tokens, response=body)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_block(turn) -> dict[str, Any] | None:
    if turn.image is None:
        return None
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": turn.image_base64()}}
