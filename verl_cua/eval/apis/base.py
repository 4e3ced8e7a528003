"""What every chat API adapter imports: the neutral conversation types, the `ChatAPI` protocol and the registry
(`@register_api(name)` above each adapter, `get_api(name)`; the package loads the built-ins).

An adapter turns the neutral conversation (`Turn`s: a screenshot, a text, the model's earlier reply) into its
API's request body, and the API's response body into a `ModelReply` whose `text` is what `parse_action` reads.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from PIL import Image

from verl_cua.actions import PromptSpec
from verl_cua.registry import Registry

OMITTED = "(older screenshot omitted)"


@dataclass
class ModelReply:
    """One model answer: `text` for the parser, `message` to send back as the assistant turn, usage, the raw body."""

    text: str
    message: dict[str, Any]
    usage: dict[str, int] | None = None
    response: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Turn:
    """One user turn: the screenshot shown (already sized for the model), its text, and the reply it got."""

    image: Image.Image | None
    text: str
    error: str | None = None  # why the previous reply was not a valid action (adapters may report it natively)
    reply: ModelReply | None = None
    image_png: bytes | None = field(default=None, repr=False)  # `image` already encoded, when the caller has it

    def image_base64(self) -> str:
        """The screenshot as base64 PNG, encoded once (it is resent with every later turn in the history)."""
        if self.image_png is None:
            self.image_png = png_bytes(self.image)
        return base64.b64encode(self.image_png).decode("ascii")


@dataclass(frozen=True)
class Request:
    """One model turn to ask for: the conversation so far and the generation settings."""

    model: str
    spec: PromptSpec
    turns: list[Turn]
    history_images: int
    max_tokens: int
    temperature: float
    extra_body: dict[str, Any] = field(default_factory=dict)


class ChatAPI(Protocol):
    """One chat API: its endpoint path, auth headers, request body and response parsing."""

    name: str
    path: str
    default_base_url: str
    default_key_env: str

    def headers(self, api_key: str | None) -> dict[str, str]:
        """HTTP headers for a request (authentication, versions)."""

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body for `request`."""

    def reply(self, body: dict[str, Any], request: Request) -> ModelReply:
        """Parse the response body to `request`; a body without an answer raises ValueError (one line)."""


API_REGISTRY: Registry[ChatAPI] = Registry("provider API", "provider APIs")


def register_api(name: str) -> Callable[[type], type]:
    """Class decorator: register one instance of a `ChatAPI` under `name`."""
    return API_REGISTRY.register(name)


def get_api(name: str) -> ChatAPI:
    """The registered chat API `name`; unknown names raise ValueError listing the valid ones."""
    return API_REGISTRY.lookup(name)


def png_bytes(image: Image.Image) -> bytes:
    """A screenshot as PNG (lossless: small UI text survives), as the trajectory stores it too."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=3)
    return buf.getvalue()


def shown_images(turns: list[Turn], history_images: int) -> set[int]:
    """Indices of the turns whose screenshot is still sent: the last `history_images` that have one."""
    with_image = [i for i, t in enumerate(turns) if t.image is not None]
    return set(with_image[-history_images:]) if history_images > 0 else set()
