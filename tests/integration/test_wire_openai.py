"""The fake OpenAI servers (Chat Completions, Responses, an OpenAI-compatible prefix) against
the real openai SDK: what it sends, what it accumulates, how it fails."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pydantic import BaseModel

from tests.support.wire import (
    AnthropicServer,
    JSONReply,
    OpenAIReply,
    OpenAIServer,
    RecordedRequest,
    SSEEvent,
    SSEReply,
    ToolCall,
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


def test_a_raw_json_reply(openai_server: OpenAIServer, oai: openai.OpenAI) -> None:
    openai_server.queue(JSONReply("{not json", headers={"x-request-id": "req_1"}))
    with pytest.raises(json.JSONDecodeError):  # the SDK does not wrap a broken body
        oai.chat.completions.create(model="gpt-4o-mini", messages=USER)
    openai_server.queue(SSEReply([SSEEvent("[DONE]")]))
    assert list(oai.chat.completions.create(model="m", messages=USER, stream=True)) == []
