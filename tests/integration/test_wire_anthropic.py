"""The fake Anthropic Messages server against the real anthropic SDK: what it sends, what it
accumulates, how it fails."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from tests.support.wire import (
    AnthropicReply,
    AnthropicServer,
    OpenAIServer,
    RedactedThinking,
    Text,
    Thinking,
    ToolUse,
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


# -- Anthropic Messages ------------------------------------------------------------------------


def test_anthropic_whole_message_and_what_the_sdk_sent(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    usage = aw.Usage(input_tokens=100, output_tokens=12, cache_read_input_tokens=80,
                     cache_creation_input_tokens=5)  # fmt: skip
    content: list[aw.Block] = [Text("Let me look."), ToolUse("get_weather", {"city": "Paris"})]
    anthropic_server.queue(AnthropicReply(content, usage=usage))
    message = claude.messages.create(
        model=CLAUDE, max_tokens=2048, messages=USER, tools=[ANTHROPIC_TOOL],
        thinking={"type": "enabled", "budget_tokens": 1024}, system="Be brief.",
    )  # fmt: skip
    assert message.stop_reason == "tool_use"
    text, tool = message.content
    assert text.type == "text" and text.text == "Let me look."
    assert tool.type == "tool_use" and tool.input == {"city": "Paris"}
    assert tool.id.startswith("toolu_")
    assert message.usage.cache_read_input_tokens == 80
    assert message.usage.cache_creation_input_tokens == 5
    assert (message.usage.input_tokens, message.usage.output_tokens) == (100, 12)

    sent = anthropic_server.last
    assert sent.path == "/v1/messages"
    # anthropic 2.x sends the API key as a bearer token (1.x sent x-api-key; the fake takes both)
    assert sent.header("authorization") == f"Bearer {aw.API_KEY}"
    assert sent.header("anthropic-version")
    assert sent.json["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent.json["tools"] == [ANTHROPIC_TOOL] and sent.json["system"] == "Be brief."


def test_anthropic_stream_has_the_real_event_sequence(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    content: list[aw.Block] = [
        Thinking("Weather, then."),
        Text("Checking."),
        ToolUse("get_weather"),
    ]
    anthropic_server.queue(AnthropicReply(content))
    events = list(claude.messages.create(model=CLAUDE, max_tokens=100, messages=USER,
                                         stream=True))  # fmt: skip
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    assert kinds.count("content_block_stop") == 3
    deltas = {e.delta.type for e in events if e.type == "content_block_delta"}
    assert deltas == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    start = events[0]
    assert start.type == "message_start" and start.message.content == []
    assert start.message.usage.input_tokens == 25
    assert anthropic_server.last.stream

    # On the wire, as plain HTTP: a ping after message_start (the SDK drops pings).
    anthropic_server.queue(AnthropicReply("hi"))
    with httpx2.Client() as http:
        raw = http.post(
            f"{anthropic_server.base_url}/v1/messages",
            json={"model": CLAUDE, "max_tokens": 9, "messages": USER, "stream": True},
            headers={"x-api-key": aw.API_KEY},
        )
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.headers["transfer-encoding"] == "chunked"
    names = [line for line in raw.text.splitlines() if line.startswith("event: ")]
    assert names[:3] == ["event: message_start", "event: ping", "event: content_block_start"]
    assert names[-1] == "event: message_stop"


def test_anthropic_stream_helper_accumulates_text_tools_and_thinking(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    tool = ToolUse("get_weather", {"city": "Paris", "unit": "C"}, id="toolu_1",
                   fragments=['{"city": ', '"Par', 'is", "unit":', ' "C"}'])  # fmt: skip
    usage = aw.Usage(input_tokens=300, output_tokens=42, cache_read_input_tokens=256)
    scripted = Thinking(["I should ", "call the tool."], signature="sig-123")
    content: list[aw.Block] = [scripted, RedactedThinking(), Text("On it."), tool]
    anthropic_server.queue(AnthropicReply(content, usage=usage))
    with claude.messages.stream(
        model=CLAUDE, max_tokens=4096, messages=USER, tools=[ANTHROPIC_TOOL],
        thinking={"type": "enabled", "budget_tokens": 2048},
    ) as stream:  # fmt: skip
        texts = list(stream.text_stream)
        message = stream.get_final_message()
    assert "".join(texts) == "On it." and len(texts) == 2
    thinking, redacted, text, tool_use = message.content
    assert thinking.type == "thinking" and thinking.thinking == "I should call the tool."
    assert thinking.signature == "sig-123"
    assert redacted.type == "redacted_thinking"
    assert text.type == "text" and text.text == "On it."
    assert tool_use.type == "tool_use" and tool_use.id == "toolu_1"
    assert tool_use.input == {"city": "Paris", "unit": "C"}
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == 42  # from message_delta
    assert message.usage.input_tokens == 300  # from message_start
    assert message.usage.cache_read_input_tokens == 256
    assert anthropic_server.last.json["thinking"]["budget_tokens"] == 2048

    # Newer API versions repeat the input side in message_delta: the same totals come out.
    anthropic_server.queue(AnthropicReply("On it.", usage=usage, full_delta_usage=True))
    with claude.messages.stream(model=CLAUDE, max_tokens=9, messages=USER) as stream:
        again = stream.get_final_message().usage
    assert (again.input_tokens, again.output_tokens, again.cache_read_input_tokens) == (
        300, 42, 256,
    )  # fmt: skip

    # The raw deltas are exactly the scripted fragments (after Anthropic's leading "").
    anthropic_server.queue(AnthropicReply([tool]))
    parts = [
        e.delta.partial_json
        for e in claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER, stream=True)
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert parts == ["", *(tool.fragments or [])]


def test_anthropic_malformed_tool_input_in_a_stream(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    broken = '{"city": "Paris",, "x'
    anthropic_server.queue(AnthropicReply([ToolUse("get_weather", broken)]))
    parts = [
        e.delta.partial_json
        for e in claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER, stream=True)
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert "".join(parts) == broken
    # The SDK's stream helper parses as it goes, and gives up with a ValueError.
    anthropic_server.queue(AnthropicReply([ToolUse("get_weather", broken)]))
    with (
        pytest.raises(ValueError, match="Unable to parse tool parameter JSON"),
        claude.messages.stream(model=CLAUDE, max_tokens=9, messages=USER) as stream,
    ):
        stream.get_final_message()


def test_anthropic_429_with_retry_after_is_retried(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    anthropic_server.queue(aw.rate_limited(retry_after=0.3), AnthropicReply("after the wait"))
    started = time.monotonic()
    message = claude.with_options(max_retries=2).messages.create(
        model=CLAUDE, max_tokens=9, messages=USER
    )
    assert message.content[0].type == "text" and message.content[0].text == "after the wait"
    first, second = anthropic_server.requests
    assert second.received_at - first.received_at >= 0.3
    assert time.monotonic() - started < 3

    anthropic_server.queue(aw.rate_limited())
    with pytest.raises(anthropic.RateLimitError) as limited:
        claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER)
    assert limited.value.status_code == 429
    body: Any = limited.value.body
    assert body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": body["error"]["message"]},
        "request_id": body["request_id"],
    }
    assert limited.value.response.headers["retry-after"] == "0.1"


def test_anthropic_overloaded(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    anthropic_server.queue(aw.overloaded())
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER, stream=True)
    assert overloaded.value.status_code == 529

    anthropic_server.queue(aw.overloaded(retry_after=0.05), AnthropicReply("back"))
    with claude.with_options(max_retries=1).messages.stream(
        model=CLAUDE, max_tokens=9, messages=USER
    ) as stream:
        assert stream.get_final_text() == "back"
    assert len(anthropic_server.requests) == 3


def test_anthropic_cut_and_failed_streams(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    anthropic_server.queue(AnthropicReply("The weather in Paris is sunny.", cut_after=6))
    received: list[str] = []
    # Note: the Anthropic SDK lets the transport's error through (not an APIConnectionError).
    with (
        pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"),
        claude.messages.stream(model=CLAUDE, max_tokens=9, messages=USER) as stream,
    ):
        received.extend(stream.text_stream)
    assert "".join(received) == "The weather "  # start, ping, block start, 3 deltas

    # Anthropic reports failures mid-stream as an `error` event.
    anthropic_server.queue(AnthropicReply("The weather in Paris is sunny.", error_after=4))
    with pytest.raises(anthropic.APIStatusError) as failed:
        list(claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER, stream=True))
    assert failed.value.body == {
        "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}
    }  # fmt: skip

    anthropic_server.queue(AnthropicReply("whole, then cut", cut_after=1))
    with pytest.raises(anthropic.APIConnectionError):
        claude.messages.create(model=CLAUDE, max_tokens=9, messages=USER)


def test_anthropic_models_tokens_and_auth(
    anthropic_server: AnthropicServer, claude: anthropic.Anthropic
) -> None:
    assert [m.id for m in claude.models.list()] == [CLAUDE, "claude-wire-2"]
    counted = claude.messages.count_tokens(model=CLAUDE, messages=USER)
    assert counted.input_tokens == 42
    with (
        anthropic.Anthropic(base_url=anthropic_server.base_url, api_key="nope") as wrong,
        pytest.raises(anthropic.AuthenticationError),
    ):
        wrong.messages.create(model=CLAUDE, max_tokens=9, messages=USER)


async def test_anthropic_async_client(anthropic_server: AnthropicServer) -> None:
    anthropic_server.queue(AnthropicReply("one"), AnthropicReply("two"))
    async with anthropic.AsyncAnthropic(
        base_url=anthropic_server.base_url, api_key=anthropic_server.api_key, max_retries=0
    ) as client:

        async def one() -> str:
            async with client.messages.stream(model=CLAUDE, max_tokens=9, messages=USER) as s:
                return await s.get_final_text()

        assert sorted(await asyncio.gather(one(), one())) == ["one", "two"]
