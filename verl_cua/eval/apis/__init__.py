"""Chat APIs the eval harness speaks (`--provider-api`): `@register_api(name)` above each adapter, `get_api(name)`.

An adapter turns the neutral conversation (`Turn`s: a screenshot, a text, the model's earlier reply) into its
API's request body, and the API's response body into a `ModelReply` whose `text` is what `parse_action` reads."""

from verl_cua.eval.apis.base import (  # noqa: F401  (the package's API)
    API_REGISTRY,
    OMITTED,
    ChatAPI,
    ModelReply,
    Request,
    Turn,
    get_api,
    png_bytes,
    register_api,
    shown_images,
)


def _load_builtin_apis() -> None:
    from verl_cua.eval.apis import anthropic_messages, openai_chat  # noqa: F401


_load_builtin_apis()
