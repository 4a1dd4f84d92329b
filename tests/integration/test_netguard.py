"""Real network access is blocked in the test process; this machine stays reachable."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from tests.support import netguard
from tests.support.wire import (
    AnthropicServer,
    OpenAIServer,
)
from tests.support.wire import anthropic_wire as aw

USER: Any = [{"role": "user", "content": "What's the weather in Paris?"}]
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CLAUDE = aw.DEFAULT_MODEL
ANTHROPIC_TOOL: Any = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def caused_by(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@pytest.fixture
def oai(openai_server: OpenAIServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=openai_server.base_url, api_key=openai_server.api_key, max_retries=0
    ) as client:
        yield client


@pytest.fixture
def claude(anthropic_server: AnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=anthropic_server.base_url, api_key=anthropic_server.api_key, max_retries=0
    ) as client:
        yield client


# -- the network block -------------------------------------------------------------------------


@pytest.fixture
def nothing_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the block fail, the test fails instead of reaching out."""

    def leak(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the network block let {args!r} through")

    monkeypatch.setattr(netguard, "_original_connect", leak)
    monkeypatch.setattr(netguard, "_original_connect_ex", leak)
    monkeypatch.setattr(netguard, "_original_getaddrinfo", leak)


@pytest.mark.usefixtures("nothing_leaves")
def test_real_model_apis_are_blocked() -> None:
    # openai lets the error through as it is; anthropic wraps it in an APIConnectionError.
    with (
        openai.OpenAI(api_key="sk-real-looking", max_retries=2) as client,
        pytest.raises(netguard.NetworkBlocked, match=r"blocked in tests: .*api\.openai\.com"),
    ):
        client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    with (  # (anthropic retries it, with its backoff, when max_retries allows)
        anthropic.Anthropic(api_key="sk-ant-real-looking", max_retries=0) as claude,
        pytest.raises(anthropic.APIConnectionError) as refused,
    ):
        claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER)
    blocked = caused_by(refused.value, netguard.NetworkBlocked)
    assert blocked is not None and "api.anthropic.com" in str(blocked)

    with pytest.raises(netguard.NetworkBlocked, match="network access is blocked in tests"):
        socket.create_connection(("api.anthropic.com", 443), timeout=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(netguard.NetworkBlocked, match=r"192\.0\.2\.7"):
            socket.create_connection(("192.0.2.7", 443), timeout=1)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]  # no socket leaked
    addresses: list[tuple[Any, ...]] = [("192.0.2.1", 443), ("2001:db8::1", 443, 0, 0)]
    for address in [*addresses, ("10.0.2.2", 5432)]:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            with pytest.raises(netguard.NetworkBlocked):
                sock.connect(address)
            with pytest.raises(netguard.NetworkBlocked):
                sock.connect_ex(address)


async def test_blocked_in_asyncio_too(nothing_leaves: None) -> None:
    with pytest.raises(netguard.NetworkBlocked):
        await asyncio.open_connection("api.openai.com", 443)
    with pytest.raises(netguard.NetworkBlocked):
        await asyncio.open_connection("192.0.2.1", 443)


def test_this_machine_stays_reachable(openai_server: OpenAIServer) -> None:
    for host in ["127.0.0.1", "localhost", "::1", "127.0.0.53", "::ffff:127.0.0.1", None]:
        assert netguard.is_local_host(host), host
    for host in ["api.openai.com", "8.8.8.8", "10.0.2.2", "192.168.1.1", "2001:db8::1"]:
        assert not netguard.is_local_host(host), host
    with socket.create_connection(("localhost", openai_server.port), timeout=5) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert sock.recv(12) == b"HTTP/1.1 401"  # no key: refused by the fake, but reached
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix,
        pytest.raises(FileNotFoundError),  # an ordinary failure: not the block's business
    ):
        unix.connect("/nonexistent/wire.sock")


@pytest.mark.allow_network
def test_the_block_lifts_for_marked_tests() -> None:
    assert not netguard._active()  # nothing is reached here: it only checks the switch
