"""Fixtures of the eval tests: `chat_server`, a scripted chat endpoint on 127.0.0.1."""

import pytest

from verl_cua.testing.chat_server import ScriptedChatServer


@pytest.fixture
def chat_server():
    """Factory: `chat_server(scripts, fallback=..., status=...)` -> a running ScriptedChatServer (closed after)."""
    servers: list[ScriptedChatServer] = []

    def make(scripts: dict[str, list], **kwargs) -> ScriptedChatServer:
        servers.append(ScriptedChatServer(scripts, **kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()
