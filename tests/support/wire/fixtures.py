"""Pytest fixtures for the fake provider servers (imported by tests/conftest.py).

Each yields a started server, fresh for the test, and stops it afterwards. A test fails on
teardown when the fake could not answer as scripted (``server.errors``: no reply left, a reply
that failed to render, an unknown path).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest

from tests.support.wire.anthropic_wire import AnthropicServer
from tests.support.wire.openai_wire import OpenAIServer
from tests.support.wire.server import WireServer

S = TypeVar("S", bound=WireServer)


def _serve(server: S) -> Iterator[S]:
    server.start()
    try:
        yield server
    finally:
        server.stop()
    if server.errors:
        pytest.fail(
            "the fake provider server could not answer as scripted:\n" + "\n".join(server.errors)
        )


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """The fake OpenAI API: ``OpenAI(base_url=openai_server.base_url,
    api_key=openai_server.api_key)``."""
    yield from _serve(OpenAIServer())


@pytest.fixture
def openai_compatible_server() -> Iterator[OpenAIServer]:
    """An OpenAI-compatible server (vLLM, Ollama, …): another path prefix, no API key."""
    yield from _serve(OpenAIServer(api_key=None, prefix="/compat/v1", models=("llama3.1:8b",)))


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    """The fake Anthropic API: ``Anthropic(base_url=anthropic_server.base_url,
    api_key=anthropic_server.api_key)``."""
    yield from _serve(AnthropicServer())
