"""The fake provider servers, proven with the real SDKs: every scripted behaviour reaches the
official ``openai`` and ``anthropic`` clients the way the real APIs' would, and the test suite
cannot reach the real APIs."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import time
import warnings
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pydantic import BaseModel

from tests.support import netguard
from tests.support.wire import (
    AnthropicReply,
    AnthropicServer,
    JSONReply,
    OpenAIReply,
    OpenAIServer,
    RecordedRequest,
    RedactedThinking,
    SSEEvent,
    SSEReply,
    Text,
    Thinking,
    ToolCall,
    ToolUse,
)
from tests.support.wire import anthropic_wire as aw
from tests.support.wire import openai_wire as ow

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


# -- OpenAI Chat Completions -------------------------------------------------------------------


def test_openai_whole_completion_and_what_the_sdk_sent(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    openai_server.queue(OpenAIReply("It is sunny.", usage=ow.Usage(30, 4, cached_tokens=16)))
    completion = oai.chat.completions.create(
        model="gpt-4o-mini", messages=USER, tools=[WEATHER_TOOL], temperature=0.2
    )
    assert completion.choices[0].message.content == "It is sunny."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gpt-4o-mini"
    usage = completion.usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (30, 4)
    assert usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens == 16

    sent = openai_server.last
    assert sent.method == "POST" and sent.path == "/v1/chat/completions"
    assert sent.header("authorization") == f"Bearer {ow.API_KEY}"
    assert sent.json["messages"] == USER and sent.json["tools"] == [WEATHER_TOOL]
    assert sent.json["temperature"] == 0.2 and not sent.stream


def test_openai_streamed_text_accumulates_with_usage(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    usage = ow.Usage(prompt_tokens=50, completion_tokens=20, cached_tokens=32, reasoning_tokens=8)
    openai_server.queue(OpenAIReply("Sunny, 24 degrees, light wind.", usage=usage))
    chunks = list(
        oai.chat.completions.create(
            model="gpt-4o-mini", messages=USER, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Sunny, 24 degrees, light wind."
    assert len(chunks) > 5  # really streamed in pieces
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    # The usage chunk comes last, with no choices; every other chunk says usage is null.
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert last.usage.prompt_tokens == 50 and last.usage.completion_tokens == 20
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == 32
    assert last.usage.completion_tokens_details is not None
    assert last.usage.completion_tokens_details.reasoning_tokens == 8
    assert openai_server.last.json["stream_options"] == {"include_usage": True}

    # No usage unless asked for, as OpenAI does.
    openai_server.queue(OpenAIReply("Sunny."))
    chunks = list(oai.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True))
    assert all(c.usage is None and c.choices for c in chunks)


def test_openai_stream_helper_accumulates_the_final_message(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    openai_server.queue(
        OpenAIReply("Let me check.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})])
    )
    with oai.chat.completions.stream(
        model="gpt-4o-mini", messages=USER, tools=[WEATHER_TOOL],
        stream_options={"include_usage": True},
    ) as stream:  # fmt: skip
        kinds = {event.type for event in stream}
        final = stream.get_final_completion()
    assert {"content.delta", "tool_calls.function.arguments.delta", "chunk"} <= kinds
    message = final.choices[0].message
    assert message.content == "Let me check."
    assert message.tool_calls is not None and len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert call.id.startswith("call_")
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None and final.usage.total_tokens == 19


def test_openai_tool_call_fragments_split_across_chunks(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    first = ToolCall(
        "get_weather", '{"city": "Paris", "unit": "C"}', id="call_one",
        fragments=['{"ci', 'ty": "Pa', 'ris", "un', 'it": "C"}'],
    )  # fmt: skip
    second = ToolCall("get_time", {"tz": "Europe/Paris"}, id="call_two")
    openai_server.queue(OpenAIReply(tool_calls=[first, second]))
    chunks = list(
        oai.chat.completions.create(
            model="gpt-4o-mini", messages=USER, tools=[WEATHER_TOOL], stream=True
        )
    )
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    ones = [d for d in deltas if d.index == 0]
    # id, type and name come once, in the first fragment, with empty arguments.
    assert ones[0].id == "call_one" and ones[0].type == "function"
    assert ones[0].function is not None and ones[0].function.name == "get_weather"
    assert ones[0].function.arguments == ""
    assert all(d.id is None and d.function and d.function.name is None for d in ones[1:])
    assert [d.function.arguments for d in ones[1:] if d.function] == first.fragments
    # Assembled per index, both calls come out whole.
    calls: dict[int, dict[str, str]] = {}
    for d in deltas:
        entry = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
        entry["id"] += d.id or ""
        entry["name"] += (d.function and d.function.name) or ""
        entry["arguments"] += (d.function and d.function.arguments) or ""
    assert calls == {
        0: {"id": "call_one", "name": "get_weather", "arguments": first.raw_arguments},
        1: {"id": "call_two", "name": "get_time", "arguments": '{"tz": "Europe/Paris"}'},
    }
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_openai_malformed_tool_arguments_arrive_as_the_raw_string(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    broken = '{"city": "Paris",, "unit'
    openai_server.queue(
        OpenAIReply(tool_calls=[ToolCall("get_weather", broken)]),
        OpenAIReply(tool_calls=[ToolCall("get_weather", broken)]),
    )
    whole = oai.chat.completions.create(model="gpt-4o-mini", messages=USER, tools=[WEATHER_TOOL])
    assert whole.choices[0].message.tool_calls is not None
    call = whole.choices[0].message.tool_calls[0]
    assert call.type == "function" and call.function.arguments == broken
    with oai.chat.completions.stream(
        model="gpt-4o-mini", messages=USER, tools=[WEATHER_TOOL]
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls is not None
    assert final.choices[0].message.tool_calls[0].function.arguments == broken


class Weather(BaseModel):
    city: str
    celsius: float


def test_openai_response_format_json_schema(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    def echo(request: RecordedRequest) -> OpenAIReply:
        schema = request.json["response_format"]["json_schema"]
        assert schema["name"] == "Weather" and schema["strict"] is True
        return OpenAIReply(json={"city": "Paris", "celsius": 21.5})

    openai_server.queue(echo, echo)
    parsed = oai.chat.completions.parse(model="gpt-4o", messages=USER, response_format=Weather)
    assert parsed.choices[0].message.parsed == Weather(city="Paris", celsius=21.5)
    sent = openai_server.last.json["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["schema"]["required"] == ["city", "celsius"]

    with oai.chat.completions.stream(
        model="gpt-4o", messages=USER, response_format=Weather
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == Weather(city="Paris", celsius=21.5)


def test_openai_429_with_retry_after_is_retried(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    openai_server.queue(ow.rate_limited(retry_after=0.3), OpenAIReply("after the wait"))
    started = time.monotonic()
    completion = oai.with_options(max_retries=2).chat.completions.create(
        model="gpt-4o-mini", messages=USER
    )
    assert completion.choices[0].message.content == "after the wait"
    first, second = openai_server.requests
    assert second.received_at - first.received_at >= 0.3  # Retry-After honoured
    assert time.monotonic() - started < 3  # and not the SDK's own backoff on top
    assert second.header("x-stainless-retry-count") == "1"

    # retry-after-ms wins over retry-after.
    openai_server.reset()
    openai_server.queue(ow.rate_limited(retry_after=30, retry_after_ms=50), OpenAIReply("ok"))
    oai.with_options(max_retries=1).chat.completions.create(model="gpt-4o-mini", messages=USER)
    first, second = openai_server.requests
    assert 0.05 <= second.received_at - first.received_at < 5


def test_openai_errors_reach_the_sdk_typed(openai_server: OpenAIServer, oai: openai.OpenAI) -> None:
    openai_server.queue(ow.rate_limited(), ow.server_error(), ow.server_error(503))
    with pytest.raises(openai.RateLimitError) as limited:
        oai.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert limited.value.status_code == 429 and limited.value.code == "rate_limit_exceeded"
    assert limited.value.response.headers["retry-after"] == "0.1"
    with pytest.raises(openai.InternalServerError) as failed:
        oai.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    assert failed.value.status_code == 500 and failed.value.type == "server_error"
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(model="gpt-4o-mini", messages=USER)

    openai_server.queue(ow.server_error(retry_after=0.05), OpenAIReply("recovered"))
    completion = oai.with_options(max_retries=1).chat.completions.create(
        model="gpt-4o-mini", messages=USER
    )
    assert completion.choices[0].message.content == "recovered"

    openai_server.queue(ow.api_error(400, "too long", code="context_length_exceeded"))
    with pytest.raises(openai.BadRequestError) as bad:
        oai.with_options(max_retries=3).chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert bad.value.code == "context_length_exceeded"

    with (
        openai.OpenAI(base_url=openai_server.base_url, api_key="sk-wrong") as wrong,
        pytest.raises(openai.AuthenticationError),
    ):
        wrong.chat.completions.create(model="gpt-4o-mini", messages=USER)


def test_openai_cut_stream_raises_in_the_sdk(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    openai_server.queue(OpenAIReply("The weather in Paris is sunny.", cut_after=4))
    received: list[str] = []
    stream = oai.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    with pytest.raises(openai.APIConnectionError) as cut:
        received.extend(c.choices[0].delta.content or "" for c in stream)
    assert "".join(received) == "The weather "  # 4 events: role, then 3 pieces
    assert caused_by(cut.value, httpx2.RemoteProtocolError) is not None

    openai_server.queue(OpenAIReply("whole, then cut", cut_after=1))
    with pytest.raises(openai.APIConnectionError):
        oai.chat.completions.create(model="gpt-4o-mini", messages=USER)

    # A stream that ends cleanly but early (no finish_reason, no [DONE]) is NOT an SDK error:
    # an adapter has to notice the missing finish_reason itself.
    half: dict[str, Any] = {
        "id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": None}],
    }  # fmt: skip
    openai_server.queue(SSEReply([half]))
    chunks = list(oai.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True))
    assert [c.choices[0].finish_reason for c in chunks] == [None]


def test_openai_error_in_the_middle_of_a_stream(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    openai_server.queue(OpenAIReply("Partial answer", error_after=3))
    with pytest.raises(openai.APIError) as failed:
        list(oai.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True))
    assert "error while processing" in failed.value.message
    assert failed.value.type == "server_error"


def test_openai_stalled_stream_times_out(openai_server: OpenAIServer, oai: openai.OpenAI) -> None:
    openai_server.queue(OpenAIReply("slow", stall_after=2))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        list(
            oai.with_options(timeout=0.3).chat.completions.create(
                model="gpt-4o-mini", messages=USER, stream=True
            )
        )
    assert time.monotonic() - started < 3


def test_openai_models_and_an_unscripted_request(
    openai_server: OpenAIServer, oai: openai.OpenAI
) -> None:
    assert [m.id for m in oai.models.list()] == ["gpt-4o-mini", "gpt-4.1", "o4-mini"]
    with pytest.raises(openai.BadRequestError, match="no scripted reply left"):
        oai.with_options(max_retries=2).chat.completions.create(model="m", messages=USER)
    assert len(openai_server.requests_to("/chat/completions")) == 1  # not retried
    assert openai_server.errors == [
        "wire fake: no scripted reply left for POST /v1/chat/completions"
    ]
    openai_server.reset()  # else the fixture fails this test on teardown


async def test_openai_async_client_and_concurrent_streams(openai_server: OpenAIServer) -> None:
    openai_server.queue(*(OpenAIReply(f"answer {i}", delay=0.1) for i in range(6)))
    async with openai.AsyncOpenAI(
        base_url=openai_server.base_url, api_key=openai_server.api_key, max_retries=0
    ) as client:

        async def one() -> str:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=USER, stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream])

        started = time.monotonic()
        answers = await asyncio.gather(*(one() for _ in range(6)))
        elapsed = time.monotonic() - started
    assert sorted(answers) == [f"answer {i}" for i in range(6)]
    # Each stream takes 0.5 s (5 events, 0.1 s apart): all 6 were served side by side.
    received = [r.received_at for r in openai_server.requests]
    assert max(received) - min(received) < 0.5
    assert elapsed < 2.5  # one after the other: 3 s


def test_openai_compatible_base_url(openai_compatible_server: OpenAIServer) -> None:
    server = openai_compatible_server
    assert server.base_url.endswith("/compat/v1") and server.api_key is None
    server.queue(
        OpenAIReply("The answer is 4.", reasoning_content="2 + 2 = 4", usage_in_stream="always")
    )
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as client:
        chunks = list(client.chat.completions.create(model="llama3.1:8b", messages=USER,
                                                     stream=True))  # fmt: skip
        assert [m.id for m in client.models.list()] == ["llama3.1:8b"]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    # Not an OpenAI field: the SDK keeps it as an extra attribute of the delta.
    reasoning = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
    assert reasoning == "2 + 2 = 4"
    assert "".join(d.content or "" for d in deltas) == "The answer is 4."
    assert chunks[-1].usage is not None  # sent although the request did not ask
    assert server.requests[0].path == "/compat/v1/chat/completions"


# -- OpenAI Responses --------------------------------------------------------------------------


def test_openai_responses_stream(openai_server: OpenAIServer, oai: openai.OpenAI) -> None:
    call = ToolCall("get_weather", {"city": "Paris"}, id="call_w")
    usage = ow.Usage(prompt_tokens=40, completion_tokens=10, cached_tokens=8, reasoning_tokens=3)
    openai_server.queue(OpenAIReply("Checking.", tool_calls=[call], usage=usage,
                                    reasoning_content="need the weather tool"))  # fmt: skip
    tools: Any = [{"type": "function", "name": "get_weather", "strict": False,
                   "parameters": WEATHER_TOOL["function"]["parameters"]}]  # fmt: skip
    with oai.responses.stream(model="gpt-4.1", input="Weather in Paris?", tools=tools) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_response()
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert events.count("response.output_text.delta") > 1
    assert events.count("response.function_call_arguments.delta") > 1
    assert final.output_text == "Checking."
    [fc] = [item for item in final.output if item.type == "function_call"]
    assert (fc.call_id, fc.name, json.loads(fc.arguments)) == ("call_w", "get_weather",
                                                               {"city": "Paris"})  # fmt: skip
    assert final.usage is not None and final.usage.input_tokens == 40
    assert final.usage.input_tokens_details.cached_tokens == 8
    assert final.usage.output_tokens_details.reasoning_tokens == 3
    assert openai_server.last.path == "/v1/responses"
    assert openai_server.last.json["tools"] == tools

    openai_server.queue(OpenAIReply("Whole."))
    assert oai.responses.create(model="gpt-4.1", input="hi").output_text == "Whole."


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


def test_a_raw_json_reply(openai_server: OpenAIServer, oai: openai.OpenAI) -> None:
    openai_server.queue(JSONReply("{not json", headers={"x-request-id": "req_1"}))
    with pytest.raises(json.JSONDecodeError):  # the SDK does not wrap a broken body
        oai.chat.completions.create(model="gpt-4o-mini", messages=USER)
    openai_server.queue(SSEReply([SSEEvent("[DONE]")]))
    assert list(oai.chat.completions.create(model="m", messages=USER, stream=True)) == []


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
