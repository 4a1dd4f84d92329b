"""The Anthropic adapter, through the real ``anthropic`` SDK, against the fake Messages API
(tests/support/wire): what it sends, what it streams, how it fails."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dhub.providers.anthropic import AnthropicAdapter
from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import ProviderError, UnsupportedFeature
from dhub.providers.types import (
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
)
from tests.support.wire import (
    AnthropicReply,
    AnthropicServer,
    RedactedThinking,
    SSEEvent,
    SSEReply,
    Text,
    Thinking,
    ToolUse,
)
from tests.support.wire import anthropic_wire as aw

PROVIDER = "claude-test"
MODEL = aw.DEFAULT_MODEL  # made up: the SDK warns about deprecated model names
BUDGET = ModelInfo(PROVIDER, MODEL, 200_000, 64_000, vision=True, thinking="budget",
                   api="messages")  # fmt: skip
ADAPTIVE = ModelInfo(PROVIDER, "claude-wire-2", 200_000, 128_000, vision=True,
                     thinking="adaptive", efforts=("low", "medium", "high", "xhigh", "max"),
                     api="messages")  # fmt: skip
PLAIN = ModelInfo(PROVIDER, "claude-wire-plain", 200_000, 8_192, tools=False,
                  structured_output=False, vision=False, api="messages")  # fmt: skip
CATALOG = {m.id: m for m in (BUDGET, ADAPTIVE, PLAIN)}
USER = (Message("user", "What's the weather in Paris?"),)
WEATHER = ToolSpec("get_weather", "Current weather for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}}})  # fmt: skip
TIME = ToolSpec("get_time", "The time in a city.")
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def models(model: str) -> ModelInfo:
    return CATALOG.get(model, BUDGET)


def ask(model: str = MODEL, **fields: Any) -> ModelRequest:
    return ModelRequest(model, fields.pop("messages", USER), **fields)


def make_adapter(server: AnthropicServer, **overrides: Any) -> AnthropicAdapter:
    overrides.setdefault("models", models)
    if "api_key" not in overrides:
        overrides["api_key"] = server.api_key
    if "base_url" not in overrides:
        overrides["base_url"] = server.base_url
    return AnthropicAdapter(PROVIDER, **overrides)


@pytest.fixture
async def adapter(anthropic_server: AnthropicServer) -> AsyncIterator[AnthropicAdapter]:
    adapter = make_adapter(anthropic_server)
    yield adapter
    await adapter.aclose()


async def collect(adapter: AnthropicAdapter, request: ModelRequest) -> list[StreamItem]:
    return [item async for item in adapter.stream(request)]


async def final(adapter: AnthropicAdapter, request: ModelRequest) -> ModelResponse:
    items = await collect(adapter, request)
    assert isinstance(items[-1], Finished)
    assert sum(isinstance(i, Finished) for i in items) == 1
    return items[-1].response


async def failure(
    adapter: AnthropicAdapter, request: ModelRequest
) -> tuple[list[StreamItem], ProviderError]:
    """What streamed before the call failed, and its error."""
    items: list[StreamItem] = []

    async def drain() -> None:
        async for item in adapter.stream(request):
            items.append(item)

    with pytest.raises(ProviderError) as failed:
        await drain()
    assert not any(isinstance(i, Finished) for i in items)
    return items, failed.value


# -- streaming ---------------------------------------------------------------------------------


async def test_text_streams_in_order_then_one_finished(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    deltas = Text(["The wea", "ther is ", "sunny."])
    anthropic_server.queue(AnthropicReply([deltas], model="claude-x-9"))
    items = await collect(adapter, ask())
    assert items[:-1] == [TextDelta("The wea"), TextDelta("ther is "), TextDelta("sunny.")]
    done = items[-1]
    assert isinstance(done, Finished)
    response = done.response
    assert response.message == Message("assistant", "The weather is sunny.")
    assert response.stop_reason == "end"
    assert (response.provider, response.model) == (PROVIDER, "claude-x-9")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (25, 9)

    sent = anthropic_server.last
    assert sent.stream and sent.path == "/v1/messages"
    assert sent.header("authorization") == f"Bearer {aw.API_KEY}"
    assert sent.header("x-stainless-retry-count") == "0"
    assert sent.json["model"] == MODEL
    assert sent.json["messages"] == [{"role": "user", "content": "What's the weather in Paris?"}]
    assert sent.json["max_tokens"] == 4096  # Anthropic needs one: the default answer share
    for absent in ("thinking", "tools", "tool_choice", "system", "output_config", "temperature"):
        assert absent not in sent.json


async def test_stop_reasons(anthropic_server: AnthropicServer, adapter: AnthropicAdapter) -> None:
    wire = {"end_turn": "end", "stop_sequence": "end", "max_tokens": "max_tokens",
            "refusal": "refusal", "tool_use": "tool_calls"}  # fmt: skip
    for reason in wire:
        anthropic_server.queue(AnthropicReply("x", stop_reason=reason))
    got = [(await final(adapter, ask())).stop_reason for _ in wire]
    assert got == list(wire.values())


async def test_thinking_streams_as_reasoning_and_is_kept_for_replay(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    usage = aw.Usage(input_tokens=40, output_tokens=30, thinking_tokens=21)
    content: list[aw.Block] = [
        Thinking(["Paris, ", "so weather."], signature="sig-one"),
        RedactedThinking("opaque-data"),
        Text("Sunny."),
    ]
    anthropic_server.queue(AnthropicReply(content, usage=usage))
    items = await collect(adapter, ask(reasoning_effort="low"))
    assert items[:3] == [ReasoningDelta("Paris, "), ReasoningDelta("so weather."),
                         TextDelta("Sunn")]  # fmt: skip
    done = items[-1]
    assert isinstance(done, Finished)
    message = done.response.message
    assert message.content == "Sunny." and message.reasoning == "Paris, so weather."
    assert message.replay == {"anthropic": [
        {"type": "thinking", "thinking": "Paris, so weather.", "signature": "sig-one"},
        {"type": "redacted_thinking", "data": "opaque-data"},
    ]}  # fmt: skip
    assert done.response.usage.reasoning_tokens == 21
    assert done.response.usage.output_tokens == 30


async def test_replay_goes_back_first_in_the_assistant_turn(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    content: list[aw.Block] = [
        Thinking("Use the tool.", signature="sig-two"),
        RedactedThinking("more-opaque"),
        Text("Checking."),
        ToolUse("get_weather", {"city": "Paris"}, id="toolu_1"),
    ]
    anthropic_server.queue(AnthropicReply(content), AnthropicReply("Sunny."))
    first = await final(adapter, ask(tools=(WEATHER,), reasoning_effort="medium"))
    assert first.stop_reason == "tool_calls"
    result = Message("tool", '{"sky": "clear"}', tool_call_id="toolu_1")
    await final(adapter, ask(messages=(*USER, first.message, result), tools=(WEATHER,),
                             reasoning_effort="medium"))  # fmt: skip

    user, assistant, results = anthropic_server.last.json["messages"]
    assert user["role"] == "user" and assistant["role"] == "assistant"
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-two"},
        {"type": "redacted_thinking", "data": "more-opaque"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"sky": "clear"}'},
    ]}  # fmt: skip


async def test_tool_calls_assembled_from_fragments(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    pieces = ['{"ci', 'ty": "Pa', 'ris", "unit"', ': "C"}']
    weather = ToolUse("get_weather", {"city": "Paris", "unit": "C"}, "toolu_a", pieces)
    no_input = ToolUse("get_time", "", id="toolu_b")  # no input at all: {}
    content: list[aw.Block] = [Text("Both."), weather, no_input]
    anthropic_server.queue(AnthropicReply(content))
    items = await collect(adapter, ask(tools=(WEATHER, TIME)))
    calls = [i for i in items if isinstance(i, ToolCallDelta)]
    assert calls == [
        ToolCallDelta(0, id="toolu_a", name="get_weather"),
        ToolCallDelta(0, arguments='{"ci'),
        ToolCallDelta(0, arguments='ty": "Pa'),
        ToolCallDelta(0, arguments='ris", "unit"'),
        ToolCallDelta(0, arguments=': "C"}'),
        ToolCallDelta(1, id="toolu_b", name="get_time"),
    ]
    done = items[-1]
    assert isinstance(done, Finished)
    assert done.response.message.tool_calls == (
        ToolCall("toolu_a", "get_weather", {"city": "Paris", "unit": "C"}),
        ToolCall("toolu_b", "get_time", {}),
    )
    assert done.response.message.content == "Both."
    assert done.response.stop_reason == "tool_calls"


async def test_usage_counts_the_cache(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    usage = aw.Usage(input_tokens=100, output_tokens=12, cache_read_input_tokens=800,
                     cache_creation_input_tokens=50)  # fmt: skip
    anthropic_server.queue(AnthropicReply("a", usage=usage),
                           AnthropicReply("b", usage=usage, full_delta_usage=True))  # fmt: skip
    for _ in range(2):
        got = (await final(adapter, ask())).usage
        assert (got.input_tokens, got.output_tokens, got.cached_tokens) == (950, 12, 800)
        assert got.reasoning_tokens == 0 and not got.estimated


# -- errors ------------------------------------------------------------------------------------


async def test_http_errors_map_to_kinds(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    anthropic_server.queue(aw.rate_limited(retry_after=0.1))
    _, limited = await failure(adapter, ask())
    assert (limited.kind, limited.status, limited.retry_after) == ("rate_limited", 429, 0.1)
    assert limited.message.startswith("This request would exceed the rate limit")
    assert (limited.provider, limited.model) == (PROVIDER, MODEL)
    assert len(anthropic_server.requests) == 1  # the SDK does not retry: dhub does

    anthropic_server.queue(aw.overloaded(retry_after=2))
    _, overloaded = await failure(adapter, ask())
    assert (overloaded.kind, overloaded.status, overloaded.retry_after) == ("overloaded", 529, 2)

    anthropic_server.queue(aw.api_error(500, "api_error", "Internal server error"))
    _, broken = await failure(adapter, ask())
    assert (broken.kind, broken.status, broken.message) == (
        "server_error", 500, "Internal server error",
    )  # fmt: skip

    anthropic_server.queue(aw.api_error(400, "invalid_request_error", "prompt is too long"))
    _, bad = await failure(adapter, ask())
    assert (bad.kind, bad.status, bad.message) == ("bad_request", 400, "prompt is too long")
    assert len(anthropic_server.requests) == 4


async def test_wrong_key_is_auth_and_never_shown(anthropic_server: AnthropicServer) -> None:
    secret = "sk-ant-secret-never-shown-0123456789"
    wrong = make_adapter(anthropic_server, api_key=secret)
    try:
        _, denied = await failure(wrong, ask())
    finally:
        await wrong.aclose()
    assert (denied.kind, denied.status) == ("auth", 401)
    assert anthropic_server.last.header("authorization") == f"Bearer {secret}"
    assert secret not in str(denied) and secret not in repr(denied.args)
    assert secret not in denied.message

    # Even a server that echoes the key back does not get it into the error.
    echoing = make_adapter(anthropic_server)
    anthropic_server.queue(aw.api_error(403, "permission_error", f"key {aw.API_KEY} is blocked"))
    try:
        _, blocked = await failure(echoing, ask())
    finally:
        await echoing.aclose()
    assert blocked.kind == "auth" and "is blocked" in blocked.message
    assert aw.API_KEY not in str(blocked)

    # Nothing listens there: a connection error, the key still unsaid.
    port = anthropic_server.port
    anthropic_server.stop()
    gone = make_adapter(anthropic_server, api_key=secret, base_url=f"http://127.0.0.1:{port}")
    try:
        _, refused = await failure(gone, ask())
    finally:
        await gone.aclose()
    assert refused.kind == "connection" and refused.retryable
    assert secret not in str(refused)


async def test_no_key_sends_none_and_looks_for_none(
    anthropic_server: AnthropicServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """No key configured is a server that needs none: the SDK must not find one of its own
    (ANTHROPIC_API_KEY, its profile files) nor send an empty one."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "missing"))  # would raise
    keyless = make_adapter(anthropic_server, api_key=None)
    try:
        _, denied = await failure(keyless, ask())
        assert (denied.kind, denied.status) == ("auth", 401)
        assert anthropic_server.last.header("authorization") is None
        assert anthropic_server.last.header("x-api-key") is None

        anthropic_server.api_key = None  # a server without keys
        anthropic_server.queue(AnthropicReply("open"))
        assert (await final(keyless, ask())).message.content == "open"
    finally:
        await keyless.aclose()

    # A header of the entry's own is the way to authenticate to a proxy without a key.
    anthropic_server.api_key = "proxy-token"
    proxied = make_adapter(anthropic_server, api_key=None,
                           headers={"Authorization": "Bearer proxy-token"})  # fmt: skip
    try:
        anthropic_server.queue(AnthropicReply("proxied"))
        assert (await final(proxied, ask())).message.content == "proxied"
    finally:
        await proxied.aclose()


