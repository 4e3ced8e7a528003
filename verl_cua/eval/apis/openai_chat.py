"""OpenAI-compatible chat completions (vLLM, SGLang, hosted APIs): screenshots as `image_url` parts."""

from __future__ import annotations

import json
from typing import Any

from verl_cua.eval.apis.base import OMITTED, ModelReply, Request, register_api, shown_images


@register_api("openai")
class OpenAIChat:
    """`POST {base}/chat/completions`. Tools are described in the system prompt (as Qwen's chat template does), so
    the model writes its tool calls as text; servers that extract them into `tool_calls` get them written back as
    `<tool_call>` text, the form the qwen parsers read."""

    name = "openai"
    path = "/chat/completions"
    default_base_url = "http://localhost:8000/v1"
    default_key_env = "OPENAI_API_KEY"

    def headers(self, api_key: str | None) -> dict[str, str]:
        """Bearer auth when a key is given (a local vLLM needs none)."""
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, request: Request) -> dict[str, Any]:
        """System prompt, then per turn a user message (screenshot or an omission note, text) and the reply."""
        shown = shown_images(request.turns, request.history_images)
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.spec.system}]
        for i, turn in enumerate(request.turns):
            content: list[dict[str, Any]] = []
            if turn.image is not None:
                if i in shown:
                    url = f"data:image/png;base64,{turn.image_base64()}"
                    content.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    content.append({"type": "text", "text": OMITTED})
            content.append({"type": "text", "text": turn.text})
            messages.append({"role": "user", "content": content})
            if turn.reply is not None:
                messages.append(turn.reply.message)
        body = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            **request.extra_body,
        }
        if "max_completion_tokens" in request.extra_body:  # OpenAI's reasoning models refuse max_tokens
            del body["max_tokens"]
        return body

    def reply(self, body: dict[str, Any], request: Request) -> ModelReply:
        """The first choice's text, with any extracted `tool_calls` appended as `<tool_call>` blocks."""
        if not isinstance(body, dict):
            raise ValueError(f"response is a JSON {type(body).__name__}, not an object")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError(f"response has no choices (keys: {', '.join(sorted(body)[:6])})")
        if not isinstance(choices[0].get("message"), dict):
            raise ValueError("response has no choices[0].message")
        message = choices[0]["message"]
        text = _content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            text += ("\n" if text else "") + _tool_call_text(call)
        usage = body.get("usage") or None
        if usage is not None:
            usage = {k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)}
        return ModelReply(text=text, message={"role": "assistant", "content": text}, usage=usage or None, response=body)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise ValueError(f"message content is a {type(content).__name__}, not text")


def _tool_call_text(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # kept as the string; the parser reports it
    payload = json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{payload}\n</tool_call>"
