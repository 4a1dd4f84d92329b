"""``OpenAIAdapter`` on Chat Completions, through the real ``openai`` SDK against the fake
OpenAI server (tests/support/wire): streaming, tool calls, usage, errors, the request body,
refusals before sending, early close. The Responses API and OpenAI-compatible servers have
files of their own; the helpers here serve all three."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest

from dhub.providers.catalog import ModelInfo, built_in_for, family_default
from dhub.providers.errors import ProviderError, UnsupportedFeature
from dhub.providers.openai import OpenAIAdapter
from dhub.providers.types import (
    EFFORTS,
    Effort,
    Finished,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from tests.support.wire import OpenAIReply, OpenAIServer, SSEEvent, SSEReply
from tests.support.wire import ToolCall as WireCall
from tests.support.wire import openai_wire as ow

CHAT_MODEL = "gpt-4o-mini"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}},
)
TIME = ToolSpec(
    "get_time",
    "Local time in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
     "additionalProperties": False},
)  # fmt: skip
STRICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "array", "items": {
            "type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"],
            "additionalProperties": False}},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}  # fmt: skip
NOT_STRICT_SCHEMA: dict[str, Any] = {  # an inner object without additionalProperties: false
    **STRICT_SCHEMA,
    "properties": {**STRICT_SCHEMA["properties"],
                   "days": {"type": "array", "items": {"type": "object",
                            "properties": {"t": {"type": "number"}}, "required": ["t"]}}},
}  # fmt: skip


# -- helpers (also used by the Responses and compatible-server tests) ------------------------


def catalog(provider: str = "openai", wire: str = "openai") -> Callable[[str], ModelInfo]:
    """The built-in OpenAI models, else the family defaults, as the registry looks them up."""
    known = built_in_for("openai", provider) if wire == "openai" else {}
    return lambda model: known.get(model) or family_default(wire, provider, model)


def ask(model: str = CHAT_MODEL, text: str = "What's the weather in Paris?", **fields: Any) -> (
    ModelRequest
):  # fmt: skip
    return ModelRequest(model, (Message("user", text),), **fields)


async def collect(
    adapter: OpenAIAdapter, request: ModelRequest
) -> tuple[list[StreamItem], ModelResponse]:
    """Every delta, and the response of the ``Finished`` that must come last (exactly once)."""
    items = [item async for item in adapter.stream(request)]
    assert items, "the stream yielded nothing"
    finished = items[-1]
    assert isinstance(finished, Finished), f"the last item is not Finished: {finished!r}"
    assert not any(isinstance(item, Finished) for item in items[:-1])
    return items[:-1], finished.response


async def failure(
    adapter: OpenAIAdapter, request: ModelRequest
) -> tuple[list[StreamItem], ProviderError]:
    """The items yielded before the stream raised, and the ``ProviderError`` it raised."""
    items: list[StreamItem] = []

    async def drain() -> None:
        async for item in adapter.stream(request):
            items.append(item)

    with pytest.raises(ProviderError) as raised:
        await drain()
    assert not any(isinstance(item, Finished) for item in items)
    return items, raised.value


def texts(items: list[StreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, TextDelta)]


def reasonings(items: list[StreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, ReasoningDelta)]


def fragments(items: list[StreamItem]) -> list[ToolCallDelta]:
    return [item for item in items if isinstance(item, ToolCallDelta)]


async def wait_for(condition: Callable[[], bool], seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def adapter(openai_server: OpenAIServer) -> AsyncIterator[OpenAIAdapter]:
    adapter = OpenAIAdapter(
        "openai", api_key=openai_server.api_key, base_url=openai_server.base_url,
        models=catalog(), timeout=5,
    )  # fmt: skip
    yield adapter
    await adapter.aclose()


# -- streaming ---------------------------------------------------------------------------------


async def test_text_deltas_in_order_and_the_final_message(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply(["It is ", "sunny ", "in Paris."], model="gpt-4o-mini-2024"))
    items, response = await collect(adapter, ask())
    assert items == [TextDelta("It is "), TextDelta("sunny "), TextDelta("in Paris.")]
    assert response.message == Message("assistant", "It is sunny in Paris.")
    assert response.stop_reason == "end"
    assert (response.provider, response.model) == ("openai", "gpt-4o-mini-2024")
    sent = openai_server.last
    assert sent.path == "/v1/chat/completions" and sent.stream
    assert sent.json["stream_options"] == {"include_usage": True}
    assert sent.json["model"] == CHAT_MODEL
    assert sent.json["messages"] == [{"role": "user", "content": "What's the weather in Paris?"}]


async def test_tool_call_fragments_become_tool_calls(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("Let me check.", tool_calls=[
        WireCall("get_weather", {"city": "Paris"}, id="call_1",
                 fragments=['{"ci', 'ty": "Pa', 'ris"}']),
        WireCall("get_time", {"city": "Tokyo"}, id="call_2"),
    ]))  # fmt: skip
    items, response = await collect(adapter, ask(tools=(WEATHER, TIME)))
    assert texts(items) == ["Let ", "me c", "heck", "."]
    calls = fragments(items)
    assert calls[:4] == [
        ToolCallDelta(0, "call_1", "get_weather", ""),
        ToolCallDelta(0, None, None, '{"ci'),
        ToolCallDelta(0, None, None, 'ty": "Pa'),
        ToolCallDelta(0, None, None, 'ris"}'),
    ]
    assert calls[4] == ToolCallDelta(1, "call_2", "get_time", "")
    assert "".join(c.arguments for c in calls[5:]) == '{"city": "Tokyo"}'
    assert {c.index for c in calls[5:]} == {1}
    assert response.message.tool_calls == (
        ToolCall("call_1", "get_weather", {"city": "Paris"}),
        ToolCall("call_2", "get_time", {"city": "Tokyo"}),
    )
    assert response.message.content == "Let me check."
    assert response.stop_reason == "tool_calls"


async def test_usage_with_cached_and_reasoning_tokens(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("ok", usage=ow.Usage(300, 20, cached_tokens=256,
                                                         reasoning_tokens=12)))  # fmt: skip
    _, response = await collect(adapter, ask())
    assert response.usage == Usage(300, 20, reasoning_tokens=12, cached_tokens=256)


@pytest.mark.parametrize(
    "reply",
    [OpenAIReply("ok", usage=None), OpenAIReply("ok", usage_in_stream="never")],
    ids=["no-usage", "usage-not-streamed"],
)
async def test_usage_absent_is_zero(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, reply: OpenAIReply
) -> None:
    openai_server.queue(reply)
    _, response = await collect(adapter, ask())
    assert response.usage == Usage() and not response.usage.estimated
    assert response.message.content == "ok"


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("stop", "end"), ("length", "max_tokens"), ("content_filter", "content_filter")],
)
async def test_stop_reasons(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, finish: str, expected: str
) -> None:
    openai_server.queue(OpenAIReply("Once upon", finish_reason=finish))
    _, response = await collect(adapter, ask())
    assert response.stop_reason == expected


async def test_a_refusal_is_text_with_stop_reason_refusal(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply(refusal="I can't help with that."))
    items, response = await collect(adapter, ask())
    assert "".join(texts(items)) == "I can't help with that."
    assert response.stop_reason == "refusal"
    assert response.message.content == "I can't help with that."


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "retry_after"),
    [(ow.rate_limited(retry_after=7), 7.0), (ow.rate_limited(None, retry_after_ms=250), 0.25)],
    ids=["retry-after", "retry-after-ms"],
)
async def test_rate_limited(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, reply: Any, retry_after: float
) -> None:
    openai_server.queue(reply)
    items, error = await failure(adapter, ask())
    assert items == []
    assert (error.kind, error.status, error.retry_after) == ("rate_limited", 429, retry_after)
    assert error.retryable
    assert (error.provider, error.model) == ("openai", CHAT_MODEL)
    assert error.message.startswith("Rate limit reached for gpt-4o-mini")
    assert len(openai_server.requests) == 1  # the SDK did not retry: dhub does


@pytest.mark.parametrize(
    ("status", "kind"), [(500, "server_error"), (502, "server_error"), (503, "overloaded")]
)
async def test_server_errors(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, status: int, kind: str
) -> None:
    openai_server.queue(ow.server_error(status))
    _, error = await failure(adapter, ask())
    assert (error.kind, error.status, error.retry_after) == (kind, status, None)
    assert "The server had an error while processing your request" in error.message
    assert len(openai_server.requests) == 1


async def test_a_bad_request_says_what_the_api_said(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(ow.api_error(400, "This model's maximum context length is 128000 "
                                     "tokens.", code="context_length_exceeded"))  # fmt: skip
    _, error = await failure(adapter, ask())
    assert (error.kind, error.status) == ("bad_request", 400)
    assert error.message == "This model's maximum context length is 128000 tokens."
    assert "(HTTP 400)" in str(error) and "gpt-4o-mini" in str(error)


async def test_a_wrong_key_is_auth_and_never_shown(openai_server: OpenAIServer) -> None:
    key = "sk-wrong-0123456789abcdef"
    adapter = OpenAIAdapter("openai", api_key=key, base_url=openai_server.base_url,
                            models=catalog())  # fmt: skip
    try:
        _, error = await failure(adapter, ask())
        assert (error.kind, error.status) == ("auth", 401)
        assert "Incorrect API key provided" in error.message
        assert "provider 'openai'" in error.message  # names the entry whose key to check
        # A server (or proxy) that echoes the key back: it is scrubbed from the message.
        openai_server.queue(ow.api_error(401, f"Incorrect API key provided: {key}."))
        openai_server.api_key = None
        _, echoed = await failure(adapter, ask())
        assert echoed.kind == "auth" and "Incorrect API key provided" in echoed.message
        for err in (error, echoed):
            assert key not in str(err) and key not in repr(err.args)
        assert openai_server.requests[0].header("authorization") == f"Bearer {key}"
    finally:
        await adapter.aclose()


async def test_a_stream_cut_in_the_middle(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("The weather in Paris is sunny.", cut_after=4))
    items, error = await failure(adapter, ask())
    assert texts(items) == ["The ", "weat", "her "]  # role chunk, then 3 pieces
    assert error.kind == "stream_cut" and not error.retryable
    assert "RemoteProtocolError" in error.message


async def test_a_stream_cut_before_any_output_is_a_connection_error(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("Never seen.", cut_after=1))  # only the role chunk
    items, error = await failure(adapter, ask())
    assert items == []
    assert error.kind == "connection" and error.retryable


async def test_a_cut_after_the_finish_reason_loses_only_the_usage(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    # role, "Done", finish_reason, then the connection drops before the usage chunk
    openai_server.queue(OpenAIReply("Done", cut_after=3))
    items, response = await collect(adapter, ask())
    assert texts(items) == ["Done"]
    assert (response.message.content, response.stop_reason) == ("Done", "end")
    assert response.usage == Usage()


async def test_a_stream_that_ends_without_a_finish_reason(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    half: dict[str, Any] = {
        "id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": None}],
    }  # fmt: skip
    openai_server.queue(SSEReply([half, SSEEvent("[DONE]")]), SSEReply([SSEEvent("[DONE]")]))
    items, error = await failure(adapter, ask())
    assert texts(items) == ["half"]
    assert error.kind == "stream_cut" and "without a finish_reason" in error.message
    items, error = await failure(adapter, ask())
    assert items == [] and error.kind == "connection"


async def test_an_error_event_inside_the_stream(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("Partial answer", error_after=3))
    items, error = await failure(adapter, ask())
    assert texts(items) == ["Part", "ial "]
    assert error.kind == "stream_cut"
    assert "The server had an error while processing your request" in error.message
    # Before any output it keeps its own kind (and is retried above).
    openai_server.queue(OpenAIReply("Never", error_after=1, error={
        "message": "Rate limit reached in the middle", "type": "requests",
        "code": "rate_limit_exceeded"}))  # fmt: skip
    items, error = await failure(adapter, ask())
    assert items == []
    assert (error.kind, error.message) == ("rate_limited", "Rate limit reached in the middle")


async def test_an_event_that_is_not_json(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(SSEReply([SSEEvent("{not json")]))
    _, error = await failure(adapter, ask())
    assert error.kind == "provider_error" and "not JSON" in error.message


async def test_a_stalled_stream_times_out(openai_server: OpenAIServer) -> None:
    adapter = OpenAIAdapter("openai", api_key=openai_server.api_key,
                            base_url=openai_server.base_url, models=catalog(), timeout=0.3)  # fmt: skip  # noqa: E501
    try:
        openai_server.queue(OpenAIReply("slow", stall_after=1))  # the role chunk, then silence
        started = time.monotonic()
        items, error = await failure(adapter, ask())
        assert items == [] and error.kind == "timeout" and error.retryable
        assert "0.3 s" in error.message
        openai_server.queue(OpenAIReply("slow answer", stall_after=3))
        items, error = await failure(adapter, ask())
        assert texts(items) == ["slow", " ans"]
        assert error.kind == "stream_cut" and "timeout" in error.message
        assert time.monotonic() - started < 3
    finally:
        await adapter.aclose()


async def test_nothing_listening_is_a_connection_error() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}/v1"
    adapter = OpenAIAdapter("openai", api_key="sk-x", base_url=base_url, models=catalog())
    try:
        items, error = await failure(adapter, ask())
        assert items == [] and error.kind == "connection" and error.retryable
        assert base_url in error.message and "ConnectError" in error.message
    finally:
        await adapter.aclose()


async def test_malformed_tool_arguments(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply(tool_calls=[
        WireCall("get_weather", '{"city": "Par', id="call_bad"),
    ]))  # fmt: skip
    items, error = await failure(adapter, ask(tools=(WEATHER,)))
    assert "".join(f.arguments for f in fragments(items)) == '{"city": "Par'  # streamed first
    assert error.kind == "malformed_tool_call"
    assert "get_weather" in error.message and "call_bad" in error.message
    assert (error.provider, error.model) == ("openai", CHAT_MODEL)


# -- the request body --------------------------------------------------------------------------


async def test_the_request_body(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    openai_server.queue(OpenAIReply("ok"))
    request = ModelRequest(
        CHAT_MODEL,
        (
            Message("user", "Weather in Paris and Tokyo?"),
            Message(
                "assistant",
                "Checking.",
                tool_calls=(
                    ToolCall("call_1", "get_weather", {"city": "Paris"}),
                    ToolCall("call_2", "get_time", {"city": "Tokyo"}),
                ),
            ),
            Message("tool", "sunny, 21 °C", tool_call_id="call_1"),
            Message("tool", "unknown city", tool_call_id="call_2", is_error=True),
            Message("assistant", tool_calls=(ToolCall("call_3", "get_weather", {}),)),
            Message("tool", "{}", tool_call_id="call_3"),
            Message("user", "And this?", images=("https://example.test/a.png",)),
        ),
        system="Be brief.",
        tools=(WEATHER, TIME),
        tool_choice="get_time",
        response_schema=STRICT_SCHEMA,
        max_output_tokens=300,
        temperature=0.2,
        top_p=0.9,
        stop=("END",),
        options={"seed": 7, "service_tier": "flex"},
    )
    await collect(adapter, request)
    body = openai_server.last.json
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "get_time", "arguments": '{"city":"Tokyo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 °C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: unknown city"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_3", "type": "function",
             "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_3", "content": "{}"},
        {"role": "user", "content": [
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}}]},
    ]  # fmt: skip
    assert body["tools"] == [
        {"type": "function", "function": {
            "name": "get_weather", "description": "Current weather for a city.",
            "parameters": dict(WEATHER.parameters), "strict": False}},
        {"type": "function", "function": {
            "name": "get_time", "description": "Local time in a city.",
            "parameters": dict(TIME.parameters), "strict": True}},
    ]  # fmt: skip
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": STRICT_SCHEMA, "strict": True}}  # fmt: skip
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.2, 0.9, ["END"])
    assert (body["seed"], body["service_tier"]) == (7, "flex")  # options, as they are
    assert "reasoning_effort" not in body


@pytest.mark.parametrize("choice", ["auto", "required", "none"])
async def test_tool_choice_keywords(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, choice: str
) -> None:
    openai_server.queue(OpenAIReply("ok"))
    await collect(adapter, ask(tools=(WEATHER,), tool_choice=choice))
    assert openai_server.last.json["tool_choice"] == choice


async def test_no_tools_no_tool_fields(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    openai_server.queue(OpenAIReply("ok"))
    await collect(adapter, ask())
    body = openai_server.last.json
    for field in ("tools", "tool_choice", "response_format", "max_completion_tokens", "stop",
                  "temperature", "top_p", "reasoning_effort"):  # fmt: skip
        assert field not in body, field


async def test_a_schema_that_is_not_strict_compatible_is_sent_not_strict(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply(json={"city": "Paris", "days": []}))
    _, response = await collect(adapter, ask(response_schema=NOT_STRICT_SCHEMA))
    assert openai_server.last.json["response_format"]["json_schema"] == {
        "name": "response", "schema": NOT_STRICT_SCHEMA, "strict": False,
    }  # fmt: skip
    assert response.message.content == '{"city": "Paris", "days": []}'


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        ({"type": "object", "properties": {}, "additionalProperties": False}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),
        ({"type": "object", "properties": {"a": {"type": "string"}},
          "additionalProperties": False}, False),  # a not required
        ({"type": "object", "properties": {"a": {"anyOf": [{"type": "null"}, {
            "type": "object", "properties": {"b": {"type": "string"}}}]}},
          "required": ["a"], "additionalProperties": False}, False),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"],
          "additionalProperties": False,
          "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}},
                          "required": ["x"], "additionalProperties": False}}}, True),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"],
          "additionalProperties": False,
          "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}}}}, False),
    ],
)  # fmt: skip
async def test_strict_only_when_every_object_is_closed_and_fully_required(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, schema: dict[str, Any], strict: bool
) -> None:
    openai_server.queue(OpenAIReply("{}"))
    await collect(adapter, ask(response_schema=schema))
    assert openai_server.last.json["response_format"]["json_schema"]["strict"] is strict


# -- reasoning effort --------------------------------------------------------------------------

ABSENT = "absent"
REFUSED = "refused"
# What the body holds for each dhub effort (None, then none … max), per model.
EFFORT_TABLE: dict[str, tuple[str, ...]] = {
    #               None    none      minimal    low    medium    high    xhigh    max
    "gpt-4o-mini": (ABSENT, ABSENT, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED),
    "o3": (ABSENT, "low", "low", "low", "medium", "high", "high", "high"),
    "gpt-5": (ABSENT, "minimal", "minimal", "low", "medium", "high", "high", "high"),
    "gpt-5.1": (ABSENT, "none", "low", "low", "medium", "high", "high", "high"),
    "gpt-5.2": (ABSENT, "none", "low", "low", "medium", "high", "xhigh", "xhigh"),
}


def effort_cases(table: dict[str, tuple[str, ...]]) -> list[Any]:
    return [
        pytest.param(model, effort, expected, id=f"{model}-{effort}")
        for model, row in table.items()
        for effort, expected in zip((None, *EFFORTS), row, strict=True)
    ]


def sent_effort(body: dict[str, Any]) -> str:
    """The effort a request body carries, on either API (``absent`` when none)."""
    if "reasoning" in body:
        return str(body["reasoning"].get("effort", ABSENT))
    return str(body.get("reasoning_effort", ABSENT))


@pytest.mark.parametrize(("model", "effort", "expected"), effort_cases(EFFORT_TABLE))
async def test_reasoning_effort_per_model(
    adapter: OpenAIAdapter,
    openai_server: OpenAIServer,
    model: str,
    effort: Effort | None,
    expected: str,
) -> None:
    request = ask(model, reasoning_effort=effort)
    if expected == REFUSED:
        with pytest.raises(UnsupportedFeature, match="reasoning_effort"):
            await collect(adapter, request)
        assert openai_server.requests == []
        return
    openai_server.queue(OpenAIReply("ok"))
    await collect(adapter, request)
    body = openai_server.last.json
    assert sent_effort(body) == expected
    api = "/responses" if model != "gpt-4o-mini" else "/chat/completions"
    assert openai_server.last.path.endswith(api)


# -- refused before sending --------------------------------------------------------------------


def limited(**fields: Any) -> Callable[[str], ModelInfo]:
    base = catalog()
    return lambda model: dataclasses.replace(base(model), **fields)


IMAGE = "data:image/png;base64,AAAA"


@pytest.mark.parametrize(
    ("capabilities", "request_fields", "kind", "says"),
    [
        ({"tools": False}, {"tools": (WEATHER,)}, "unsupported", "tool calling"),
        ({"vision": False}, {"messages": (Message("user", "what?", images=(IMAGE,)),)},
         "unsupported", "does not accept images"),
        ({"structured_output": False}, {"response_schema": STRICT_SCHEMA}, "unsupported",
         "remove response_schema"),
        ({}, {"messages": (Message("tool", "x", tool_call_id="c", images=(IMAGE,)),)},
         "unsupported", "only be sent in user messages"),
        ({}, {"tool_choice": "get_time", "tools": (WEATHER,)}, "bad_request",
         "tool_choice 'get_time'"),
        ({}, {"tool_choice": "required"}, "bad_request", "tool_choice 'required' needs tools"),
    ],
    ids=["tools", "images", "structured-output", "images-in-tool-result",
         "unknown-tool-choice", "required-no-tools"],
)  # fmt: skip
async def test_unsupported_features_fail_before_sending(
    openai_server: OpenAIServer,
    capabilities: dict[str, Any],
    request_fields: dict[str, Any],
    kind: str,
    says: str,
) -> None:
    adapter = OpenAIAdapter("openai", api_key=openai_server.api_key,
                            base_url=openai_server.base_url, models=limited(**capabilities))  # fmt: skip  # noqa: E501
    try:
        request = dataclasses.replace(ask(), **request_fields)
        with pytest.raises(ProviderError) as raised:
            await anext(adapter.stream(request))
        assert (raised.value.kind, raised.value.status) == (kind, None)
        assert isinstance(raised.value, UnsupportedFeature) is (kind == "unsupported")
        assert says in raised.value.message
        assert (raised.value.provider, raised.value.model) == ("openai", CHAT_MODEL)
        assert openai_server.requests == []
    finally:
        await adapter.aclose()


async def test_capability_checks_let_a_capable_model_through(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("a cat"))
    request = dataclasses.replace(
        ask(tools=(WEATHER,), response_schema=STRICT_SCHEMA),
        messages=(Message("user", "what is it?", images=("data:image/png;base64,AAAA",)),),
    )
    _, response = await collect(adapter, request)  # gpt-4o-mini: tools, vision, schemas
    assert response.message.content == "a cat"


# -- closing -----------------------------------------------------------------------------------


async def test_closing_the_stream_early_closes_the_connection(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    # 100 events 0.03 s apart: about 3 s to send, unless the client hangs up.
    openai_server.queue(OpenAIReply("x" * 400, delay=0.03), OpenAIReply("next"))
    stream = adapter.stream(ask())
    assert isinstance(stream, AsyncGenerator)
    assert await anext(stream) == TextDelta("xxxx")
    assert openai_server.open_connections == 1
    await stream.aclose()
    assert await wait_for(lambda: openai_server.open_connections == 0, 1.0)
    # The adapter still works.
    _, response = await collect(adapter, ask())
    assert response.message.content == "next"


async def test_cancelling_the_consumer_closes_the_connection(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("y" * 400, delay=0.03), OpenAIReply("after"))
    first = asyncio.Event()

    async def consume() -> None:
        async for item in adapter.stream(ask()):
            if isinstance(item, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_for(lambda: openai_server.open_connections == 0, 1.0)
    _, response = await collect(adapter, ask())
    assert response.message.content == "after"


async def test_a_finished_stream_keeps_its_connection_for_the_next_call(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("one"), OpenAIReply("two"))
    await collect(adapter, ask())
    await collect(adapter, ask())
    first, _ = openai_server.requests
    assert first.header("authorization") == f"Bearer {openai_server.api_key}"
    assert openai_server.open_connections == 1  # kept alive and reused


async def test_construction_does_no_io_and_aclose_is_idempotent(
    openai_server: OpenAIServer,
) -> None:
    adapter = OpenAIAdapter("openai", api_key=openai_server.api_key,
                            base_url=openai_server.base_url, models=catalog(),
                            headers={"x-team": "a"})  # fmt: skip
    await asyncio.sleep(0.05)
    assert openai_server.requests == []
    openai_server.queue(OpenAIReply("ok"))
    await collect(adapter, ask())
    assert openai_server.last.header("x-team") == "a"
    assert openai_server.last.header("x-stainless-retry-count") == "0"
    await adapter.aclose()
    await adapter.aclose()
    assert await wait_for(lambda: openai_server.open_connections == 0, 1.0)