async def test_stream_cut_after_text_and_before_any_event(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    # start, ping, block start, then 3 text deltas
    anthropic_server.queue(AnthropicReply("The weather in Paris is sunny.", cut_after=6))
    items, cut = await failure(adapter, ask())
    assert [i for i in items if isinstance(i, TextDelta)] == [
        TextDelta("The "), TextDelta("weat"), TextDelta("her "),
    ]  # fmt: skip
    assert cut.kind == "stream_cut" and not cut.retryable
    assert "RemoteProtocolError" in cut.message

    for before_output in (0, 3):  # nothing at all; message_start, ping and a block start
        anthropic_server.queue(AnthropicReply("Sunny.", cut_after=before_output))
        items, dropped = await failure(adapter, ask())
        assert items == [] and dropped.kind == "connection" and dropped.retryable


async def test_stream_ending_without_message_stop(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    start = SSEEvent({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }}, "message_start")  # fmt: skip
    opened = {"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}  # fmt: skip
    half = {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Half"}}  # fmt: skip
    block = SSEEvent(opened, "content_block_start")
    text = SSEEvent(half, "content_block_delta")
    anthropic_server.queue(SSEReply([start, block, text]), SSEReply([start]))
    items, ended = await failure(adapter, ask())
    assert items == [TextDelta("Half")] and ended.kind == "stream_cut"
    assert "message_stop" in ended.message
    items, empty = await failure(adapter, ask())
    assert items == [] and empty.kind == "connection"


async def test_error_event_in_the_stream(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    # after message_start and ping: nothing streamed yet, so the provider's kind stands
    cases = {"overloaded_error": "overloaded", "rate_limit_error": "rate_limited",
             "api_error": "server_error", "invalid_request_error": "bad_request"}  # fmt: skip
    for type_, kind in cases.items():
        error = {"type": type_, "message": f"the {type_} message"}
        anthropic_server.queue(AnthropicReply("Sunny.", error_after=2, error=error))
        items, failed = await failure(adapter, ask())
        assert items == [] and (failed.kind, failed.status) == (kind, None)
        assert f"the {type_} message" in failed.message

    # after text has streamed it cannot be retried: stream_cut, the message kept
    anthropic_server.queue(AnthropicReply("The weather in Paris.", error_after=5))
    items, cut = await failure(adapter, ask())
    assert items == [TextDelta("The "), TextDelta("weat")]
    assert cut.kind == "stream_cut" and "Overloaded" in cut.message


async def test_malformed_tool_json_names_the_tool(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    broken = '{"city": "Paris",, "x'
    anthropic_server.queue(AnthropicReply([ToolUse("get_weather", broken, id="toolu_9")]))
    items, failed = await failure(adapter, ask(tools=(WEATHER,)))
    assert "".join(i.arguments for i in items if isinstance(i, ToolCallDelta)) == broken
    assert failed.kind == "malformed_tool_call"
    assert "get_weather" in failed.message and "toolu_9" in failed.message

    anthropic_server.queue(AnthropicReply([ToolUse("get_weather", "[1, 2]")]))
    _, not_object = await failure(adapter, ask(tools=(WEATHER,)))
    assert not_object.kind == "malformed_tool_call" and "not an object" in not_object.message


async def test_read_timeout(anthropic_server: AnthropicServer) -> None:
    quick = make_adapter(anthropic_server, timeout=0.3)
    try:
        anthropic_server.queue(AnthropicReply("Sunny.", stall_after=2))
        items, waited = await failure(quick, ask())
        assert items == [] and waited.kind == "timeout" and waited.retryable
        anthropic_server.queue(AnthropicReply("Sunny today.", stall_after=4))
        items, stalled = await failure(quick, ask())
        assert items == [TextDelta("Sunn")] and stalled.kind == "stream_cut"
        assert "timed out" in stalled.message
    finally:
        await quick.aclose()


# -- what is sent ------------------------------------------------------------------------------


async def test_request_body(anthropic_server: AnthropicServer) -> None:
    adapter = make_adapter(anthropic_server, headers={"x-dhub-test": "yes"})
    assert anthropic_server.requests == []  # no I/O when built
    schema = {"type": "object", "properties": {"answer": {"type": "string"}},
              "required": ["answer"], "additionalProperties": False}  # fmt: skip
    call_a = ToolCall("toolu_a", "get_weather", {"city": "Paris"})
    call_b = ToolCall("toolu_b", "get_time", {})
    messages = (
        Message("user", "Look at these.", images=(PNG, "https://example.com/cat.jpg")),
        Message("assistant", "", tool_calls=(call_a, call_b)),
        Message("tool", "18°C", tool_call_id="toolu_a"),
        Message("tool", "no clock", tool_call_id="toolu_b", is_error=True),
        Message("user", "And now?"),
        Message("assistant", "Fine."),
    )
    request = ask(
        messages=messages, system="Be brief.", tools=(WEATHER, TIME), tool_choice="get_time",
        response_schema=schema, max_output_tokens=1000, temperature=0.2, top_p=0.9,
        stop=("END", "STOP"), options={"metadata": {"user_id": "u-1"}},
    )  # fmt: skip
    anthropic_server.queue(AnthropicReply('{"answer": "x"}'))
    try:
        await final(adapter, request)
    finally:
        await adapter.aclose()
    sent = anthropic_server.last
    body = sent.json
    assert sent.header("x-dhub-test") == "yes"
    assert body["system"] == "Be brief."
    assert body["tools"] == [
        {"name": "get_weather", "description": "Current weather for a city.",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "get_time", "description": "The time in a city.",
         "input_schema": {"type": "object", "properties": {}}},
    ]  # fmt: skip
    assert body["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (1000, 0.2, 0.9)
    assert body["stop_sequences"] == ["END", "STOP"]
    assert body["metadata"] == {"user_id": "u-1"}
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG.split(",", 1)[1]}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            {"type": "text", "text": "Look at these."},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather",
             "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18°C"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no clock",
             "is_error": True},
        ]},
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Fine."}]},
    ]  # fmt: skip


async def test_tool_choice_values(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    wire = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"},
            "get_weather": {"type": "tool", "name": "get_weather"}}  # fmt: skip
    for choice in wire:
        anthropic_server.queue(AnthropicReply("ok"))
        await final(adapter, ask(tools=(WEATHER,), tool_choice=choice))
    assert [r.json["tool_choice"] for r in anthropic_server.requests] == list(wire.values())


BUDGET_TABLE: dict[Effort, tuple[int | None, int]] = {
    # effort: (budget_tokens, max_tokens) with the default answer share of 4,096
    "none": (None, 4096),
    "minimal": (1024, 1024 + 4096),
    "low": (2048, 2048 + 4096),
    "medium": (8192, 8192 + 4096),
    "high": (16384, 16384 + 4096),
    "xhigh": (32768, 32768 + 4096),
    "max": (64_000 - 4096, 64_000),  # 63,999 capped by the model's 64,000 less the answer
}


@pytest.mark.parametrize("effort", list(BUDGET_TABLE))
async def test_reasoning_effort_on_a_budget_model(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter, effort: Effort
) -> None:
    anthropic_server.queue(AnthropicReply("ok"))
    await final(adapter, ask(reasoning_effort=effort))
    body = anthropic_server.last.json
    budget, max_tokens = BUDGET_TABLE[effort]
    if budget is None:
        assert "thinking" not in body
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens
    assert "output_config" not in body


ADAPTIVE_TABLE: dict[Effort, str | None] = {
    "none": None, "minimal": "low", "low": "low", "medium": "medium", "high": "high",
    "xhigh": "xhigh", "max": "max",
}  # fmt: skip


@pytest.mark.parametrize("effort", list(ADAPTIVE_TABLE))
async def test_reasoning_effort_on_an_adaptive_model(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter, effort: Effort
) -> None:
    anthropic_server.queue(AnthropicReply("ok"))
    await final(adapter, ask(ADAPTIVE.id, reasoning_effort=effort, max_output_tokens=2000))
    body = anthropic_server.last.json
    native = ADAPTIVE_TABLE[effort]
    if native is None:
        assert "thinking" not in body and "output_config" not in body
    else:
        assert body["thinking"] == {"type": "adaptive"}
        assert body["output_config"] == {"effort": native}
    assert body["max_tokens"] == 2000


async def test_effort_and_structured_output_share_output_config(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    schema = {"type": "object", "properties": {}}
    anthropic_server.queue(AnthropicReply("{}"))
    await final(adapter, ask(ADAPTIVE.id, reasoning_effort="high", response_schema=schema))
    assert anthropic_server.last.json["output_config"] == {
        "effort": "high", "format": {"type": "json_schema", "schema": schema},
    }  # fmt: skip


# -- refused before sending --------------------------------------------------------------------

THINKS = {"reasoning_effort": "low"}
REFUSED: dict[str, tuple[ModelRequest, str]] = {
    "tools": (ask(PLAIN.id, tools=(WEATHER,)), "remove the tools"),
    "images": (ask(PLAIN.id, messages=(Message("user", "see", images=(PNG,)),)),
               "remove the images"),
    "schema": (ask(PLAIN.id, response_schema={"type": "object"}), "remove response_schema"),
    "effort on a model that does not reason": (ask(PLAIN.id, reasoning_effort="low"),
                                               "set reasoning_effort to 'none'"),
    "temperature": (ask(temperature=0.5, **THINKS),
                    "remove temperature or set reasoning_effort to none"),
    "top_p": (ask(top_p=0.5, **THINKS), "remove top_p or set reasoning_effort to none"),
    "forced tool": (ask(tools=(WEATHER,), tool_choice="required", **THINKS),
                    "set tool_choice to auto or set reasoning_effort to none"),
    "named tool": (ask(tools=(WEATHER,), tool_choice="get_weather", **THINKS),
                   "set tool_choice to auto"),
    "adaptive and temperature": (ask(ADAPTIVE.id, temperature=1.0, reasoning_effort="max"),
                                 "remove temperature"),
    "unknown tool": (ask(tools=(WEATHER,), tool_choice="get_time"), "names no tool"),
    "tool choice without tools": (ask(tool_choice="required"), "add the tools"),
    "budget too small": (ask(reasoning_effort="high", max_output_tokens=63_500),
                         "lower max_output_tokens"),
    "image type": (ask(messages=(Message("user", "", images=("data:image/tiff;base64,AAAA",)),)),
                   "convert the image"),
    "image not base64": (ask(messages=(Message("user", "", images=("data:image/png,abc",)),)),
                         "not base64"),
    "image scheme": (ask(messages=(Message("user", "", images=("file:///etc/x.png",)),)),
                     "http(s) URL"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
async def test_refused_before_anything_is_sent(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter, case: str
) -> None:
    request, advice = REFUSED[case]
    with pytest.raises(UnsupportedFeature) as refused:
        await collect(adapter, request)
    assert refused.value.kind == "unsupported" and not refused.value.retryable
    assert advice in refused.value.message
    assert refused.value.provider == PROVIDER and refused.value.model == request.model
    assert anthropic_server.requests == []


async def test_allowed_with_thinking(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    """The counterparts of the refusals: what thinking does allow goes through."""
    anthropic_server.queue(AnthropicReply("a"), AnthropicReply("b"))
    await final(adapter, ask(tools=(WEATHER,), tool_choice="none", **THINKS))
    await final(adapter, ask(temperature=0.5, reasoning_effort="none"))
    first, second = anthropic_server.requests
    assert first.json["tool_choice"] == {"type": "none"} and "thinking" in first.json
    assert second.json["temperature"] == 0.5 and "thinking" not in second.json


# -- closing -----------------------------------------------------------------------------------


def busy_connections(adapter: AnthropicAdapter) -> int:
    """Connections of the SDK's pool still serving a response (the pool is httpcore2's)."""
    pool: Any = adapter._client._client._transport._pool  # type: ignore[attr-defined]
    return sum(1 for c in pool.connections if not c.is_idle() and not c.is_closed())


async def test_closing_early_closes_the_stream(
    anthropic_server: AnthropicServer, adapter: AnthropicAdapter
) -> None:
    # The stream would stall for 30 s after its first text: closing must not wait for it.
    anthropic_server.queue(AnthropicReply("Sunny and warm.", stall_after=4))
    started = time.monotonic()
    stream = adapter.stream(ask())
    first = await anext(stream)
    assert first == TextDelta("Sunn")
    await stream.aclose()  # type: ignore[attr-defined]
    assert time.monotonic() - started < 5
    assert busy_connections(adapter) == 0  # closed now, not when garbage collected

    # A consumer cancelled while it waits for the next event.
    anthropic_server.queue(AnthropicReply("Sunny and warm.", stall_after=4))
    seen: list[StreamItem] = []
    begun = asyncio.Event()

    async def consume() -> None:
        async for item in adapter.stream(ask()):
            seen.append(item)
            begun.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(begun.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [TextDelta("Sunn")]
    assert busy_connections(adapter) == 0

    # The adapter still works, on the same client.
    anthropic_server.queue(AnthropicReply("Still here."))
    assert (await final(adapter, ask())).message.content == "Still here."
    assert len(anthropic_server.requests) == 3


async def test_unknown_models_use_the_catalog_callable(anthropic_server: AnthropicServer) -> None:
    asked: list[str] = []

    def lookup(model: str) -> ModelInfo:
        asked.append(model)
        return dataclasses.replace(PLAIN, id=model)

    adapter = make_adapter(anthropic_server, models=lookup)
    try:
        with pytest.raises(UnsupportedFeature):
            await collect(adapter, ask("claude-wire-7", tools=(WEATHER,)))
    finally:
        await adapter.aclose()
    assert asked == ["claude-wire-7"] and anthropic_server.requests == []
